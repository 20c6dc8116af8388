"""A student in the browser: the release notebooks, filled with the reference answers, run
cleanly in JupyterLab (figures, live explorers, no errors), and nbgrader's Validate button
accepts them; a blank release notebook fails validation there.

D and E (language-model training, no explorer) are not run in the browser: the graded demo class
runs their reference notebooks headless, every cell (tests/test_demo_class.py), and in the
browser they took 3 of the suite's minutes while showing nothing the other notebooks do not."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from labui import (
    RELEASE_NOTEBOOKS,
    WIDGET_TIMEOUT,
    LabServer,
    error_outputs,
    executed_outputs,
    explorers,
    image_source,
    move_first_slider,
    open_notebook,
    prompts,
    run_all,
    screenshot,
    static_figures,
    validate,
    wait_figure_changed,
    widget_views,
)
from playwright.sync_api import Page, expect


def _name(notebook: str) -> str:
    return notebook.replace("/", "__").removesuffix(".ipynb")


def _cells(path: Path) -> int:
    return len(nbformat.read(path, as_version=4).cells)


RUN_IN_BROWSER = [n for n in RELEASE_NOTEBOOKS if not n.startswith(("d_", "e_"))]
# What the Validate button shows for a blank notebook is the same for every assignment; that every
# blank release fails on its stubs and nothing else is checked for each assignment by the graded
# class (tests/test_demo_class.py, the blank student), without a browser.
VALIDATE_BLANK = RELEASE_NOTEBOOKS[:1]


@pytest.mark.parametrize("notebook", RUN_IN_BROWSER)
def test_filled_notebook_runs_and_validates(
    notebook: str, lab: LabServer, page: Page, artifacts: Path
) -> None:
    assignment, filename = notebook.split("/")
    filled = f"submitted/reference/{assignment}/{filename}"
    expected = executed_outputs(lab.root / "autograded" / "reference" / assignment / filename)
    name = _name(notebook)

    panel = open_notebook(page, lab.lab_url(filled), _cells(lab.root / filled))
    run_all(page)
    screenshot(page, artifacts, f"{name}__1_run_all")
    for i, figure in enumerate(
        panel.locator(".jp-OutputArea-output[data-mime-type='image/png']").all()
    ):
        screenshot(page, artifacts, f"{name}__figure{i:02d}", figure)

    numbered = prompts(panel)
    assert all(p[1:-2].isdigit() for p in numbered), (
        f"cells not run (an error stops Run All): {numbered}"
    )
    assert error_outputs(panel) == []

    figures = static_figures(panel)
    assert len(figures) == expected["images"], (
        f"{len(figures)} figures in the browser, {expected['images']} in the executed notebook"
    )
    assert all(f["loaded"] for f in figures), f"a figure did not load: {figures}"

    # Every explorer of the executed notebook is a live widget in the page (the text
    # 'interactive(children=...)' or 'Error displaying widget' would be an error output above);
    # progress bars (tqdm) are widgets too, and may close themselves once done.
    assert explorers(panel).count() == expected["explorers"]
    assert expected["explorers"] <= widget_views(panel) <= expected["widgets"]

    for i in range(explorers(panel).count()):
        explorer = explorers(panel).nth(i)
        explorer.scroll_into_view_if_needed()
        expect(explorer.locator(".widget-output img")).to_have_count(1, timeout=WIDGET_TIMEOUT)
        before = image_source(explorer)
        screenshot(page, artifacts, f"{name}__2_explorer{i}_before", explorer)
        value = move_first_slider(page, explorer)
        wait_figure_changed(page, explorer, before)
        screenshot(page, artifacts, f"{name}__3_explorer{i}_after_{value}", explorer)
        assert image_source(explorer) != before

    dialog = validate(page)
    screenshot(page, artifacts, f"{name}__4_validate_filled")
    expect(dialog.locator(".validation-success")).to_have_count(1)
    expect(dialog).to_contain_text("Success! Your notebook passes all the tests.")


@pytest.mark.parametrize("notebook", VALIDATE_BLANK)
def test_blank_notebook_fails_validation(
    notebook: str, lab: LabServer, page: Page, artifacts: Path
) -> None:
    blank = f"release/{notebook}"
    open_notebook(page, lab.lab_url(blank), _cells(lab.root / blank))
    dialog = validate(page)
    screenshot(page, artifacts, f"{_name(notebook)}__5_validate_blank")
    expect(dialog.locator(".validation-failed")).to_have_count(1)
    expect(dialog).not_to_contain_text("Success!")
    expect(dialog).to_contain_text("NotImplementedError")
