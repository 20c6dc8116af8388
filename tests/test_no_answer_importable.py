"""No callable of the package a student's kernel imports earns a graded answer's points.

``tests/test_layout.py`` checks that no module of ``course/`` *defines* a graded name, and
``tests/test_student_part.py`` that no function of the student wheel has an answer's code; this
test checks behaviour. Every callable found in a module of ``course/`` (functions and classes,
public and private, static methods, and any other callable object the module holds) is put in
the place of one graded name at a time, the other graded names being the reference answers (the
source notebook run in grading mode). The candidate is called
through an adapter that takes the graded name's own parameters and hands them on by position,
so its parameter names do not matter. The assignment's probe observes it as a graded notebook
would, and the trusted judge decides. A test cell whose observation reads that name (with the
reference answers) and that passes with the candidate is earned by the candidate: the package
hands out that answer (as ``course.b_attention.probe.blocked_future`` once handed out A's
causal mask, and ``course.h_own_gpt.checks.split`` B's ``split_heads``).

A candidate gets :data:`LIMIT` seconds to be observed and judged on one graded name, in a child
process (the graded calls are small). A candidate that runs past it is *not decided*: the scan
cannot tell whether it earns a cell, so it is reported and fails the test, unless :data:`SLOW`
lists the callable with the reason it runs long (an input generator called with C's sizes, which
allocates gigabytes, is not an answer); a listed one is still reported, as a warning.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import select
import signal
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import matplotlib
import psutil
import pytest
import torch

import course
from course import verify
from grader.shared.notebooks import read_notebook
from judge import core
from tests.conftest import ASSIGNMENTS, REPO
from tests.direct_run import cells_to_run, grading_cells, run_notebook

SEED = 20_241
LIMIT = 2.5  # a graded call takes well under a second
BASELINE_LIMIT = 300.0  # the reference answers on every test cell of an assignment
# Callables of course/ that may run past LIMIT in the place of a graded name, "module.name": why
# such a run is no answer. Any other callable over the limit fails the scan as "not decided".
# Seen over the limit on the 2-core machine (2026-12, one assignment at a time, the machine busy).
_SIZED = "called with C's sizes (a vocabulary, a model's width) it allocates gigabytes"
_READS = "reads the course's corpora from disk (or asks the Hugging Face hub, out of reach here)"
_DRAWS = "draws a matplotlib figure: seconds of CPU on a busy machine"
SLOW: dict[str, str] = {
    "course.a_masks.probe.encoding_input": f"{_SIZED}; a tensor, not a count or a module",
    "course.d_language_model.baselines.LSTMModel": f"{_SIZED} of weights; an LSTM, no count",
    "course.d_language_model.head_checks.induction_inputs": f"{_SIZED}; one-hot patterns",
    "course.d_language_model.head_plots.head_labels": (
        "one label per layer and head: called with C's sizes, tens of millions of strings"
    ),
    "course.d_language_model.head_plots.plot_attention_grid": f"{_DRAWS}; it returns None",
    "course.plots.heatmap": f"{_DRAWS}; it returns the Axes it drew on",
    "course.plots.mask_heatmap": f"{_DRAWS}; it returns a figure",
    "course.e_pretraining.kv_cache_checks.readable_step_inputs": f"{_SIZED}; KV-cache inputs",
    "course.e_pretraining.kv_cache_checks.sequence_inputs": f"{_SIZED}; attention inputs",
    "course.e_pretraining.text.held_out_sentences": f"{_READS}; a list of sentences",
    "course.e_pretraining.text.pretraining_texts": f"{_READS}; a dict of text lists",
    "course.e_pretraining.text.review_sentences": f"{_READS}; a list of sentences",
    "course.e_pretraining.text.review_validation_sentences": f"{_READS}; a list of sentences",
    "course.data.corpora.load_tiny_shakespeare": f"{_READS}; a dataset of lines",
    "course.data.corpora.load_polarity": f"{_READS}; a dataset of sentences",
    "course.data.corpora.load_novels": f"{_READS}; a dataset of paragraphs",
    "course.data.corpora.load_wikitext": f"{_READS}; a list of lines",
    "course.data.corpora.load_wiki_lines": f"{_READS}; a list of lines",
    "course.data.corpora.load_birth_places": f"{_READS}; a list of pairs of strings",
    "course.data.corpora._shakespeare_lines": f"{_READS}; a list of lines",
    "course.data.corpora._polarity_sentences": f"{_READS}; a dataset of sentences",
    "course.data.corpora._stratified_split": (
        "splits a dataset of the corpora (datasets' own code, slow to refuse other values); "
        "a pair of datasets"
    ),
    "course.h_own_gpt.recipe_checks.GroupModel": (
        f"{_SIZED} of embeddings (2.5 s idle, as count_encoder_layer); a module, not a count"
    ),
    "course.f_attention_exploration.experiments.sample_keys": (
        f"{_SIZED}: as many key samples as it is asked for; a tensor of keys"
    ),
}


class NotDecided(UserWarning):
    """A callable listed in :data:`SLOW` ran past :data:`LIMIT`: the scan did not decide it."""


def required_arguments(node: ast.FunctionDef, method: bool) -> int:
    """How many positional arguments a call of ``node`` must give (``self`` aside)."""
    count = len(node.args.posonlyargs) + len(node.args.args) - len(node.args.defaults)
    return count - 1 if method else count


@cache
def graded_signatures() -> dict[str, dict[str, int]]:
    """assignment -> graded name -> its required positional arguments, from the solutions."""
    found: dict[str, dict[str, int]] = {}
    for assignment in ASSIGNMENTS:
        names = found.setdefault(assignment, {})
        for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
            for cell in json.loads(path.read_text())["cells"]:
                meta = cell["metadata"].get("nbgrader", {})
                if cell["cell_type"] != "code" or not meta.get("solution"):
                    continue
                for node in ast.parse("".join(cell["source"])).body:
                    if isinstance(node, ast.FunctionDef):
                        names[node.name] = required_arguments(node, method=False)
                    elif isinstance(node, ast.ClassDef):
                        init = [n for n in node.body if getattr(n, "name", "") == "__init__"]
                        names[node.name] = required_arguments(init[0], method=True) if init else 0
    return found


@cache
def reference_namespace(assignment: str) -> dict:
    """The namespace of a graded notebook of ``assignment`` with the reference answers: the
    source notebook's cells run as grading runs them (``COURSE_FAST=1``), from a scratch
    folder."""
    namespace: dict = {"__name__": "__main__"}
    before = os.environ.get("COURSE_FAST")
    os.environ["COURSE_FAST"] = "1"
    try:
        with contextlib.chdir(tempfile.mkdtemp(prefix=f"{assignment}-")):
            for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
                cells = grading_cells(read_notebook(path), read_notebook(path))
                ran = run_notebook(cells_to_run(cells), namespace)
                raised = [f"{o.cell}: {o.message}" for o in ran if o.ename]
                assert not raised, f"the reference cells of {assignment} raise: {raised}"
    finally:
        if before is None:
            del os.environ["COURSE_FAST"]
        else:
            os.environ["COURSE_FAST"] = before
    return namespace


def course_modules(package: types.ModuleType = course) -> list[str]:
    prefix = f"{package.__name__}."
    return [package.__name__, *(m.name for m in pkgutil.walk_packages(package.__path__, prefix))]


def candidates(module_name: str) -> dict[str, Callable]:
    """Every callable that module ``module_name`` defines or holds, by name: its functions and
    classes (not those it imports), their static and class methods, and any other callable
    object at its top (a ``functools.partial``, an instance with ``__call__``)."""
    module = importlib.import_module(module_name)
    found: dict[str, Callable] = {}
    for name, value in vars(module).items():
        if not callable(value) or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
            if getattr(value, "__module__", None) != module_name:
                continue  # imported: tried in the module that defines it
        found[name] = value
        if isinstance(value, type) and value.__module__ == module_name:
            for attribute, raw in vars(value).items():
                if isinstance(raw, staticmethod | classmethod):
                    found[f"{name}.{attribute}"] = getattr(value, attribute)
    return found


def accepts(function: Callable, count: int) -> bool:
    """Whether ``function`` can be called with ``count`` positional arguments."""
    try:
        inspect.signature(function).bind(*range(count))
    except (TypeError, ValueError):
        return False
    return True


def adapter(candidate: Callable, reference: Callable) -> Callable:
    """``candidate`` called with the graded name's parameters, whatever it names its own: a call
    is bound to the reference's signature and handed on by position. A class in the place of
    a graded class stays itself (the probes build and subclass modules)."""
    if isinstance(candidate, type) and isinstance(reference, type):
        return candidate
    signature = inspect.signature(reference)

    def adapted(*args: object, **kwargs: object) -> object:
        bound = signature.bind(*args, **kwargs)
        return candidate(*bound.args, **bound.kwargs)

    return adapted


@dataclass(frozen=True)
class Plan:
    """Graded names of one assignment given other functions (the rest keep their reference
    answers); the test cells to observe."""

    assignment: str
    given: dict[str, Callable]
    cells: tuple[str, ...]


class Reading(dict):
    """A namespace that notes every name the code given it reads (``student(ns, name)``)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def get(self, key: str, default: object = None) -> object:
        self.read.add(key)
        return super().get(key, default)


