"""No callable of the package a student's kernel imports earns a graded answer's points.

``tests/test_layout.py`` checks that no module of ``course/`` *defines* a graded name; this test
checks behaviour: every function and class defined in a module of ``course/`` (public and
private) is put in the place of each graded name whose signature it accepts, observed by that
assignment's probe as a graded notebook would be, and judged by the trusted judge (the course's
own references, outside the kernel). A test cell that passes means the package hands out that
answer (as ``course.b_attention.probe.blocked_future`` once handed out A's causal mask).

A candidate gets :data:`LIMIT` seconds to be observed and judged on one assignment, in a child
process (the graded calls are small; an input generator called with C's sizes, which allocates
gigabytes, is not an answer).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pkgutil
import select
import signal
from collections.abc import Callable
from functools import cache
from pathlib import Path

import matplotlib
import pytest
import torch

import course
from course import verify
from judge import core
from tests.conftest import ASSIGNMENTS, REPO

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


def course_modules() -> list[str]:
    return ["course", *(m.name for m in pkgutil.walk_packages(course.__path__, prefix="course."))]


def candidates(module_name: str) -> dict[str, Callable]:
    """Every function and class defined at the top of module ``module_name``, by name."""
    module = importlib.import_module(module_name)
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value) and getattr(value, "__module__", None) == module_name
    }


def accepts(function: Callable, count: int) -> bool:
    """Whether ``function`` can be called with ``count`` positional arguments."""
    try:
        inspect.signature(function).bind(*range(count))
    except (TypeError, ValueError):
        return False
    return True


Plan = tuple[str, dict[str, Callable]]  # an assignment, the graded names given the candidate


def plans(function: Callable, signatures: dict[str, dict[str, int]]) -> list[Plan]:
    """Per assignment, ``function`` in the place of each graded name whose signature it takes."""
    found = []
    for assignment, names in signatures.items():
        namespace = {name: function for name, count in names.items() if accepts(function, count)}
        if namespace:
            found.append((assignment, namespace))
    return found


def observe_and_judge(plans: list[Plan], folder: Path, write: int) -> None:
    """In the child: one JSON line per plan, the test cells the judge passes."""
    torch.set_num_threads(1)
    matplotlib.use("Agg")
    os.chdir(folder)
    path = str(folder / "observations.pt")
    for assignment, namespace in plans:
        verify.observe(assignment, SEED, path, namespace)
        verdicts = core.verdicts(assignment, SEED, core.load(path))
        passed = sorted(cell for cell, reason in verdicts.items() if reason is None)
        os.write(write, (json.dumps(passed) + "\n").encode())


def passed_cells(plans: list[Plan], folder: Path) -> list[list[str] | None]:
    """Per plan, the test cells that pass (``None``: over :data:`LIMIT` seconds).

    Observed and judged in child processes (forks: nothing to import again), one plan after the
    other; a plan over the limit is dropped with its child, the next ones go on in a new child.
    Whatever a candidate changes or allocates goes with the child.
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


def test_signatures_and_candidates_are_found() -> None:
    signatures = graded_signatures()
    assert signatures["a_masks"]["generate_square_subsequent_mask"] == 1
    assert signatures["b_attention"]["MultiHeadSelfAttention"] == 2
    assert sum(len(candidates(name)) for name in course_modules()) > 100


def test_the_blocked_future_of_old_would_be_caught(tmp_path: Path) -> None:
    """The test's own check: a function that gives A's causal mask earns A's mask cells; one
    that never ends earns nothing and does not stop the next plan."""

    def blocked_future(length: int) -> torch.Tensor:
        return torch.triu(torch.full((length, length), float("-inf")), diagonal=1)

    def endless(length: int) -> None:
        while True:
            pass

    mask = "generate_square_subsequent_mask"
    found = passed_cells(
        [("a_masks", {mask: endless}), ("a_masks", {mask: blocked_future})], tmp_path
    )
    assert found == [None, ["test_mask_hidden", "test_mask_visible"]]


@pytest.mark.slow  # about a minute of CPU: every callable of the package on every assignment
@pytest.mark.parametrize("module_name", course_modules())
def test_no_callable_of_the_package_reproduces_a_graded_answer(
    module_name: str, tmp_path: Path
) -> None:
    signatures = graded_signatures()
    leaks = []
    for name, function in candidates(module_name).items():
        tried = plans(function, signatures)
        for (assignment, namespace), passed in zip(
            tried, passed_cells(tried, tmp_path), strict=True
        ):
            if passed:
                where = f"{module_name}.{name} as {', '.join(sorted(namespace))} ({assignment})"
                leaks.append(f"{where} passes {', '.join(passed)}")
    assert not leaks, "graded answers importable from course/:\n" + "\n".join(leaks)
