"""A failed check shows its message first (course/short_traceback.py), and grades as before.

A test cell that fails raises ``GradingError``; IPython asks it for its lines
(``GradingError._render_traceback_``): the message that names the mistake, then one line that says
how to see the traceback through the course's checks (``%env COURSE_TRACEBACK=1``). The error
output keeps its name and message, which nbgrader scores and ``course check`` and the feedback
print; any other error keeps IPython's traceback.

Without a kernel: what the method gives. In a real kernel, run as ``course check`` runs a notebook
(nbgrader's ``Execute``, the grader's kernel manager, nbgrader's ``determine_grade``): assignment
A's visible test of the causal mask, on a transposed mask, before and after
``%env COURSE_TRACEBACK=1``, and a student's own bug. In a kernel forked from the warm grader's
zygote, which imported the course before any kernel existed. Through ``course autograde`` and its
feedback: the demo student ``mask_transposed`` of the graded class.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbformat import NotebookNode

from course import short_traceback
from course.testcells import GradingError, fail
from grader.selfstudy import check
from grader.shared.notebooks import read_notebook
from grader.warm.pool import WarmPool
from tests.conftest import class_outcome
from tests.test_warm_isolation import execute_warm

REPO = Path(__file__).resolve().parents[1]
MISTAKE = "generate_square_subsequent_mask(3) is transposed"  # course/a_masks/checks.py
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SHORT = 8  # lines at most, the message's included

SETUP = """import torch
from course.a_masks import checks
from course.testcells import check, check_against_reference, check_close, passed
"""
TRANSPOSED = """def generate_square_subsequent_mask(sz):
    return torch.tril(torch.full((sz, sz), float("-inf")), diagonal=-1)
"""
OWN_BUG = """def attention_scores(q, k):
    raise RuntimeError("my own bug in attention_scores")
"""
CALLS_OWN_BUG = "attention_scores(torch.ones(2, 3), torch.ones(2, 3))\n"


def text(output: NotebookNode) -> list[str]:
    """An error output's traceback as the lines a student reads (no colours)."""
    return ANSI.sub("", "\n".join(output.get("traceback", []))).splitlines()


def error_of(cell: NotebookNode) -> NotebookNode:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 1, cell.get("outputs")
    return errors[0]


def visible_mask_test() -> str:
    """The source of A's visible test of the causal mask (test_mask_visible), as graded."""
    source = read_notebook(REPO / "source/a_masks/masks_and_positions.ipynb")
    (cell,) = [
        c
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_mask_visible"
    ]
    assert "checks.diagnose_causal_mask_result(mask, 3)" in cell.source
    return cell.source


# -- without a kernel ------------------------------------------------------------------------


def test_a_grading_error_gives_its_message_then_how_to_see_the_traceback(monkeypatch) -> None:
    monkeypatch.delenv(short_traceback.VARIABLE, raising=False)
    error = GradingError("mask(3) has the wrong values.\n  expected: 0.0\n  got:      -inf")
    lines = [ANSI.sub("", line) for line in error._render_traceback_()]
    assert lines == [
        "GradingError: mask(3) has the wrong values.",
        "  expected: 0.0",
        "  got:      -inf",
        short_traceback.HIDDEN,
    ]
    assert "%env COURSE_TRACEBACK=1" in short_traceback.HIDDEN


def test_with_the_variable_the_traceback_follows_the_message(monkeypatch) -> None:
    """Outside IPython (no shell), Python's own traceback: through course/testcells.py."""
    monkeypatch.setenv(short_traceback.VARIABLE, "1")
    try:
        fail("the mask is transposed")
    except GradingError as raised:
        error = raised
    lines = [ANSI.sub("", line) for line in error._render_traceback_()]
    assert lines[0] == "GradingError: the mask is transposed"
    rest = "\n".join(lines[1:])
    assert "Traceback (most recent call last)" in rest and "testcells.py" in rest
    monkeypatch.setenv(short_traceback.VARIABLE, "0")  # 0: hidden again
    assert ANSI.sub("", error._render_traceback_()[-1]) == short_traceback.HIDDEN


def test_the_lines_never_fail() -> None:
    """IPython 9 shows no error output for an exception whose ``_render_traceback_`` raises (and
    a test cell without one would earn its points): a message that cannot be read gives the
    error's name."""

    class Unreadable(GradingError):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    assert Unreadable("x")._render_traceback_() == ["Unreadable"]


# -- in a kernel, as `course check` runs a notebook --------------------------------------------


def graded(source: str, grade_id: str) -> NotebookNode:
    meta = {"grade": True, "grade_id": grade_id, "locked": True, "points": 1, "solution": False}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {**meta, "schema_version": 3}})


def answer(source: str, grade_id: str) -> NotebookNode:
    meta = {"grade": False, "grade_id": grade_id, "locked": False, "solution": True}
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {**meta, "schema_version": 3}})


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> NotebookNode:
    """A's visible mask test on a transposed mask, a student's own bug, the variable set, the
    mask test again: one kernel, run by nbgrader's Execute as `course check` runs it (a few
    seconds: not `slow`)."""
    test = visible_mask_test()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        answer(TRANSPOSED + "\n" + OWN_BUG, "answers"),
        graded(test, "test_mask_visible"),
        graded(CALLS_OWN_BUG, "test_own_bug"),
        nbformat.v4.new_code_cell("%env COURSE_TRACEBACK=1"),
        graded(test, "test_mask_again"),
    ]
    folder = tmp_path_factory.mktemp("message_first")
    path, environment = os.environ.get("PATH", ""), os.environ.pop(short_traceback.VARIABLE, None)
    try:
        return check.execute(nb, folder)
    finally:
        os.environ["PATH"] = path  # check.execute puts this Python's folder first
        if environment is not None:
            os.environ[short_traceback.VARIABLE] = environment


