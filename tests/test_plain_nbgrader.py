"""Plain nbgrader grades as `course autograde` does: the same class, graded both ways.

An instructor who knows nbgrader types `nbgrader autograde` and `nbgrader generate_feedback`
(formgrader's buttons call the same converters, tests/e2e/test_instructor.py clicks them). With the
course's nbgrader_config.py the kernel runs in the sandbox under the limits, the judge and the
tampering scan settle the points and the report gets its lines (grader/nbgrader/leave_no_links.py
and verify_points.py), and feedback hides the hidden tests. Two copies of one class of A: one graded
by `course autograde`, one by plain `nbgrader autograde`; every score, flag and report line must
agree (both end each notebook with grader.shared.finish.finish_notebook; tests/test_finish.py
compares the two callers case by case without nbgrader). One student fills its folder over the disk
quota on both paths.

One student of the class plants symbolic links in its folder while its kernel runs (to the
course's gradebook, a source notebook, a file outside the course, and a name that does not
exist): grading must leave every target as it was (nbgrader's permission step follows links).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from grader.coordinator import demo, pipeline
from grader.shared import report
from tests.conftest import class_outcome, make_course_copy
from tests.test_adversarial import (
    ASSIGNMENT,
    FILLS_DISK,
    MASK,
    NOTEBOOK,
    PATCH_USER_NS,
    WRONG_MASK,
    append_code,
    hidden,
    set_code,
)

pytestmark = pytest.mark.slow

# The case: an all-zero mask whose solution cell rebinds the checks to no-ops.
NOOP_CHECKS = f"""{WRONG_MASK}
check = lambda *args, **kwargs: None
check_close = lambda *args, **kwargs: None
checks = type("Quiet", (), {{"__getattr__": lambda self, name: lambda *a, **k: None}})()
"""
STUDENTS = [
    "reference",
    "wrong_mask",
    "noop_checks",
    "patches_user_ns",
    "plants_links",
    "fills_disk",
]
DISK_MB = "20"  # fills_disk writes 45 MB: over the quota on both paths (COURSE_DISK_MB)


def link_targets(root: Path, outside: Path) -> dict[str, Path]:
    """What the links student points at: the instructor's files, by link name."""
    return {
        "gradebook.db": root / "gradebook.db",
        "source.ipynb": root / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
        "outside.txt": outside,
        "dangling": root / "no-such-file",
    }


def plants_links(targets: dict[str, Path]) -> str:
    """The reference mask, then a cell that plants a link to each target in the kernel's folder
    (naming each path, reading none)."""
    pairs = {name: str(path) for name, path in targets.items()}
    return f"""
import os
for _name, _target in {pairs!r}.items():
    os.symlink(_target, _name)
"""


