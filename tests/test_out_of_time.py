"""Out of time, not out of points: a submission of C that runs out of time keeps what it earned.

- ``runaway_count``: `count_embedding` loops forever (an ordinary loop, which the interrupt
  stops). Four test cells and two given cells call it; each used to wait out its own limit until
  the submission's limit stopped the whole grading ("not graded", every point lost). Now the
  first call is interrupted at the cell's limit and every later call fails at once: the
  exercises that do not call it keep their points.
- ``slow_cells``: correct, but its solution cells sleep until the submission's time is spent: the
  cells that finished keep their points (verified by the judge), those after are not run, and
  the report says TIMED OUT.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.coordinator import demo, pipeline
from grader.shared import report
from tests.conftest import make_course_copy
from tests.test_adversarial import append_code, set_code

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "c_params", "counting_parameters"
RUNAWAY = "def count_embedding(ntokens, d_model):\n    while True:\n        pass\n"
# The class's limits, below the product's (C's derived 30 s a cell, 120 s a submission) only to
# make the waits short: a cell 15 s, a submission 40 s. runaway_count needs about 20 s of it.
LIMITS = {"COURSE_CELL_TIMEOUT": "15", "COURSE_SUBMISSION_SECONDS": "40"}
SLEEP = "import time\ntime.sleep(13)\n"  # within a cell's limit
SLOW = ("count_encoder_layer", "count_head", "kv_cache_bytes")  # 3 x 13 s: past 40 s in all
EMBEDDING_TESTS = {"test_embedding_visible", "test_embedding_hidden"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_course_copy(tmp_path_factory.mktemp("out-of-time") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    for folder in (root / "submitted").iterdir():
        if folder.name != "reference":
            shutil.rmtree(folder)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    edits = {
        "runaway_count": [set_code("count_embedding", RUNAWAY)],
        "slow_cells": [append_code(name, SLEEP) for name in SLOW],
    }
    for student, steps in edits.items():
        nb = nbformat.read(str(reference), as_version=4)
        for step in steps:
            nb = step(nb)
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{NOTEBOOK}.ipynb"))
    saved = {key: os.environ.get(key) for key in LIMITS}
    os.environ.update(LIMITS)
    try:
        # Warm workers, the default (grader/warm/pool.py); COURSE_TEST_COLD=1: `--cold`.
        pipeline.autograde(root, ASSIGNMENT, jobs=2, warm=os.environ.get("COURSE_TEST_COLD") != "1")
    finally:
        for key, value in saved.items():
            os.environ.pop(key)
            if value is not None:
                os.environ[key] = value
    return root


def scores(root: Path, student: str) -> tuple[dict[str, float], bool]:
    with Gradebook(pipeline.db_url(root)) as gb:
        nb = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {g.name: g.auto_score for g in nb.grades if g.auto_score is not None}, nb.flagged


def line(root: Path, student: str) -> dict[str, str]:
    (found,) = [r for r in report.read(root) if r["student"] == student]
    return found


def calls_count_embedding(root: Path) -> set[str]:
    """The test cells whose code, or whose exercise's solution, calls count_embedding."""
    nb = nbformat.read(str(root / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"), as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    found, calling = set(), False
    for cell in cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            calling = "count_embedding(" in cell.source.replace("def count_embedding(", "")
        if meta.get("grade") and ("count_embedding(" in cell.source or calling):
            found.add(meta["grade_id"])
    return found


def test_a_function_that_runs_away_costs_only_the_cells_that_call_it(graded: Path) -> None:
    got, flagged = scores(graded, "runaway_count")
    usual, _ = scores(graded, "reference")
    lost = calls_count_embedding(graded) | EMBEDDING_TESTS
    assert line(graded, "runaway_count")["status"] == "graded", line(graded, "runaway_count")
    assert not flagged
    assert all(got[cell] == 0 for cell in lost & set(got)), got
    kept = {cell: points for cell, points in usual.items() if cell not in lost}
    assert kept and {cell: got[cell] for cell in kept} == kept, (got, kept)
    text = (graded / "autograded" / "runaway_count" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text()
    assert "ran past the time limit in an earlier cell" in text


def test_a_submission_out_of_time_keeps_what_finished(graded: Path) -> None:
    got, flagged = scores(graded, "slow_cells")
    usual, _ = scores(graded, "reference")
    row = line(graded, "slow_cells")
    assert row["status"] == "timed out", row
    assert "time limit was spent before cell" in row["detail"], row
    assert not flagged, row
    assert {cell: got[cell] for cell in EMBEDDING_TESTS} == {c: usual[c] for c in EMBEDDING_TESTS}
    assert all(got[cell] in (0, usual[cell]) for cell in usual), (got, usual)
    assert sum(got.values()) < sum(usual.values())
