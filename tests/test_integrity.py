"""The static reading of student code: it flags tampering and leaves honest code alone."""

from __future__ import annotations

import pytest
import torch

from course import demo, integrity
from course.submission import fill, read_notebook, reference_code
from tests.conftest import ASSIGNMENTS, REPO

PROTECTED = {"check", "check_close", "passed", "checks", "heatmap"}
HIDDEN = {"_reference_mask", "_mistaken_tables"}


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("torch.allclose = lambda *a, **k: True", "torch.allclose"),
        ("import numpy as np\nnp.allclose = len", "np.allclose"),
        ("torch.Tensor.__eq__ = lambda a, b: True", "torch.Tensor.__eq__"),
        ("setattr(torch, 'equal', lambda *a: True)", "setattr"),
        ("check_close = lambda *a, **k: None", "check_close"),
        ("def passed(what):\n    pass", "passed"),
        ("checks.diagnose_causal_mask = print", "checks.diagnose_causal_mask"),
        ("import course.grading\ncourse.grading.check = print", "course.grading.check"),
        ("import sys\nsys.modules['course.checks.masks'] = None", "sys.modules"),
        ("import sys\nsys.modules.pop('torch')", "sys.modules"),
        ("def f(sz):\n    return _reference_mask(sz)", "_reference_mask"),
        ("def f():\n    return globals()['_reference_mask']", "globals"),
        ("import sys\nframe = sys._getframe(1)", "frames"),
        ("import inspect\nstack = inspect.stack()", "frames"),
        ("text = open('../../source/a_masks/x.ipynb').read()", "test, solution or grade files"),
        (
            "import sqlite3\ndb = sqlite3.connect('../gradebook.db')",
            "test, solution or grade files",
        ),
        ("__builtins__.len = lambda x: 0", "__builtins__"),
    ],
)
def test_tampering_is_flagged(code: str, why: str) -> None:
    reasons = integrity.scan_source(code, PROTECTED, HIDDEN)
    assert reasons and any(why in r for r in reasons), reasons


@pytest.mark.parametrize(
    "code",
    [
        "self.pe = torch.zeros(3, 4)\nx.data = y",
        "torch.manual_seed(0)\nnn.init.xavier_uniform_(layer.weight)",
        "mask = torch.ones(3, 3)\nmask[0, 1] = float('-inf')",
        "%matplotlib inline\nimport math\nvalue = math.sqrt(2)",
        "with open('notes.txt', 'w') as f:\n    f.write('my notes')",
        "def f(x):\n    return x  # a syntax error below is not tampering\n",
        "def broken(:\n    pass",
    ],
)
def test_honest_code_is_not_flagged(code: str) -> None:
    assert integrity.scan_source(code, PROTECTED, HIDDEN) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_or_demo_student_is_flagged(assignment: str) -> None:
    for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
        source = read_notebook(path)
        protected, hidden = integrity.protected_names(source), integrity.hidden_names(source)
        assert hidden, f"{path.name}: hidden tests should define private names"
        codes = list(reference_code(source).values())
        for description in demo.descriptions(REPO, assignment).values():
            codes += [str(c) for c in description.get("code", {}).values()]
        for code in codes:
            assert integrity.scan_source(code, protected, hidden) == [], code


def test_runtime_guard_sees_a_replaced_function() -> None:
    snapshot = integrity.capture()
    original = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        assert integrity.replaced(snapshot) == ["torch.allclose"]
    finally:
        torch.allclose = original
    assert integrity.replaced(snapshot) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_whole_reference_notebook_is_not_flagged(assignment: str) -> None:
    """Every cell of a student notebook filled with the solutions reads as honest."""
    for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
        source = read_notebook(path)
        student = read_notebook(REPO / "release" / assignment / path.name)
        for cell in student.cells:
            cell.source = cell.source + "\n# the student's own comment"  # not the course's text
        fill(student, reference_code(source))
        assert integrity.scan_notebook(student, source, student) == []