def _in_child(folder: Path) -> str:
    """What every child does first; the path of its observations."""
    torch.set_num_threads(1)
    matplotlib.use("Agg")
    os.chdir(folder)
    return str(folder / "observations.pt")


def _verdicts(assignment: str, namespace: dict, cells: tuple[str, ...], path: str) -> dict:
    """Observe ``cells`` only (the others are not called) and judge them."""
    every = importlib.import_module(f"course.{assignment}.probe").CELLS
    skipped = {cell: "not observed" for cell in every if cell not in cells}
    verify.observe(assignment, SEED, path, namespace, skipped)
    return core.verdicts(assignment, SEED, core.load(path))


def observe_and_judge(plans: list[Plan], folder: Path, write: int) -> None:
    """In the child: one JSON line per plan, the test cells of the plan that the judge passes."""
    path = _in_child(folder)
    for plan in plans:
        namespace = {**reference_namespace(plan.assignment), **plan.given}
        verdicts = _verdicts(plan.assignment, namespace, plan.cells, path)
        passed = sorted(cell for cell in plan.cells if verdicts[cell] is None)
        os.write(write, (json.dumps(passed) + "\n").encode())


def observe_the_references(assignments: list[str], folder: Path, write: int) -> None:
    """In the child: one JSON line per assignment, for each test cell with the reference
    answers, whether it passes and the graded names its observation reads."""
    path = _in_child(folder)
    for assignment in assignments:
        graded = set(graded_signatures()[assignment])
        found = {}
        for cell in importlib.import_module(f"course.{assignment}.probe").CELLS:
            namespace = Reading(reference_namespace(assignment))
            verdict = _verdicts(assignment, namespace, (cell,), path)[cell]
            found[cell] = {"verdict": verdict, "reads": sorted(namespace.read & graded)}
        os.write(write, (json.dumps(found) + "\n").encode())


