"""The static reading of student code: it flags tampering and leaves honest code alone."""

from __future__ import annotations

import pytest
import torch

from course import guard
from grader.coordinator import demo
from grader.coordinator.submission import fill, reference_code
from grader.shared import tampering
from grader.shared.notebooks import read_notebook
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
        ("checks.diagnose_causal_mask_result = print", "checks.diagnose_causal_mask_result"),
        ("import course.testcells\ncourse.testcells.check = print", "course.testcells.check"),
        ("import sys\nsys.modules['course.a_masks.checks'] = None", "sys.modules"),
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
    reasons = tampering.scan_source(code, PROTECTED, HIDDEN)
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
    assert tampering.scan_source(code, PROTECTED, HIDDEN) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_or_demo_student_is_flagged(assignment: str) -> None:
    for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
        source = read_notebook(path)
        protected, hidden = tampering.protected_names(source), tampering.hidden_names(source)
        assert hidden, f"{path.name}: hidden tests should define private names"
        codes = list(reference_code(source).values())
        for description in demo.descriptions(REPO, assignment).values():
            codes += [str(c) for c in description.get("code", {}).values()]
        for code in codes:
            assert tampering.scan_source(code, protected, hidden) == [], code


def test_runtime_guard_sees_a_replaced_function() -> None:
    snapshot = guard.capture()
    original = torch.allclose
    try:
        torch.allclose = lambda *a, **k: True
        assert guard.replaced(snapshot) == ["torch.allclose"]
    finally:
        torch.allclose = original
    assert guard.replaced(snapshot) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_whole_reference_notebook_is_not_flagged(assignment: str) -> None:
    """Every cell of a student notebook filled with the solutions reads as honest."""
    for path in sorted((REPO / "source" / assignment).glob("*.ipynb")):
        source = read_notebook(path)
        student = read_notebook(REPO / "release" / assignment / path.name)
        for cell in student.cells:  # nbgrader restores the read-only cells; the rest is theirs
            if not cell.metadata.get("nbgrader", {}).get("locked"):
                cell.source = cell.source + "\n# the student's own comment"  # not the course's
        fill(student, reference_code(source))
        assert tampering.scan_notebook(student, source, assignment, ASSIGNMENTS) == []


@pytest.mark.parametrize(
    "code",
    [
        "from course.d_language_model import training",
        "import course.e_pretraining.checkpoint as ckpt",
        "from course import f_attention_exploration",
        "import importlib\nm = importlib.import_module('course.b_attention.checks')",
        "m = __import__('course.c_params.groups')",
    ],
)
def test_importing_another_assignments_module_is_flagged(code: str) -> None:
    others = [a for a in ASSIGNMENTS if a != "a_masks"]
    reasons = tampering.scan_source(code, PROTECTED, HIDDEN, others)
    assert any("another assignment" in r for r in reasons), reasons


def test_importing_the_notebooks_own_modules_is_not_flagged() -> None:
    others = [a for a in ASSIGNMENTS if a != "a_masks"]
    code = "from course.a_masks import checks\nfrom course.plots import heatmap\nimport course.data"
    assert tampering.scan_source(code, set(), set(), others) == []


def test_a_student_cell_marked_locked_is_still_read() -> None:
    """The submitted notebook's metadata is the student's: a cell claiming to be read-only
    (or to be a test cell) is read like any other unless its text is the course's own."""
    path = REPO / "source" / "a_masks" / "masks_and_positions.ipynb"
    source = read_notebook(path)
    graded = read_notebook(REPO / "release" / "a_masks" / path.name)
    cheat = graded.cells[-1].copy()
    cheat.cell_type, cheat.source = "code", "torch.allclose = lambda *a, **k: True"
    cheat.metadata = {"nbgrader": {"locked": True, "grade": True, "grade_id": "setup"}}
    cheat.outputs, cheat.execution_count = [], None
    graded.cells.append(cheat)
    reasons = tampering.scan_notebook(graded, source, "a_masks", ASSIGNMENTS)
    assert any("torch.allclose" in r for r in reasons), reasons


def test_both_sides_name_the_same_marker() -> None:
    assert guard.MARKER == tampering.MARKER


def test_hidden_markers_follow_nbgrader_configuration() -> None:
    from traitlets.config import Config

    config = Config()
    config.ClearHiddenTests.begin_test_delimeter = "SECRET BEGIN"
    config.ClearHiddenTests.end_test_delimeter = "SECRET END"
    nb = read_notebook(REPO / "source" / "a_masks" / "masks_and_positions.ipynb")
    nb.cells[-1].cell_type = "code"
    nb.cells[-1].source = "x = 1\n# SECRET BEGIN\n_hidden_thing = 2\n# SECRET END"
    hidden, visible = tampering.split_hidden(nb, config)
    assert hidden == ["_hidden_thing = 2"] and "x = 1" in visible
    assert tampering.hidden_markers() == ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
