"""Page helpers of the end-to-end tests: JupyterLab notebooks, outputs, widgets, nbgrader."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
from playwright.sync_api import Locator, Page, expect

from grader.shared.paths import assignments
from tests.conftest import chosen_assignments

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored
CHROMIUM = Path(os.environ.get("COURSE_E2E_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# The same selection as tests/conftest.py (COURSE_ASSIGNMENTS narrows a local run).
ASSIGNMENTS = chosen_assignments(assignments(REPO), os.environ.get("COURSE_ASSIGNMENTS"))
# The student notebooks of the course, discovered: one browser test each.
RELEASE_NOTEBOOKS = [
    p.relative_to(REPO / "release").as_posix()
    for p in sorted(REPO.glob("release/*/*.ipynb"))
    if p.parent.name in ASSIGNMENTS
]


# Generous: the machine is small and shared (2 cores), the first kernel start is slow.
KERNEL_TIMEOUT = 180_000  # ms, a kernel from launch to idle
RUN_ALL_TIMEOUT = 420_000  # ms, a whole notebook in its short (COURSE_FAST) form
VALIDATE_TIMEOUT = 420_000  # ms, nbgrader validate runs the notebook on the server
WIDGET_TIMEOUT = 90_000  # ms, an explorer redrawing after a slider move

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@dataclass
class LabServer:
    """A running JupyterLab server: its base URL, token and course root."""

    url: str
    token: str
    root: Path
    log: Path

    def lab_url(self, path: str = "") -> str:
        """The URL that opens ``path`` (relative to the root) in JupyterLab, fresh workspace."""
        tree = f"/tree/{path}" if path else ""
        return f"{self.url}/lab{tree}?reset&token={self.token}"

    def api(self, path: str, method: str = "GET") -> dict | list | None:
        """Call a JSON endpoint of the server (``/api/...``)."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None


def grade_index(path: Path, grade_id: str) -> int:
    """The index of the cell of the notebook at ``path`` whose nbgrader grade_id is ``grade_id``."""
    cells = nbformat.read(path, as_version=4).cells
    return next(
        i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )


def screenshot(page: Page, folder: Path, name: str, target: Locator | None = None) -> Path:
    """Save a PNG of the page (or of one element) under ``folder`` and tests/e2e/artifacts/."""
    path = folder / f"{name}.png"
    if target is None:
        page.screenshot(path=path, full_page=True)
    else:
        target.screenshot(path=path)
    copy = ARTIFACTS / path.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(path, copy)
    return path


def open_notebook(page: Page, url: str, cells: int) -> Locator:
    """Open a notebook URL in JupyterLab; wait for its ``cells`` cells and an idle kernel."""
    page.goto(url, timeout=KERNEL_TIMEOUT)
    panel = page.locator(NOTEBOOK)
    expect(panel.locator(".jp-Cell")).to_have_count(cells, timeout=KERNEL_TIMEOUT)
    wait_kernel_idle(page)
    panel.locator(".jp-Cell").first.click()  # the notebook is the current widget (menus act on it)
    return panel


def wait_kernel_idle(page: Page, timeout: int = KERNEL_TIMEOUT) -> None:
    """Wait until the kernel is connected and idle (toolbar indicator and status bar)."""
    page.wait_for_selector(
        f"{NOTEBOOK} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout
    )
    status = page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\|\s*Idle"))
    expect(status.first).to_be_visible(timeout=timeout)