def in_children(
    work: list, folder: Path, child: Callable[[list, Path, int], None], limit: float
) -> list:
    """Per piece of ``work``, the JSON line that ``child`` wrote for it (``None``: over
    ``limit`` seconds, see :func:`next_line_within`).

    Done in child processes (forks: nothing to import again, the reference namespaces already
    built), one piece after the other; a piece over the limit is dropped with its child, the
    next ones go on in a new child. Whatever a candidate changes or allocates goes with the
    child.
    """
    results: list = []
    while len(results) < len(work):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                child(work[len(results) :], folder, write)
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as lines:
            while len(results) < len(work) and next_line_within(lines, pid, limit):
                line = lines.readline()
                if not line:
                    break
                results.append(json.loads(line))
            else:
                if len(results) < len(work):
                    results.append(None)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return results


def next_line_within(lines: object, pid: int, limit: float) -> bool:
    """Whether the child ``pid`` writes its next line before it spends ``limit`` seconds of
    processor time on it, or four times that waiting (a call that sleeps): counted in processor
    time, a loaded machine slows the child without making a quick call look endless."""
    child = psutil.Process(pid)
    try:
        spent = sum(child.cpu_times()[:2])
        start = time.monotonic()
        while not select.select([lines], [], [], 0.05)[0]:
            used = sum(child.cpu_times()[:2]) - spent
            if used > limit or time.monotonic() - start > 4 * limit:
                return False
    except psutil.Error:  # it ended: its pipe tells
        pass
    return True


