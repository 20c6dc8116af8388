"""The class report of the graded demo class, opened in Chromium from its file (no server).

``course report a_masks`` writes one HTML file; the browser opens it offline (every request
that leaves the file is counted, and none may), every figure is drawn, the named mistakes and
the pair that copied are on it, a feedback link opens its file, and a screenshot is taken
(``tests/e2e/artifacts/class_report.png``; the one in docs/img/ comes from it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from labui import screenshot
from nbgrader.api import Gradebook
from playwright.sync_api import Browser

from grader.command.cli import main
from grader.shared.paths import db_url

pytestmark = pytest.mark.slow


def test_the_class_report_opens_offline_with_its_figures(
    e2e_root: Path, browser: Browser, artifacts: Path, tmp_path: Path
) -> None:
    # Its own copy: the written answers it grades below must not be graded for the formgrader
    # test, which shares e2e_root and types a score into the first of them.
    e2e_root = Path(shutil.copytree(e2e_root, tmp_path / "course", symlinks=True))
    with Gradebook(db_url(e2e_root)) as gb:  # two written answers graded by hand so far
        for question, points in (("q_mask_role", 1.0), ("q_causal_or_masked", 2.0)):
            grade = gb.find_grade(question, "masks_and_positions", "a_masks", "reference")
            grade.manual_score, grade.needs_manual_grade = points, False  # as formgrader does
        gb.db.commit()
    out = e2e_root / "class-report-a_masks.html"
    assert main(["--root", str(e2e_root), "report", "a_masks", "--out", str(out)]) == 0
    context = browser.new_context(viewport={"width": 1300, "height": 1100})
    page = context.new_page()
    outside: list[str] = []
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(("file:", "data:")) else None,
    )
    page.goto(out.as_uri())
    images = page.locator("img")
    assert images.count() >= 6  # four exercises, the times, the written answers' spread
    drawn = page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 100)")
    assert drawn, "a figure is not drawn"
    mistakes = page.locator("#mistakes ~ div.mistake:not(.other)")
    assert mistakes.count() >= 2
    assert "transposed" in page.locator("#mistakes ~ div.mistake").all_inner_texts().__str__()
    first = page.locator("tr.pair").first.inner_text()
    assert "copied_pair_1 and copied_pair_2" in first
    screenshot(page, artifacts, "class_report")
    assert not outside, f"the page asked for {outside}"  # (nbgrader's feedback page may)
    link = page.locator("#mistakes ~ div.mistake .students a").first
    link.click()
    page.wait_for_load_state()
    assert page.url.startswith("file:") and "/feedback/" in page.url
    context.close()