def menu(page: Page, top: str, item: str) -> None:
    """Click ``top`` in the menu bar, then ``item`` in the menu that opens."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-item:not(.lm-mod-hidden) .lm-Menu-itemLabel").filter(
        has_text=re.compile(f"^{re.escape(item)}$")
    ).click()


def run_all(page: Page) -> None:
    """Run > Run All Cells; wait until no cell is queued or running and the kernel is idle.

    A cell that raises stops the run: the cells after it keep an empty prompt ``[ ]:``.
    """
    panel = page.locator(NOTEBOOK)
    first = panel.locator(".jp-CodeCell .jp-InputPrompt").first
    menu(page, "Run", "Run All Cells")
    # The run has started once the first code cell is queued, running or numbered.
    expect(first).to_have_text(re.compile(r"\[(\*|\d+)\]"), timeout=KERNEL_TIMEOUT)
    page.wait_for_function(
        """(sel) => {
            const panel = document.querySelector(sel);
            const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            const busy = prompts.some(p => p.textContent.includes('*'));
            const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
            return !busy && status && status.dataset.status === 'idle';
        }""",
        arg=NOTEBOOK,
        timeout=RUN_ALL_TIMEOUT,
        polling=500,
    )


def prompts(panel: Locator) -> list[str]:
    """The input prompts of the code cells, e.g. ``['[1]:', '[2]:', '[ ]:']``."""
    return [p.strip() for p in panel.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()]


def error_outputs(panel: Locator) -> list[str]:
    """Text of every output that shows an exception (a traceback) or a widget that failed."""
    return panel.evaluate(
        """(panel) => [...panel.querySelectorAll('.jp-OutputArea-output')]
            .map(o => o.innerText)
            .filter(t => /Traceback \\(most recent call last\\)|^\\w*(Error|Exception)\\b/m.test(t)
                || t.includes('Error displaying widget')
                || t.startsWith('interactive(children='))"""
    )


def static_figures(panel: Locator) -> list[dict]:
    """The images of output areas that are not inside a widget: size, and whether they loaded."""
    return panel.evaluate(
        """(panel) => [...panel.querySelectorAll('.jp-OutputArea-output img')]
            .filter(img => !img.closest('.jupyter-widgets, .widget-output'))
            .map(img => ({natural: img.naturalWidth, shown: img.clientWidth,
                          height: img.naturalHeight, loaded: img.complete && img.naturalWidth > 0,
                          area: img.closest('.jp-OutputArea-output').clientWidth}))"""
    )


def widget_views(panel: Locator) -> int:
    """How many cell outputs are live widget views (explorers, progress bars).

    A widget that fails shows text instead ('Error displaying widget', or the Python repr
    'interactive(children=...)' when the widget manager is missing): it is not counted.
    """
    return panel.evaluate(
        """(panel) => [...panel.querySelectorAll('.jp-OutputArea-output')]
            .filter(o => !o.parentElement.closest('.jupyter-widgets'))
            .filter(o => o.querySelector('.jupyter-widgets')).length"""
    )


def explorers(panel: Locator) -> Locator:
    """The ``widgets.interactive`` explorers: controls plus an output with a figure."""
    return panel.locator(".jp-OutputArea-output .widget-interact")


def image_source(explorer: Locator) -> str:
    """The data URL of the figure an explorer shows (empty while it redraws)."""
    return explorer.evaluate(
        "(e) => { const img = e.querySelector('.widget-output img'); "
        "return img && img.complete && img.naturalWidth > 0 ? img.src : ''; }"
    )


def move_first_slider(page: Page, explorer: Locator, presses: int = 5) -> str:
    """Move the explorer's first slider with the keyboard (arrow keys); return its new value."""
    slider = explorer.locator(".widget-slider").first
    handle = slider.locator(".noUi-handle").first
    handle.scroll_into_view_if_needed()
    handle.focus()
    for _ in range(presses):
        page.keyboard.press("ArrowRight")
    return slider.locator(".widget-readout").inner_text()


def wait_figure_changed(page: Page, explorer: Locator, before: str) -> None:
    """Wait until the explorer shows a new figure and the kernel has drawn the last move."""
    page.wait_for_function(
        """([e, before]) => { const img = e.querySelector('.widget-output img');
            return img && img.complete && img.naturalWidth > 0 && img.src !== before; }""",
        arg=[explorer.element_handle(), before],
        timeout=WIDGET_TIMEOUT,
    )
    wait_kernel_idle(page, timeout=WIDGET_TIMEOUT)
    expect(explorer.locator(".widget-output img")).to_have_count(1, timeout=WIDGET_TIMEOUT)


def validate(page: Page) -> Locator:
    """Click nbgrader's Validate toolbar button; return the results dialog once it is shown."""
    page.locator(f"{NOTEBOOK} .validate-button").click()
    dialog = page.locator(".jp-Dialog").filter(has_text="Validation Results")
    expect(dialog).to_be_visible(timeout=VALIDATE_TIMEOUT)
    return dialog


def executed_outputs(notebook: Path) -> dict[str, int]:
    """What a notebook executed by nbgrader shows: image outputs and widget views, counted."""
    nb = nbformat.read(notebook, as_version=4)
    counts = {"images": 0, "widgets": 0, "explorers": 0, "errors": 0}
    for cell in nb.cells:
        if "_explorer(" in cell.get("source", ""):
            # nbgrader ran it headless: a plain figure where JupyterLab shows a live explorer.
            counts["widgets"] += 1
            counts["explorers"] += 1
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            counts["images"] += "image/png" in data or "image/svg+xml" in data
            counts["widgets"] += WIDGET_MIME in data
            # An explorer (widgets.interactive) stays; a progress bar may close itself when done.
            counts["explorers"] += WIDGET_MIME in data and str(
                data.get("text/plain", "")
            ).startswith("interactive(")
            counts["errors"] += output.get("output_type") == "error"
    return counts
