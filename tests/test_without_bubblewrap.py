"""A machine without bubblewrap (macOS, a Linux without the package), and formgrader's command.

bubblewrap is hidden by a PATH that holds every program of this machine but ``bwrap``:
`make setup`'s installer says what it could not install and what follows, `course demo` grades
the demo class (the course's own notebooks) without the sandbox and says so in one line, and
`course autograde` of a class still refuses unless given --unsafe-no-sandbox. Also: `course
lab` (`make formgrader`) starts JupyterLab in the course folder, and refuses a folder that is
not a course.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.coordinator import demo, pipeline
from grader.shared import report
from tests.conftest import REPO, make_course_copy

COURSE = str(Path(sys.executable).parent / "course")
HIDDEN = {"bwrap", "apt-get"}  # apt-get too: the installer then cannot install bubblewrap


@pytest.fixture(scope="module")
def path_without_bwrap(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH like this machine's, but without bubblewrap (and apt-get): links to every other
    program of its folders, this environment's ``bin`` first."""
    folder = tmp_path_factory.mktemp("bin-without-bwrap")
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry) or entry == str(Path(sys.executable).parent):
            continue
        for program in os.listdir(entry):
            link = folder / program
            if program not in HIDDEN and not link.exists():
                link.symlink_to(os.path.join(entry, program))
    path = os.pathsep.join([str(Path(sys.executable).parent), str(folder)])
    assert shutil.which("bwrap", path=path) is None and shutil.which("python3", path=path)
    return path


def test_setup_says_what_it_could_not_install_and_what_follows(path_without_bwrap: str) -> None:
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "install_system_packages.sh")],
        env={**os.environ, "PATH": path_without_bwrap},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # `make setup` goes on: the venv is usable
    said = done.stderr
    assert "could not install" in said and "not installed: bubblewrap" in said, said
    assert "--unsafe-no-sandbox" in said and "`make demo`" in said, said
    assert "What each system needs" in (REPO / "README.md").read_text()  # where it points


def test_autograde_refuses_without_bubblewrap(
    path_without_bwrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class released and submitted (the demo class): nothing graded, one line that says why
    and names the way to grade anyway."""
    root = make_course_copy(tmp_path / "course")
    pipeline.release(root, "a_masks")
    demo.build_class(root, "a_masks")
    monkeypatch.setenv("PATH", path_without_bwrap)
    done = subprocess.run(
        [COURSE, "--root", str(root), "autograde", "a_masks"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "bubblewrap (bwrap) is not installed" in done.stderr, done.stderr
    assert "--unsafe-no-sandbox" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (root / "autograded").exists() and not report.read(root)


@pytest.mark.slow  # grades through nbgrader
def test_demo_grades_the_demo_class_without_the_sandbox_and_says_so(
    path_without_bwrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`course demo` (`make demo`) where bwrap is missing: the reference and blank students of
    A graded without the sandbox (a part of the demo class: the same path as the whole)."""
    root = make_course_copy(tmp_path / "course")
    monkeypatch.setenv("PATH", path_without_bwrap)
    said: list[str] = []
    demo.run(root, ["a_masks"], jobs=2, say=said.append, choose=lambda a, s: ["blank", "reference"])
    sandbox = [line for line in said if "sandbox" in line]
    assert len(sandbox) == 1 and "bubblewrap (bwrap) is not installed" in sandbox[0], said
    assert "--unsafe-no-sandbox" in sandbox[0], sandbox
    rows = {r.student: r for r in pipeline.grade_rows(root)}
    assert set(rows) == {"blank", "reference"}, rows
    assert rows["reference"].auto_score > 0 and rows["blank"].auto_score == 0, rows
    lines = report.read(root)
    assert {r["student"]: r["status"] for r in lines} == {"blank": "graded", "reference": "graded"}
    assert all("WITHOUT the sandbox" in r["detail"] for r in lines), lines


def test_course_lab_starts_jupyterlab_in_the_course_folder(tmp_path: Path) -> None:
    """`course lab -- --version`: the command becomes JupyterLab (which prints its version),
    after saying where formgrader is, for the course found from the working directory."""
    done = subprocess.run(
        [COURSE, "lab", "--", "--version"],
        cwd=REPO / "source",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, version = done.stdout.strip().splitlines()
    assert first.startswith(f"course lab: JupyterLab on {REPO};") and "Formgrader" in first
    import jupyterlab

    assert version == jupyterlab.__version__


def test_course_lab_refuses_a_folder_that_is_not_a_course(tmp_path: Path) -> None:
    done = subprocess.run(
        [COURSE, "--root", str(tmp_path), "lab"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.startswith("course: error:") and "nbgrader_config.py" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