def passed_cells(plans: list[Plan], folder: Path) -> list[list[str] | None]:
    """Per plan, the test cells that pass (``None``: over :data:`LIMIT` seconds)."""
    for plan in plans:
        reference_namespace(plan.assignment)  # built here, before the forks
    return in_children(plans, folder, observe_and_judge, LIMIT)


Reads = dict[str, dict[str, frozenset[str]]]  # assignment -> test cell -> graded names read


@cache
def reads_by_cell(folder: Path) -> Reads:
    """The graded names that each test cell's observation reads. Every test cell must pass
    with the reference answers (each assignment observed within :data:`BASELINE_LIMIT`
    seconds), and every graded name be read by a cell."""
    for assignment in ASSIGNMENTS:
        reference_namespace(assignment)  # built here, before the forks
    reads: Reads = {}
    found = in_children(ASSIGNMENTS, folder, observe_the_references, BASELINE_LIMIT)
    for assignment, cells in zip(ASSIGNMENTS, found, strict=True):
        assert cells is not None, f"{assignment}: the references take over {BASELINE_LIMIT} s"
        failed = {cell: seen["verdict"] for cell, seen in cells.items() if seen["verdict"]}
        assert not failed, f"{assignment}: the reference answers fail {failed}"
        reads[assignment] = {cell: frozenset(seen["reads"]) for cell, seen in cells.items()}
        unread = set(graded_signatures()[assignment]).difference(*reads[assignment].values())
        assert not unread, f"no test cell of {assignment} reads {sorted(unread)}"
    return reads


def groups(names: list[str], cells: dict[str, frozenset[str]]) -> list[list[str]]:
    """``names`` in groups such that no test cell reads two names of one group: a cell that
    passes when a whole group is given one candidate is earned by the one name it reads."""
    found: list[list[str]] = []
    for name in names:
        apart = [
            g for g in found if not any(name in r and r.intersection(g) for r in cells.values())
        ]
        if apart:
            apart[0].append(name)
        else:
            found.append([name])
    return found


def plans(function: Callable, reads: Reads) -> list[Plan]:
    """``function`` in the place of each graded name whose signature it takes: of the names
    of one group (:func:`groups`) at once, the other names keeping their reference answers;
    the test cells that read one of the group's names observed."""
    found = []
    for assignment, names in graded_signatures().items():
        taken = [name for name, count in names.items() if accepts(function, count)]
        for group in groups(taken, reads[assignment]):
            references = reference_namespace(assignment)
            given = {name: adapter(function, references[name]) for name in group}
            cells = [c for c, read in reads[assignment].items() if read.intersection(group)]
            found.append(Plan(assignment, given, tuple(sorted(cells))))
    return found


def verdict_lines(
    callable_name: str, plan: Plan, passed: list[str] | None, reads: Reads
) -> list[str]:
    """What the scan says of the callable ``callable_name`` ("module.name") given ``plan``: a
    line per graded name whose cells it earns, or, when it ran past :data:`LIMIT` (``passed``
    is None), a line per graded name saying it was not decided (a warning only for a callable
    of :data:`SLOW`)."""
    found = []
    for graded in sorted(plan.given):
        where = f"{callable_name} as {graded} ({plan.assignment})"
        if passed is None:
            line = f"{where} not decided: over {LIMIT} s of CPU"
            if callable_name in SLOW:
                said = f"{line} (listed slow: {SLOW[callable_name]})"
                warnings.warn(said, NotDecided, stacklevel=2)
            else:
                found.append(f"{line} (list it in SLOW with its reason if it may be slow)")
            continue
        earned = [c for c in passed if graded in reads[plan.assignment][c]]
        if earned:
            found.append(f"{where} passes {', '.join(earned)}")
    return found


def leaks(module_name: str, folder: Path) -> list[str]:
    """Every graded test cell that a callable of module ``module_name`` earns, and every graded
    name on which one was not decided: one line per callable and graded name."""
    reads = reads_by_cell(folder)
    found = []
    for name, function in candidates(module_name).items():
        tried = plans(function, reads)
        for plan, passed in zip(tried, passed_cells(tried, folder), strict=True):
            found += verdict_lines(f"{module_name}.{name}", plan, passed, reads)
    return found


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("observations")


