"""No callable of the package a student's kernel imports earns a graded answer's points.

``tests/test_layout.py`` checks that no module of ``course/`` *defines* a graded name, and
``tests/test_student_part.py`` that no function of the student wheel has an answer's code; this
test checks behaviour. Every callable found in a module of ``course/`` (functions and classes,
public and private, static methods, and any other callable object the module holds) is put in
the place of one graded name at a time, the other graded names being the reference answers (the
source notebook run in grading mode). The candidate is called
through an adapter that takes the graded name's own parameters and hands them on by position,
so its parameter names do not matter. The assignment's probe observes it as a graded notebook
would, and the trusted judge decides. A test cell that passes with the candidate, and fails
when that name is a stub that raises, is earned by the candidate: the package hands out that
answer (as ``course.b_attention.probe.blocked_future`` once handed out A's causal mask, and
``course.h_own_gpt.checks.split`` B's ``split_heads``).

A candidate gets :data:`LIMIT` seconds to be observed and judged on one graded name, in a child
process (the graded calls are small; an input generator called with C's sizes, which allocates
gigabytes, is not an answer).
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
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import matplotlib
import pytest
import torch

import course
from course import verify
from grader.notebooks import read_notebook
from judge import core
from tests.conftest import ASSIGNMENTS, REPO
from tests.direct_run import cells_to_run, grading_cells, run_notebook

SEED = 20_241
LIMIT = 4.0


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


def stub(*args: object, **kwargs: object) -> object:
    """The graded name left unanswered."""
    raise NotImplementedError()


@dataclass(frozen=True)
class Plan:
    """One graded name of one assignment given ``function``; the test cells to observe."""

    assignment: str
    name: str
    function: Callable
    cells: tuple[str, ...]


def observe_and_judge(plans: list[Plan], folder: Path, write: int) -> None:
    """In the child: one JSON line per plan, the test cells of the plan that the judge passes."""
    torch.set_num_threads(1)
    matplotlib.use("Agg")
    os.chdir(folder)
    path = str(folder / "observations.pt")
    for plan in plans:
        namespace = dict(reference_namespace(plan.assignment))
        namespace[plan.name] = plan.function
        cells = importlib.import_module(f"course.{plan.assignment}.probe").CELLS
        skipped = {cell: "not observed" for cell in cells if cell not in plan.cells}
        verify.observe(plan.assignment, SEED, path, namespace, skipped)
        verdicts = core.verdicts(plan.assignment, SEED, core.load(path))
        passed = sorted(cell for cell in plan.cells if verdicts[cell] is None)
        os.write(write, (json.dumps(passed) + "\n").encode())


def passed_cells(plans: list[Plan], folder: Path) -> list[list[str] | None]:
    """Per plan, the test cells that pass (``None``: over :data:`LIMIT` seconds).

    Observed and judged in child processes (forks: nothing to import again, the reference
    namespaces already built), one plan after the other; a plan over the limit is dropped with
    its child, the next ones go on in a new child. Whatever a candidate changes or allocates goes
    with the child.
    """
    results: list[list[str] | None] = []
    while len(results) < len(plans):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                observe_and_judge(plans[len(results) :], folder, write)
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as lines:
            while len(results) < len(plans) and select.select([lines], [], [], LIMIT)[0]:
                line = lines.readline()
                if not line:
                    break
                results.append(json.loads(line))
            else:
                if len(results) < len(plans):
                    results.append(None)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return results


@cache
def earned_by_name(folder: Path) -> dict[tuple[str, str], tuple[str, ...]]:
    """(assignment, graded name) -> the test cells that the name's answer earns: those that
    pass with every reference and fail when that name alone is a stub."""
    for assignment in ASSIGNMENTS:
        reference_namespace(assignment)  # built here, before the forks
    keys = [(a, n) for a, names in graded_signatures().items() for n in names]
    every = {a: tuple(importlib.import_module(f"course.{a}.probe").CELLS) for a in ASSIGNMENTS}
    full = passed_cells([Plan(a, n, reference_namespace(a)[n], every[a]) for a, n in keys], folder)
    stubbed = passed_cells([Plan(a, n, stub, every[a]) for a, n in keys], folder)
    earned = {}
    for (assignment, name), with_all, without in zip(keys, full, stubbed, strict=True):
        assert with_all == sorted(every[assignment]), f"{assignment}: the references fail"
        earned[(assignment, name)] = tuple(sorted(set(with_all) - set(without or [])))
        assert earned[(assignment, name)], f"no test cell depends on {name} ({assignment})"
    return earned


def plans(function: Callable, earned: dict[tuple[str, str], tuple[str, ...]]) -> list[Plan]:
    """``function`` in the place of each graded name whose signature it takes, one at a time."""
    found = []
    for assignment, names in graded_signatures().items():
        for name, count in names.items():
            if accepts(function, count):
                reference = reference_namespace(assignment)[name]
                cells = earned[(assignment, name)]
                found.append(Plan(assignment, name, adapter(function, reference), cells))
    return found


def leaks(module_name: str, folder: Path) -> list[str]:
    """Every graded test cell that a callable of module ``module_name`` earns, one line each."""
    earned = earned_by_name(folder)
    found = []
    for name, function in candidates(module_name).items():
        tried = plans(function, earned)
        for plan, passed in zip(tried, passed_cells(tried, folder), strict=True):
            if passed:
                where = f"{module_name}.{name} as {plan.name} ({plan.assignment})"
                found.append(f"{where} passes {', '.join(passed)}")
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
        [Plan("a_masks", mask, endless, cells), Plan("a_masks", mask, blocked_future, cells)],
        folder,
    )
    assert found == [None, ["test_mask_hidden", "test_mask_visible"]]


SPLIT = '''
import torch


def split(t: torch.Tensor, nhead: int) -> torch.Tensor:
    """(B, T, D) -> (B, nhead, T, D / nhead)."""
    b, length, width = t.shape
    return t.view(b, length, nhead, width // nhead).transpose(1, 2)


def merged_width(heads: torch.Tensor) -> int:
    return heads.shape[1] * heads.shape[-1]
'''


@pytest.mark.slow  # the earned cells of every graded name: about a minute
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


@pytest.mark.slow  # several minutes of CPU: every callable of the package on every graded name
@pytest.mark.parametrize("module_name", course_modules())
def test_no_callable_of_the_package_reproduces_a_graded_answer(
    module_name: str, folder: Path
) -> None:
    found = leaks(module_name, folder)
    assert not found, "graded answers importable from course/:\n" + "\n".join(found)
