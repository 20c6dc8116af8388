"""A self-learner in the browser, and the same notebook as a graded class's student.

The server is JupyterLab on a scratch folder holding a clone of the course (``source/``,
``release/`` and the learner's copy ``work/``, made by ``tools/student_copy.py`` with its
self-study cells) and a JupyterHub-like home beside it, with no ``source/`` above it. In the
learner's copy, "compare" shows nothing before an attempt; once an answer is written and saved
it shows the model answer and the rubric, two rubric points are ticked, and the progress cell
shows the question self-marked; the check button runs the hidden tests. The same notebook in the
home shows no model answer and runs no hidden test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from labui import NOTEBOOK, REPO, LabServer, grade_index, open_notebook, screenshot
from playwright.sync_api import Locator, Page, expect

from grader.coordinator import lab
from tests.jupyter_servers import LAB_SETTINGS, lab_address, lab_home, serving
from tools import student_copy

A, NB = "a_masks", "masks_and_positions.ipynb"
LEARNER = f"clone/work/{A}/{NB}"
STUDENT = f"hub-home/{A}/{NB}"
ANSWER = "Without the mask the next token is in the input, so the model learns to copy it."
CHECK_TIMEOUT = 420_000  # ms: the whole notebook with its hidden tests, on a loaded machine


@pytest.fixture(scope="module")
def study_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on a clone of assignment A with the learner's copy, and a hub-like home."""
    root = tmp_path_factory.mktemp("self-study")
    clone = root / "clone"
    for folder in ("source", "release"):
        shutil.copytree(REPO / folder / A, clone / folder / A)
    shutil.copy(REPO / "nbgrader_config.py", clone)
    student_copy.make_copy(clone)
    home = tmp_path_factory.mktemp("jupyter-home")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **lab_home(home, LAB_SETTINGS),
    }
    env.pop("COURSE_FAST", None)  # a learner's kernel, not a grading one
    env.pop("NBGRADER_EXECUTION", None)
    port, token, options = lab_address()
    # JupyterLab as `make lab` starts it (grader/coordinator/lab.py), on the scratch folder.
    log = home / "server.log"
    with serving(lab.command(root, options), root, env, log, port, token) as url:
        yield LabServer(url=url, token=token, root=root, log=log)


def _index(path: Path, source_end: str) -> int:
    """The index of the first cell of the notebook at ``path`` whose source ends so."""
    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.source.endswith(source_end))


def _run_cell(page: Page, cell: Locator) -> None:
    """Select a cell (command mode) and run it; wait for its prompt to get a number."""
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=180_000)


def _write_answer(page: Page, cell: Locator, text: str) -> None:
    """Type ``text`` into a markdown answer cell, render it and save the notebook."""
    cell.scroll_into_view_if_needed()
    cell.dblclick()
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(text)
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Control+S")
    expect(page.locator(".jp-mod-dirty")).to_have_count(0)


def test_a_learner_compares_ticks_and_sees_progress(
    study_lab: LabServer, page: Page, artifacts: Path
) -> None:
    path = study_lab.root / LEARNER
    cells = len(nbformat.read(path, as_version=4).cells)
    panel = open_notebook(page, study_lab.lab_url(LEARNER), cells)
    cell = panel.locator(".jp-Cell")
    compare_cell = cell.nth(_index(path, 'compare("q_mask_role");'))
    progress_cell = cell.nth(_index(path, "progress();"))

    _run_cell(page, progress_cell)
    expect(progress_cell).to_contain_text("written questions 0/7 attempted, 0 self-marked")

    _run_cell(page, compare_cell)  # before an attempt: nothing of the model answer
    compare_cell.locator(".course-compare").click()
    expect(compare_cell).to_contain_text("Nothing to compare yet")
    expect(compare_cell).not_to_contain_text("Model answer")

    _write_answer(page, cell.nth(grade_index(path, "q_mask_role")), ANSWER)
    compare_cell.locator(".course-compare").click()
    expect(compare_cell).to_contain_text("Model answer.")
    expect(compare_cell).to_contain_text("Rubric (1 point)")
    boxes = compare_cell.locator(".course-rubric-point input[type='checkbox']")
    expect(boxes).to_have_count(2)
    boxes.nth(0).check()
    boxes.nth(1).check()
    expect(compare_cell).to_contain_text("Self-marked: 1 of 1 points")
    screenshot(page, artifacts, "self_study__1_compared", compare_cell)
    marks = json.loads(path.with_name(path.stem + ".marks.json").read_text())
    assert marks["q_mask_role"] == {"ticked": [0, 1], "points": 1.0, "of": 1.0}
    assert ANSWER in path.read_text() and "marks" not in nbformat.read(path, 4).metadata

    progress_cell.locator(".course-progress").click()
    expect(progress_cell).to_contain_text("written questions 1/7 attempted, 1 self-marked")
    expect(progress_cell).to_contain_text("1 self-marked 1 of 1")
    screenshot(page, artifacts, "self_study__2_progress", progress_cell)

    check_cell = cell.nth(_index(path, 'check_button("test_mask_visible");'))
    _run_cell(page, check_cell)
    check_cell.locator(".course-check").click()
    expect(check_cell).to_contain_text(
        "Per exercise (visible and hidden tests):", timeout=CHECK_TIMEOUT
    )
    expect(check_cell).to_contain_text("[FAIL] test_mask_hidden (hidden tests)")
    expect(check_cell).not_to_contain_text("_reference_mask")  # a message, never the code
    screenshot(page, artifacts, "self_study__3_check", check_cell)


def test_the_same_notebook_as_a_graded_student_shows_and_runs_nothing(
    study_lab: LabServer, page: Page, artifacts: Path
) -> None:
    learner, student = study_lab.root / LEARNER, study_lab.root / STUDENT
    student.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(learner, as_version=4)
    nb.cells[grade_index(learner, "q_mask_role")].source = ANSWER  # an attempt is there
    nbformat.write(nb, student)
    panel = open_notebook(page, study_lab.lab_url(STUDENT), len(nb.cells))
    cell = panel.locator(".jp-Cell")
    compare_cell = cell.nth(_index(student, 'compare("q_mask_role");'))
    check_cell = cell.nth(_index(student, 'check_button("test_mask_visible");'))
    for run in (compare_cell, check_cell):
        _run_cell(page, run)
    expect(compare_cell).to_contain_text("Written answers are graded by the instructor.")
    expect(check_cell).to_contain_text("The hidden tests run when your work is graded.")
    expect(panel.locator(".course-compare, .course-check, .course-rubric-point")).to_have_count(0)
    expect(panel).not_to_contain_text("Model answer")
    screenshot(page, artifacts, "self_study__4_graded_student", compare_cell)
    written = sorted(p.name for p in student.parent.iterdir() if not p.name.startswith("."))
    assert written == [NB]  # no marks, no check record beside it
    assert page.locator(NOTEBOOK).count() == 1
