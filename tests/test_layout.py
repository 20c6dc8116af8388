"""The two sides of the repository stay apart, and no graded answer ships in the package.

- ``course/`` (the notebook side) runs in the student's kernel: it never imports nbgrader or
  the grader;
- ``grader/`` (the ``course`` command) runs in the instructor's process: it never imports torch
  or the notebook side;
- ``course/`` has one subpackage per assignment, mirroring ``source/`` and ``demo/``;
- no module of ``course/`` defines a graded function or class, under its name or under the
  names its copies once had there.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys

import pytest

import course
import grader
from tests.conftest import ASSIGNMENTS, REPO

# Names that graded answers once had in the package (issue: answers importable from `course`).
FORMER_COPIES = {"causal_mask", "TransformerLM", "PositionalEncoding", "_rows", "count_parameters"}


def modules(package) -> list[str]:
    return sorted(
        m.name for m in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
    )


def imported_after(names: list[str]) -> set[str]:
    """Top-level module names that a fresh interpreter holds after importing ``names``."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout))


def test_the_grader_never_imports_torch_or_the_notebook_side() -> None:
    loaded = imported_after(modules(grader))
    assert "grader" in loaded
    assert not loaded & {"torch", "course"}, loaded & {"torch", "course"}


def test_the_notebook_side_never_imports_nbgrader_or_the_grader() -> None:
    loaded = imported_after(modules(course))
    assert "torch" in loaded and "course" in loaded
    assert not loaded & {"nbgrader", "grader"}, loaded & {"nbgrader", "grader"}


def test_the_judge_never_imports_nbgrader_or_the_grader() -> None:
    """The trusted judge (``judge/``) reads observations with torch and the course's checks."""
    import judge

    loaded = imported_after(modules(judge))
    assert "torch" in loaded and "judge" in loaded
    assert not loaded & {"nbgrader", "grader"}, loaded & {"nbgrader", "grader"}
    assert "judge" not in imported_after(modules(course)), "the kernel side imports the judge"


def test_one_package_per_assignment_mirrors_source_and_demo() -> None:
    for assignment in ASSIGNMENTS:
        package = REPO / "course" / assignment
        assert (package / "__init__.py").is_file(), f"course/{assignment}/ is missing"
        assert (package / "checks.py").is_file(), f"course/{assignment}/checks.py is missing"
        assert (package / "probe.py").is_file(), f"course/{assignment}/probe.py is missing"
        assert (REPO / "judge" / f"{assignment}.py").is_file(), f"judge/{assignment}.py"
        assert (REPO / "demo" / assignment).is_dir(), f"demo/{assignment}/ is missing"
    packages = {p.parent.name for p in (REPO / "course").glob("*/__init__.py")}
    assert packages - set(ASSIGNMENTS) == {"data"}, packages


def graded_names() -> set[str]:
    """Every function and class that a solution cell of an instructor's notebook defines."""
    names = set()
    for path in REPO.glob("source/*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("solution") and cell["cell_type"] == "code":
                tree = ast.parse("".join(cell["source"]))
                names |= {
                    n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                }
    return names


def test_graded_names_are_found() -> None:
    assert {"generate_square_subsequent_mask", "TransformerModel", "mask_tokens"} <= graded_names()


@pytest.mark.parametrize("path", sorted((REPO / "course").rglob("*.py")), ids=str)
def test_no_graded_answer_is_defined_in_the_package(path) -> None:
    tree = ast.parse(path.read_text())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    leaked = defined & (graded_names() | FORMER_COPIES)
    assert not leaked, f"{path.relative_to(REPO)} defines {leaked}: graded answers"