def cell(nb: NotebookNode, grade_id: str) -> NotebookNode:
    (found,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    return found


def test_a_failed_check_shows_the_mistake_first_and_briefly(ran: NotebookNode) -> None:
    error = error_of(cell(ran, "test_mask_visible"))
    lines = text(error)
    assert any(MISTAKE in line for line in lines[:3]), lines
    assert len(lines) <= SHORT, lines
    assert lines[-1] == short_traceback.HIDDEN
    assert not any("checks.py" in line or "testcells.py" in line for line in lines), lines
    # What grading and `course check` read is unchanged: the error's name and its message.
    assert error.ename == "GradingError"
    assert error.evalue.startswith(MISTAKE) and "block j > i" in error.evalue


def test_with_the_variable_the_full_traceback_follows_the_message(ran: NotebookNode) -> None:
    error = error_of(cell(ran, "test_mask_again"))
    lines = text(error)
    assert MISTAKE in lines[0], lines[:3]
    rest = "\n".join(lines[1:])
    assert "Traceback (most recent call last)" in rest
    assert "course/a_masks/checks.py" in rest and "course/testcells.py" in rest
    assert rest.rstrip().splitlines()[-1].startswith(f"GradingError: {MISTAKE}")
    assert (error.ename, error.evalue) == (
        "GradingError",
        error_of(cell(ran, "test_mask_visible")).evalue,
    )


def test_only_the_checks_are_shortened_a_students_own_bug_is_not(ran: NotebookNode) -> None:
    """A RuntimeError in the student's function: IPython's traceback, down to that function's
    line; beside it the failed check of the same kernel is short."""
    error = error_of(cell(ran, "test_own_bug"))
    lines = text(error)
    assert error.ename == "RuntimeError" and error.evalue == "my own bug in attention_scores"
    assert "Traceback (most recent call last)" in lines[1], lines[:3]
    assert any("in attention_scores" in line for line in lines), lines
    assert 'raise RuntimeError("my own bug in attention_scores")' in "\n".join(lines)
    assert lines[-1] == "RuntimeError: my own bug in attention_scores"
    assert short_traceback.HIDDEN not in lines
    assert len(text(error_of(cell(ran, "test_mask_visible")))) <= SHORT


def test_the_failed_cell_earns_nothing_and_course_check_prints_the_message(
    ran: NotebookNode,
) -> None:
    """nbgrader's scoring (determine_grade, as autograde scores) of the cells that ran with the
    short traceback, and the report `course check` prints."""
    assert len(text(error_of(cell(ran, "test_mask_visible")))) <= SHORT  # shown short, and:
    reports = {r.grade_id: r for r in check.report(ran)}
    assert reports["test_mask_visible"].points == 0.0
    assert reports["test_own_bug"].points == 0.0
    assert reports["test_mask_again"].points == 0.0
    assert reports["test_mask_visible"].message.startswith(MISTAKE)
    printed = check.format_report(Path("masks.ipynb"), list(reports.values()))
    assert "[FAIL] test_mask_visible: 0/1" in printed
    assert f"      {MISTAKE}" in printed and short_traceback.HIDDEN not in printed


# -- in kernels forked from the warm zygote, and through `course autograde` ---------------------


@pytest.mark.slow  # a zygote that imports torch and the course: some 15 s
def test_a_kernel_forked_from_the_zygote_shows_the_message_first(tmp_path: Path) -> None:
    """The zygote imported course.testcells before any kernel existed (PRELOAD): its kernels
    import nothing again, and show a failed check the same way."""
    pool = WarmPool(1, {})
    try:
        with pool.worker() as zygote:
            work = zygote.root / "message_first" / "submitted" / "student" / "a"
            work.mkdir(parents=True)
            preloaded = "import sys\nprint('course.testcells' in sys.modules)"
            cells = [preloaded, SETUP + TRANSPOSED + visible_mask_test()]
            nb = execute_warm(zygote, work, cells)
    finally:
        pool.close()
    assert nb.cells[0].outputs[0].text.strip() == "True"  # preloaded: imported by the zygote
    error = error_of(nb.cells[1])
    lines = text(error)
    assert MISTAKE in lines[0] and len(lines) <= SHORT, lines
    assert (error.ename, error.evalue.startswith(MISTAKE)) == ("GradingError", True)


@pytest.mark.slow
def test_the_graded_notebook_and_its_feedback_show_the_message_first(graded_class: Path) -> None:
    """The demo student ``mask_transposed``, graded by `course autograde` in kernels forked from
    the warm zygote: its visible mask test shows the mistake first, earns nothing, and the
    feedback page shows the message with no traceback through the checks."""
    notebook = "a_masks/masks_and_positions"
    autograded = read_notebook(graded_class / f"autograded/mask_transposed/{notebook}.ipynb")
    error = error_of(cell(autograded, "test_mask_visible"))
    lines = text(error)
    assert MISTAKE in lines[0] and len(lines) <= SHORT, lines
    assert error.ename == "GradingError" and error.evalue.startswith(MISTAKE)
    scores, _, _ = class_outcome(graded_class, *notebook.split("/"), ["mask_transposed"])[
        "mask_transposed"
    ]
    assert scores["test_mask_visible"] == 0.0  # in the gradebook
    page = (graded_class / f"feedback/mask_transposed/{notebook}.html").read_text()
    shown = page.index(MISTAKE)
    assert "a_masks/checks.py" not in page and "course/testcells.py" not in page
    assert page.index("The traceback through the course") > shown
