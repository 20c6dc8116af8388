"""``course check NOTEBOOK`` in a clone: the student part's check with the hidden tests added.

nbgrader's ``validate`` prints the failing cells but always exits 0 and gives no points. This runs
the notebook with the student part's one runner (:func:`course.check.run_code`), in nbgrader's
validate mode (``NBGRADER_EXECUTION=validate``, so long cells are short), then reports each test
cell: passed or failed, with the check's message (what was expected and what came), the points
earned of the points available, and an exit code: 0 when every visible test passes, 1 when one
fails. Hidden tests are not in a student's copy; they run at grading, or, for a self-learner in a
clone of the course, here (:mod:`grader.selfstudy.selfcheck`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader import utils

from course import check as runner
from grader.selfstudy import selfcheck
from grader.shared.notebooks import read_notebook
from grader.shared.paths import use_this_python

NOT_IMPLEMENTED = runner.NOT_IMPLEMENTED
has_code = runner.has_code


@dataclass
class CellReport:
    """The outcome of one graded cell."""

    grade_id: str
    points: float
    max_points: float
    kind: str  # "test", "hidden" (no visible code) or "written"
    message: str = ""
    edited: bool = False
    hidden: bool = False  # a test cell whose hidden tests ran (a self-learner's check)


def error_message(cell: NotebookNode) -> str:
    """The student-facing message of a failed test cell (:func:`course.check.message`)."""
    return runner.message(cell.get("outputs", [])) or "failed"


def edited(cell: NotebookNode) -> bool:
    """True when a read-only cell's source no longer matches its checksum."""
    if not utils.is_locked(cell) or "checksum" not in cell.metadata.nbgrader:
        return False
    return cell.metadata.nbgrader["checksum"] != utils.compute_checksum(cell)


def execute(nb: NotebookNode, folder: Path, timeout: int = 120) -> NotebookNode:
    """Run every cell as nbgrader's validate does (errors do not stop the run), with the student
    part's runner; each code cell's outputs are written into ``nb``."""
    use_this_python()
    env = dict(os.environ, NBGRADER_VALIDATING="1", NBGRADER_EXECUTION="validate")
    ran = runner.run_code(nb.cells, folder, env, timeout)
    for cell, outputs in zip(nb.cells, ran, strict=True):
        if cell.cell_type == "code":
            cell.outputs = [nbformat.from_dict(output) for output in outputs]
    return nb


def report(nb: NotebookNode, hidden: frozenset[str] = frozenset()) -> list[CellReport]:
    """One :class:`CellReport` per graded cell of an executed notebook (``hidden``: the grade ids
    of the cells whose hidden tests ran)."""
    reports = []
    for cell in nb.cells:
        if not utils.is_grade(cell):
            continue
        meta = cell.metadata.nbgrader
        score, max_points = utils.determine_grade(cell)
        if cell.cell_type == "markdown" or utils.is_solution(cell):
            answered = score is None
            note = "graded by hand" if answered else "no answer yet"
            reports.append(CellReport(meta["grade_id"], 0.0, max_points, "written", note))
            continue
        if not has_code(cell.source):
            reports.append(CellReport(meta["grade_id"], 0.0, max_points, "hidden"))
            continue
        message = "" if score == max_points else error_message(cell)
        grade_id = meta["grade_id"]
        reports.append(
            CellReport(
                grade_id,
                float(score),
                max_points,
                "test",
                message,
                edited(cell) and grade_id not in hidden,
                grade_id in hidden,
            )
        )
    return reports


def format_report(path: Path, reports: list[CellReport]) -> str:
    """The text ``course check`` prints."""
    lines = [f"Checked {path}"]
    for r in reports:
        if r.kind == "written":
            lines.append(f"  [written] {r.grade_id} ({r.max_points:g} pt): {r.message}")
            continue
        if r.kind == "hidden":
            lines.append(f"  [hidden] {r.grade_id} ({r.max_points:g} pt): runs when graded")
            continue
        mark = "PASS" if not r.message else "FAIL"
        kind = " (hidden tests)" if r.hidden else ""
        lines.append(f"  [{mark}] {r.grade_id}{kind}: {r.points:g}/{r.max_points:g}")
        if r.message:
            lines += ["      " + line for line in r.message.splitlines()]
        if r.edited:
            lines.append("      (this test cell was edited: grading uses the original)")
    tests = [r for r in reports if r.kind == "test" and not r.hidden]
    ran_hidden = [r for r in reports if r.hidden]
    written = [r for r in reports if r.kind == "written"]
    earned = sum(r.points for r in tests)
    available = sum(r.max_points for r in tests)
    failed = sum(1 for r in tests if r.message)
    lines.append(
        f"Visible tests: {earned:g}/{available:g} points, {failed} failed of {len(tests)}."
    )
    if ran_hidden:
        earned = sum(r.points for r in ran_hidden)
        available = sum(r.max_points for r in ran_hidden)
        failed = sum(1 for r in ran_hidden if r.message)
        lines.append(
            f"Hidden tests: {earned:g}/{available:g} points, {failed} failed of "
            f"{len(ran_hidden)} (the instructor's, from source/: messages only)."
        )
    if written:
        pts = sum(r.max_points for r in written)
        lines.append(f"Written answers: {len(written)} ({pts:g} points), graded by the instructor.")
    hidden = [r for r in reports if r.kind == "hidden"]
    if hidden:
        pts = sum(r.max_points for r in hidden)
        lines.append(
            f"Hidden tests: {len(hidden)} cells ({pts:g} points), run when your work is graded."
        )
    return "\n".join(lines)


def check(path: Path, timeout: int = 120) -> tuple[int, str]:
    """Run and report ``path``; return (exit code, text). Exit 1 if a test cell fails.

    In a clone, for a learner's own copy, the hidden tests run too, and the outcome per exercise
    is recorded beside the notebook (:mod:`grader.selfstudy.selfcheck`).
    """
    nb = read_notebook(path)
    clone = selfcheck.find_clone(path)
    hidden: set[str] = set()
    if clone is not None:
        hidden = selfcheck.with_hidden_tests(nb, read_notebook(clone.source))
    reports = report(execute(nb, path.parent.resolve(), timeout), frozenset(hidden))
    code = 1 if any(r.kind == "test" and r.message for r in reports) else 0
    text = format_report(path, reports)
    if clone is not None:
        found = selfcheck.exercises(reports, hidden)
        saved = selfcheck.record(path, nb, found)
        text = text.replace(selfcheck.BY_INSTRUCTOR, selfcheck.BY_YOURSELF)
        text += "\n" + "\n".join(selfcheck.format_exercises(found))
        text += f"\n(recorded in {saved.name} for `course progress`)"
    return code, text
