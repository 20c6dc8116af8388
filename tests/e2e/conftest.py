"""End-to-end fixtures: a JupyterLab 4 server on a scratch copy of the graded course, and Chromium.

The browser is Debian's Chromium (``/usr/bin/chromium``, installed by
``tools/install_system_packages.sh --browser``) driven by Playwright; Playwright's own browser
download is never used. The server is started by ``course lab``, the instructor's command for
formgrader (``make formgrader``), in the course root (so nbgrader finds ``nbgrader_config.py``),
on 127.0.0.1 with a random token, and is stopped at the end of the session.
Screenshots go to a folder under pytest's tmp dir and are copied to ``tests/e2e/artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from labui import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, LabServer
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.jupyter_servers import LAB_SETTINGS, lab_address, lab_home, serving

# What a page shows may take long on a loaded machine: every assertion waits up to this (ms)
# for it, instead of Playwright's 5 s (a formgrader dialog closing: issue 57).
expect.set_options(timeout=60_000)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The screenshots folder (under pytest's tmp dir); copied to tests/e2e/artifacts/."""
    folder = tmp_path_factory.mktemp("e2e-artifacts")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this run's screenshots only
    yield folder
    shutil.copytree(folder, ARTIFACTS, dirs_exist_ok=True)


@pytest.fixture(scope="session")
def e2e_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the graded demo class (the browser writes to it; others don't see it).

    ``graded_class`` (tests/conftest.py) runs ``grader.coordinator.demo.run`` once per session on
    every assignment: release, the demo class (``submitted/reference`` holds the filled copy of each
    release notebook), autograding, feedback. While working on these tests,
    ``COURSE_E2E_GRADED=/path/to/a/graded/course`` reuses a course graded earlier instead.
    """
    graded = os.environ.get("COURSE_E2E_GRADED")
    source = Path(graded) if graded else request.getfixturevalue("graded_class")
    root = tmp_path_factory.mktemp("e2e") / "course"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / ".exchange").mkdir(exist_ok=True)
    for path in root.rglob("*"):  # nbgrader leaves some files read-only; Validate saves first
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return root


@pytest.fixture(scope="session")
def lab(e2e_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on ``e2e_root`` (localhost, free port, token), stopped after the session."""
    home = tmp_path_factory.mktemp("jupyter-home")
    env = {
        **os.environ,
        # Kernels inherit this: long cells take their short (grading) form, as in CI.
        "COURSE_FAST": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **lab_home(home, LAB_SETTINGS),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("COURSE_DB", None)  # the copy's own gradebook, whatever the caller's shell says
    port, token, options = lab_address()
    # The instructor's documented command (`make formgrader` runs it): JupyterLab on the course
    # folder, found from the working directory; the options after `--` go to JupyterLab.
    command = [str(Path(sys.executable).parent / "course"), "lab", "--", *options]
    log = home / "server.log"
    try:
        with serving(command, e2e_root, env, log, port, token) as url:
            server = LabServer(url=url, token=token, root=e2e_root, log=log)
            try:
                yield server
            finally:
                _shut_kernels(server)
    finally:
        shutil.copy(log, tmp_path_factory.getbasetemp() / "e2e-server.log")


def _shut_kernels(server: LabServer) -> None:
    """Shut the server's kernels down through its API, before the server stops."""
    try:
        for kernel in server.api("/api/kernels"):
            server.api(f"/api/kernels/{kernel['id']}", method="DELETE")
    except OSError:
        pass


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Headless Debian Chromium under Playwright."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run tools/install_system_packages.sh --browser")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (own context: no shared storage), large enough for the figures."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    page = context.new_page()
    yield page
    context.close()
