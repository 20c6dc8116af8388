"""The demo class, graded once through nbgrader: every student gets what their description says.

The students graded here are :func:`tests.conftest.pipeline_students` (all of them run in-process
in ``test_checks_direct.py``).

- the reference student gets every autograded point, the blank one none;
- each student with a typical mistake loses the points of exactly the tests that target it,
  with a message that names the mistake;
- students with other correct implementations get every autograded point;
- every cell's score and message, every line of the grading report and the grade table are
  those recorded in ``tests/graded_class.json`` (``tests/graded_class_record.py``).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from grader.coordinator import demo
from grader.shared import report
from tests.conftest import ASSIGNMENTS, REPO, pipeline_students
from tests.graded_class_record import autograded_cells, outcome, recorded, table_rows

STUDENTS = [(a, s) for a in ASSIGNMENTS for s in pipeline_students(a)]


def test_every_assignment_has_a_demo_class() -> None:
    for assignment in ASSIGNMENTS:
        students = demo.descriptions(REPO, assignment)
        mistakes = [s for s, d in students.items() if d.get("expect", {}).get("fail")]
        correct = [s for s, d in students.items() if d.get("expect", {}).get("full_marks")]
        assert len(mistakes) >= 3, f"{assignment}: too few students with typical mistakes"
        assert len(correct) >= 3, f"{assignment}: need the reference and 2 other correct styles"


@pytest.mark.parametrize(("assignment", "student"), STUDENTS, ids=[f"{a}-{s}" for a, s in STUDENTS])
def test_student_is_graded_as_described(graded_class: Path, assignment: str, student: str) -> None:
    expect = demo.descriptions(REPO, assignment)[student].get("expect", {})
    cells = autograded_cells(graded_class, assignment, student)
    lost = {gid for gid, c in cells.items() if c["score"] < c["max"]}
    report = "\n".join(
        f"{g}: {c['score']}/{c['max']} {c['message'][:300]}" for g, c in cells.items()
    )
    if expect.get("full_marks"):
        assert not lost, f"{student} should get full marks:\n{report}"
    elif expect.get("zero"):
        assert all(c["score"] == 0 for c in cells.values()), f"{student} should get 0:\n{report}"
    else:
        targeted = set(expect["fail"])
        assert lost == targeted, f"{student}: expected to lose exactly {targeted}:\n{report}"
        word = expect["message"].lower()
        for gid in targeted:
            message = cells[gid]["message"].lower()
            assert word in message, f"{student}/{gid}: message should name '{word}': {message}"


def test_blank_release_fails_only_because_of_the_stubs(graded_class: Path) -> None:
    for assignment in ASSIGNMENTS:
        for path in (graded_class / "autograded" / demo.BLANK / assignment).glob("*.ipynb"):
            nb = nbformat.read(str(path), as_version=4)
            for cell in nb.cells:
                for output in cell.get("outputs", []):
                    if output.get("output_type") == "error":
                        assert output["ename"] == "NotImplementedError", (
                            f"{path.name}: a cell fails with {output['ename']}: {output['evalue']}"
                        )


def test_reference_runs_top_to_bottom_without_an_error(graded_class: Path) -> None:
    """The reference student is the instructor's notebook as nbgrader runs it (release, the
    solutions, the hidden tests restored): every cell runs, in grading mode, without an error.
    (Its full marks are checked above; this covers the cells that are not tests.)"""
    for assignment in ASSIGNMENTS:
        paths = sorted((graded_class / "autograded" / "reference" / assignment).glob("*.ipynb"))
        assert paths, f"no autograded notebook of the reference student for {assignment}"
        for path in paths:
            nb = nbformat.read(str(path), as_version=4)
            errors = [
                f"cell {i}: {o['ename']}: {o['evalue'][:300]}"
                for i, cell in enumerate(nb.cells)
                for o in cell.get("outputs", [])
                if o.get("output_type") == "error"
            ]
            assert not errors, f"{assignment}/{path.name}:\n" + "\n".join(errors)
            ran = [c for c in nb.cells if c.cell_type == "code" and c.execution_count]
            assert len(ran) == sum(c.cell_type == "code" for c in nb.cells), "a cell did not run"


def test_grading_gives_what_was_recorded(graded_class: Path) -> None:
    """Scores and messages per test cell, report lines and grade table, as recorded: a change
    to the grader that keeps behaviour keeps all of them (re-record only for a course change)."""
    expected, got = recorded(ASSIGNMENTS), outcome(graded_class, ASSIGNMENTS)
    assert sorted(got["cells"]) == sorted(expected["cells"])
    for key, cells in expected["cells"].items():
        assert got["cells"][key] == cells, f"{key}: cells differ from tests/graded_class.json"
    assert got["report"] == expected["report"]
    if expected["grade_table"] is not None:
        students = {s for a in ASSIGNMENTS for s in pipeline_students(a)}
        table = table_rows(expected["grade_table"], students)
        assert table_rows(got["grade_table"], students) == table


def test_no_honest_demo_student_is_flagged(graded_class: Path) -> None:
    flagged = [r for r in report.read(graded_class) if r["status"] != "graded"]
    assert not flagged, flagged
