"""Parallel autograding gives exactly the scores of nbgrader's own sequential autograde."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from grader.coordinator import pipeline
from tests.conftest import make_course_copy

ASSIGNMENT = "a_masks"
STUDENTS = ["reference", "blank", "mask_transposed"]  # full, none, and some of the points


def scores(root: Path, assignment: str) -> dict[tuple[str, str], tuple[float | None, float]]:
    """(student, grade cell) -> (auto score, max score) for every grade in the gradebook."""
    found = {}
    with Gradebook(pipeline.db_url(root)) as gb:
        for student in STUDENTS:
            submission = gb.find_submission(assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    found[(student, grade.name)] = (grade.auto_score, grade.max_score)
    return found


def test_parallel_equals_sequential_nbgrader(graded_class: Path, tmp_path: Path) -> None:
    root = make_course_copy(tmp_path / "sequential", with_release=True)
    for student in STUDENTS:
        shutil.copytree(
            graded_class / "submitted" / student / ASSIGNMENT,
            root / "submitted" / student / ASSIGNMENT,
        )
    pipeline.release(root, ASSIGNMENT)
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    sequential = scores(root, ASSIGNMENT)
    parallel = scores(graded_class, ASSIGNMENT)
    assert sequential == parallel
    assert any(score == 0 for score, _ in sequential.values())  # the comparison is not trivial
    assert any(score and score > 0 for score, _ in sequential.values())


def test_regrading_is_idempotent_and_unsafe_mode_is_marked(
    graded_class: Path, tmp_path: Path
) -> None:
    """Grading again gives the same scores; without the sandbox, the report says so."""
    root = tmp_path / "again"
    shutil.copytree(graded_class, root)
    before = scores(root, ASSIGNMENT)
    results = pipeline.autograde(
        root, ASSIGNMENT, jobs=2, students=STUDENTS, unsafe_no_sandbox=True
    )
    assert all(g.ok for g in results)
    assert scores(root, ASSIGNMENT) == before
    events = [e for g in results for e in g.events]
    assert events and all("WITHOUT the sandbox" in e.detail for e in events), events