def test_signatures_and_candidates_are_found() -> None:
    signatures = graded_signatures()
    assert signatures["a_masks"]["generate_square_subsequent_mask"] == 1
    assert signatures["b_attention"]["MultiHeadSelfAttention"] == 2
    assert sum(len(candidates(name)) for name in course_modules()) > 100


def test_the_blocked_future_of_old_would_be_caught(folder: Path) -> None:
    """The test's own check: a function that gives A's causal mask earns A's mask cells; one
    that never ends earns nothing and does not stop the next plan."""

    def blocked_future(length: int) -> torch.Tensor:
        return torch.triu(torch.full((length, length), float("-inf")), diagonal=1)

    def endless(length: int) -> None:
        while True:
            pass

    cells = ("test_mask_hidden", "test_mask_visible")
    mask = "generate_square_subsequent_mask"
    found = passed_cells(
        [Plan("a_masks", {mask: endless}, cells), Plan("a_masks", {mask: blocked_future}, cells)],
        folder,
    )
    assert found == [None, ["test_mask_hidden", "test_mask_visible"]]


def test_a_callable_over_the_limit_is_not_decided_and_fails_the_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The test's own check: a plan that ran past the limit is a line of the scan's failure
    ("not decided"), not a pass; listed in SLOW it is a warning that names its reason."""
    mask = "generate_square_subsequent_mask"
    plan = Plan("a_masks", {mask: print}, ("test_mask_hidden", "test_mask_visible"))
    reads = {"a_masks": {"test_mask_hidden": frozenset({mask}), "test_mask_visible": frozenset()}}
    assert verdict_lines("course.x.endless", plan, None, reads) == [
        f"course.x.endless as {mask} (a_masks) not decided: over {LIMIT} s of CPU "
        "(list it in SLOW with its reason if it may be slow)"
    ]
    assert verdict_lines("course.x.endless", plan, [], reads) == []
    assert verdict_lines("course.x.endless", plan, ["test_mask_hidden"], reads) == [
        f"course.x.endless as {mask} (a_masks) passes test_mask_hidden"
    ]
    monkeypatch.setitem(SLOW, "course.x.endless", "allocates C's inputs")
    with pytest.warns(NotDecided, match="listed slow: allocates C's inputs"):
        assert verdict_lines("course.x.endless", plan, None, reads) == []


def test_every_callable_listed_slow_exists() -> None:
    """SLOW names callables the scan tries, each with a reason."""
    tried = {f"{module}.{name}" for module in course_modules() for name in candidates(module)}
    for name, reason in SLOW.items():
        assert reason and name in tried, name


SPLIT = '''
import torch


def split(t: torch.Tensor, nhead: int) -> torch.Tensor:
    """(B, T, D) -> (B, nhead, T, D / nhead)."""
    b, length, width = t.shape
    return t.view(b, length, nhead, width // nhead).transpose(1, 2)


def merged_width(heads: torch.Tensor) -> int:
    return heads.shape[1] * heads.shape[-1]
'''


@pytest.mark.slow  # the reference answers observed first: about a minute
def test_a_helper_that_is_an_answer_under_other_names_is_caught(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test's own check, on a package that still has ``course.h_own_gpt.checks.split``
    (B's ``split_heads`` under another name, with other parameter names): the scan of its
    module finds it, and only it, as B's split_heads."""
    package = tmp_path / "leaky"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text(SPLIT)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("leaky", None)
    leaky = importlib.import_module("leaky")
    assert course_modules(leaky) == ["leaky", "leaky.helpers"]
    assert leaks("leaky", folder) == []
    assert leaks("leaky.helpers", folder) == [
        "leaky.helpers.split as split_heads (b_attention) passes test_heads_hidden, "
        "test_heads_visible"
    ]


@pytest.mark.deep  # several minutes of CPU: every callable of the package on every graded name
@pytest.mark.slow
@pytest.mark.parametrize("module_name", course_modules())
def test_no_callable_of_the_package_reproduces_a_graded_answer(
    module_name: str, folder: Path
) -> None:
    found = leaks(module_name, folder)
    assert not found, "graded answers importable from course/:\n" + "\n".join(found)
