"""An instructor in the browser: formgrader (Nbgrader > Formgrader in JupyterLab) lists the
assignments and the demo class; a written answer graded by hand there reaches `course grades`;
its Autograde and Generate Feedback buttons grade a tampering student as `course autograde` does
and show no hidden test."""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
from labui import ASSIGNMENTS, LabServer, menu, screenshot
from nbgrader.api import Gradebook
from playwright.sync_api import Locator, Page, expect

from grader.coordinator import pipeline
from grader.shared import report
from tests.conftest import pipeline_students
from tests.test_plain_nbgrader import MASK, NOOP_CHECKS, set_code

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

    # The PUT seen may be another field's save (a busy machine delays the score's own): read the
    # gradebook until the score is in, as formgrader's page shows it, up to a minute.
    deadline = time.monotonic() + 60
    while True:
        after = {(r.student, r.assignment, r.notebook): r for r in pipeline.grade_rows(lab.root)}
        if after[key].score != before[key].score or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert after[key].score == before[key].score + points
    assert after[key].auto_score == before[key].auto_score
    table = pipeline.format_grade_table(list(after.values()))
    assert f"{after[key].score:g}/{after[key].max_score:g}" in table


TAMPERING = "noop_checks"  # an all-zero mask, the checks rebound to no-ops (issue 40)
# A formgrader dialog opening or closing: its fade takes a fraction of a second, more when the
# browser shares the processors with grading and a busy process (Playwright's default: 5 s).
DIALOG_TIMEOUT = 60_000  # ms


def submission_row(page: Page, student: str) -> Locator:
    """The row of ``student`` in formgrader's table of an assignment's submissions (searched
    for: the table shows 10 rows a page)."""
    page.locator("input[type='search']").fill(student)
    cell = page.locator("td.student-id", has_text=re.compile(f"^\\s*{re.escape(student)}\\s*$"))
    return page.locator("#main-table tr", has=cell)


def _click_and_wait(page: Page, row: Locator, button: str, endpoint: str) -> None:
    """Click a formgrader button of a submission's row; the server's answer must be success."""
    with page.expect_response(lambda r: endpoint in r.url, timeout=600_000) as answer:
        row.locator(f"{button} a").click()
    assert answer.value.ok, answer.value.status
    assert answer.value.json().get("success"), answer.value.json().get("error", "")[-2000:]
    modal = page.locator("#success-modal")  # formgrader says it succeeded: close that
    # Shown: Bootstrap adds "in" once its backdrop is up (a click before that is lost).
    expect(modal).to_have_class(re.compile(r"\bin\b"), timeout=DIALOG_TIMEOUT)
    modal.locator(".modal-footer button[data-dismiss='modal']").click()
    expect(modal).to_have_count(0, timeout=DIALOG_TIMEOUT)  # removed once it has faded out


def test_formgrader_buttons_grade_and_give_feedback_as_course_does(
    lab: LabServer, page: Page, artifacts: Path
) -> None:
    """Autograde clicked for the reference and a tampering student of A, then Generate
    Feedback: the reference keeps its points, the tampering student is flagged with nothing
    for the mask (what `course autograde` gives it, tests/test_plain_nbgrader.py), and no
    feedback page holds a line of a hidden test."""
    assignment, notebook = "a_masks", "masks_and_positions"
    root = lab.root
    reference = root / "submitted" / STUDENT / assignment / f"{notebook}.ipynb"
    tampering = root / "submitted" / TAMPERING / assignment / f"{notebook}.ipynb"
    tampering.parent.mkdir(parents=True, exist_ok=True)
    nb = set_code(MASK, NOOP_CHECKS)(nbformat.read(str(reference), as_version=4))
    nbformat.write(nb, str(tampering))
    with Gradebook(pipeline.db_url(root)) as gb:
        before = gb.find_submission_notebook(notebook, assignment, STUDENT).score

    page.goto(lab.lab_url())  # logs in (the token becomes a cookie), as the other tests do
    expect(page.locator(".jp-LabShell")).to_be_visible(timeout=120_000)
    submissions = f"{lab.url}/formgrader/manage_submissions/{assignment}"
    page.goto(submissions)  # formgrader's page of the assignment's submissions, on its own
    for student in (STUDENT, TAMPERING):
        row = submission_row(page, student)
        expect(row).to_have_count(1, timeout=60_000)
        _click_and_wait(page, row, ".autograde", f"/{assignment}/{student}/autograde")
    screenshot(page, artifacts, "formgrader__5_autograded")

    with Gradebook(pipeline.db_url(root)) as gb:
        graded = gb.find_submission_notebook(notebook, assignment, STUDENT)
        flagged = gb.find_submission_notebook(notebook, assignment, TAMPERING)
        assert (graded.score, graded.flagged) == (before, False)
        mask = {g.name: g.score for g in flagged.grades if "mask" in g.name}
        assert flagged.flagged and mask and not any(mask.values()), mask
    status = {r["student"]: r["status"] for r in report.read(root) if r["assignment"] == assignment}
    assert status[TAMPERING] == "flagged" and status[STUDENT] == "graded", status

    page.goto(submissions)
    for student in (STUDENT, TAMPERING):
        row = submission_row(page, student)
        _click_and_wait(page, row, ".generate-feedback", f"/{student}/generate_feedback")
        html = root / "feedback" / student / assignment / f"{notebook}.html"
        text = html.read_text()
        assert "BEGIN HIDDEN TESTS" not in text and "_reference_mask" not in text, html
