"""An instructor in the browser: formgrader (Nbgrader > Formgrader in JupyterLab) lists the
assignments and the demo class; a written answer graded by hand there reaches `course grades`."""

from __future__ import annotations

from pathlib import Path

import nbformat
from labui import ASSIGNMENTS, LabServer, menu, screenshot
from playwright.sync_api import Page, expect

from grader import pipeline
from tests.conftest import pipeline_students

STUDENT = "reference"


def _written_answer(root: Path) -> tuple[str, str, str, float]:
    """The first written answer of the course (graded by hand): assignment, notebook, id, points."""
    for assignment in ASSIGNMENTS:
        for path in sorted((root / "autograded" / STUDENT / assignment).glob("*.ipynb")):
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "markdown" and meta.get("grade") and meta.get("solution"):
                    return assignment, path.stem, meta["grade_id"], float(meta["points"])
    raise AssertionError("no written answer (markdown cell graded by hand) in the course")


def test_formgrader_lists_assignments_and_demo_class(
    lab: LabServer, page: Page, artifacts: Path
) -> None:
    page.goto(lab.lab_url())
    menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe[src*='formgrader']")
    table = frame.locator("table")
    for assignment in ASSIGNMENTS:
        expect(table.get_by_text(assignment, exact=True).first).to_be_visible(timeout=60_000)
    screenshot(page, artifacts, "formgrader__1_assignments")

    frame.get_by_role("link", name="Manage Students").click()
    students = {s for a in ASSIGNMENTS for s in pipeline_students(a)}  # those graded
    search = frame.locator("input[type='search']")  # the table shows 10 rows a page
    for student in sorted(students):
        search.fill(student)
        expect(frame.locator(f"table a[href$='/manage_students/{student}']")).to_be_visible()
    search.fill(STUDENT)
    screenshot(page, artifacts, "formgrader__2_students")


def test_written_answer_graded_in_formgrader_reaches_course_grades(
    lab: LabServer, page: Page, artifacts: Path
) -> None:
    assignment, notebook, grade_id, points = _written_answer(lab.root)
    key = (STUDENT, assignment, notebook)
    before = {(r.student, r.assignment, r.notebook): r for r in pipeline.grade_rows(lab.root)}
    assert before[key].needs_manual_grade  # nobody graded it yet

    # Nbgrader > Formgrader > Manage Students > the student > the assignment > the notebook.
    page.goto(lab.lab_url())
    menu(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe[src*='formgrader']")
    frame.get_by_role("link", name="Manage Students").click()
    frame.locator("input[type='search']").fill(STUDENT)  # the table shows 10 rows a page
    frame.locator(f"table a[href$='/manage_students/{STUDENT}']").click()
    frame.locator("table").get_by_role("link", name=assignment, exact=True).click()
    frame.locator("table").get_by_role("link", name=notebook, exact=True).click()
    score = frame.locator(f"input.score#{grade_id}")
    expect(score).to_be_visible(timeout=60_000)
    # The grade's view is bound once the grades are loaded: it sets the placeholders.
    expect(frame.locator(f"input#{grade_id}_extra_credit[placeholder]")).to_have_count(1)
    score.scroll_into_view_if_needed()
    with page.expect_response(
        lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT",
        timeout=60_000,
    ) as saved:
        score.click()
        score.press_sequentially(f"{points:g}")  # typed, as a grader does
        score.blur()  # leaving the box fires its change event: formgrader saves the score
    assert saved.value.ok, saved.value.status
    screenshot(page, artifacts, "formgrader__3_written_answer_graded", score.locator(".."))
    screenshot(page, artifacts, "formgrader__4_submission_page")

    after = {(r.student, r.assignment, r.notebook): r for r in pipeline.grade_rows(lab.root)}
    assert after[key].score == before[key].score + points
    assert after[key].auto_score == before[key].auto_score
    table = pipeline.format_grade_table(list(after.values()))
    assert f"{after[key].score:g}/{after[key].max_score:g}" in table