def state(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """Mode and SHA-256 of each existing file (the mode only of the gradebook, which grading
    writes)."""
    return {
        str(p): (p.stat().st_mode, "" if p.suffix == ".db" else sha256(p))
        for p in paths
        if p.exists()
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(root: Path, outside: Path) -> None:
    """The class: the reference and four others made from it (A released)."""
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    edits = {
        "wrong_mask": set_code(MASK, WRONG_MASK),
        "noop_checks": set_code(MASK, NOOP_CHECKS),
        "patches_user_ns": set_code(MASK, hidden(PATCH_USER_NS) + WRONG_MASK),
        "fills_disk": set_code(MASK, FILLS_DISK),
    }
    for student, edit in edits.items():
        write(root, student, edit(nbformat.read(str(reference), as_version=4)))
    nb = nbformat.read(str(reference), as_version=4)
    nb = append_code(MASK, plants_links(link_targets(root, outside)))(nb)
    write(root, "plants_links", nb)


def write(root: Path, student: str, nb: nbformat.NotebookNode) -> None:
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{NOTEBOOK}.ipynb"))


def nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    """A plain `nbgrader` command in the course at ``root``, as an instructor types it."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("COURSE_DB", None)
    return subprocess.run(
        ["nbgrader", *args], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def two_classes(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch
) -> dict[str, Path]:
    """The same class graded by `course autograde` ("course") and plain nbgrader ("plain"),
    with the state of the links' targets before and after each."""
    monkeypatch_module.setenv("COURSE_DISK_MB", DISK_MB)  # read by nbgrader_config.py
    base = tmp_path_factory.mktemp("plain")
    course = make_course_copy(base / "course")
    pipeline.release(course, ASSIGNMENT)
    demo.build_class(course, ASSIGNMENT)
    for folder in (course / "submitted").iterdir():
        if folder.name not in STUDENTS:
            shutil.rmtree(folder)
    plain = base / "plain"
    shutil.copytree(course, plain)
    roots = {"course": course, "plain": plain}
    for name, root in roots.items():
        outside = base / f"outside-{name}.txt"
        outside.write_text("an instructor's file outside the course\n")
        build(root, outside)
    befores = {name: state(list(link_targets(r, base / f"outside-{name}.txt").values()))
               for name, r in roots.items()}  # fmt: skip
    pipeline.autograde(course, ASSIGNMENT, jobs=2)
    done = nbgrader(plain, "autograde", ASSIGNMENT, "--force")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name, root in roots.items():
        after = state(list(link_targets(root, base / f"outside-{name}.txt").values()))
        assert after == befores[name], f"{name}: grading changed a file outside the submission"
    return roots


def outcome(root: Path) -> dict[str, tuple]:
    return class_outcome(root, ASSIGNMENT, NOTEBOOK, STUDENTS)


def test_plain_autograde_gives_what_course_autograde_gives(two_classes: dict[str, Path]) -> None:
    assert outcome(two_classes["plain"]) == outcome(two_classes["course"])


def test_both_paths_write_the_same_report_lines(two_classes: dict[str, Path]) -> None:
    """Both paths end each notebook with grader.shared.finish.finish_notebook: the same status,
    points and detail (the quota's words, the flag's reasons) for every student."""
    lines = {
        name: {r["student"]: r for r in report.read(root)} for name, root in two_classes.items()
    }
    assert sorted(lines["plain"]) == sorted(lines["course"]) == sorted(STUDENTS)
    for student in STUDENTS:
        assert lines["plain"][student] == lines["course"][student], student
    filled = lines["plain"]["fills_disk"]
    assert filled["status"] == "over quota", filled
    assert f"over the disk quota of {DISK_MB} MB" in filled["detail"], filled


@pytest.mark.parametrize("root", ["course", "plain"])
def test_tampering_earns_nothing_on_both_paths(two_classes: dict[str, Path], root: str) -> None:
    got = outcome(two_classes[root])
    for student in ("noop_checks", "patches_user_ns"):
        scores, flagged, status = got[student]
        assert flagged and status == "flagged", (student, status)
        assert scores["test_mask_visible"] == scores["test_mask_hidden"] == 0, student
    assert got["reference"][1:] == (False, "graded")


@pytest.mark.parametrize("root", ["course", "plain"])
def test_planted_links_are_not_followed(two_classes: dict[str, Path], root: str) -> None:
    """The links student is graded (its reference answers keep their points), and its graded
    folder holds no link (the targets' modes and contents: checked in the fixture)."""
    folder = two_classes[root] / "autograded" / "plants_links" / ASSIGNMENT
    assert not [p for p in folder.rglob("*") if p.is_symlink()]
    got = outcome(two_classes[root])
    assert got["plants_links"][0] == got["reference"][0]
    assert got["plants_links"][2] == "graded"


def test_plain_feedback_shows_no_hidden_test(two_classes: dict[str, Path]) -> None:
    root = two_classes["plain"]
    done = nbgrader(root, "generate_feedback", ASSIGNMENT, "--force")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    pages = sorted((root / "feedback").rglob("*.html"))
    assert len(pages) == len(STUDENTS)
    for page in pages:
        text = page.read_text()
        assert "BEGIN HIDDEN TESTS" not in text and "_reference_mask" not in text, page
