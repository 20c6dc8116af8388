"""The student's own copy, ``work/``: `make lab` makes it once from release/ and opens it; nothing
the course runs (a release, a demo) ever writes there."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, make_course_copy
from tools import student_copy, student_lab

COURSE = [sys.executable, "-m", "grader.command.cli"]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_copy_is_made_once_and_never_overwritten(tmp_path: Path) -> None:
    release = tmp_path / "release" / "a"
    release.mkdir(parents=True)
    (release / "n.ipynb").write_text("released")
    assert student_copy.make_copy(tmp_path) == [tmp_path / "work" / "a" / "n.ipynb"]
    (tmp_path / "work" / "a" / "n.ipynb").write_text("the student's answers")
    (release / "n.ipynb").write_text("released again")  # make release
    (tmp_path / "release" / "b").mkdir()
    (tmp_path / "release" / "b" / "m.ipynb").write_text("a new assignment")
    assert student_copy.make_copy(tmp_path) == [tmp_path / "work" / "b" / "m.ipynb"]
    assert (tmp_path / "work" / "a" / "n.ipynb").read_text() == "the student's answers"
    assert student_copy.make_copy(tmp_path) == []


def test_without_a_release_it_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="run `make release` first"):
        student_copy.make_copy(tmp_path)


def test_make_lab_opens_the_copy_and_git_ignores_it() -> None:
    makefile = (REPO / "Makefile").read_text()
    lab = makefile[makefile.index("\nlab:") :].split("\n\n")[0]
    assert "tools/student_lab.py" in lab  # the copy (tools/student_copy.py), then its lab
    assert student_lab.command(REPO / "work", [])[4] == f"--ServerApp.root_dir={REPO / 'work'}"
    recipe = lab.split("\n", 2)[2]  # the lines after `lab: setup  ## ...`
    assert "release" not in recipe and "--notebook-dir=release" not in makefile
    ignored = subprocess.run(
        ["git", "check-ignore", "work/a_masks/x.ipynb"], cwd=REPO, capture_output=True
    )
    assert ignored.returncode == 0, "work/ is not git-ignored"


@pytest.mark.slow
def test_release_and_demo_leave_the_students_copy_alone(tmp_path: Path) -> None:
    root = make_course_copy(tmp_path / "course", with_release=True)
    student_copy.make_copy(root)
    notebook = root / "work" / "a_masks" / "masks_and_positions.ipynb"
    notebook.write_text(notebook.read_text().replace("raise NotImplementedError()", "pass", 1))
    before = snapshot(root / "work")
    for args in (["release", "a_masks", "--clone-only"], ["demo", "a_masks", "--jobs", "1"]):
        done = subprocess.run(
            [*COURSE, "--root", str(root), *args], cwd=root, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert snapshot(root / "work") == before
