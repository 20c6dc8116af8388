"""A course folder anywhere: graded warm, cold and by plain nbgrader wherever it lives.

The issue's cases, one submission of A (the reference solutions) each:

- a clone of the course under ``/tmp``, in a folder whose name has spaces and non-ASCII letters,
  with a ``course/`` of its own, its ``.venv`` a link to the virtual environment of another
  clone (this repository's), where the course is installed editable. Before, the warm workers
  failed every submission (``FileNotFoundError``: the nbgrader process, forked in the clone,
  named the clone's ``course/`` for its kernel, one the warm worker had not bound) and plain
  ``nbgrader autograde`` gave the reference 0 points, "graded" (the sandbox bound the clone's
  ``course/``, the kernel imports the installed one: the notebook's first cell ran pip);
- the same submission handed in with a ``grader/sandbox/rlimits.py`` of its own: the kernel's limits
  wrapper started in the submission's folder and ran it, outside the sandbox;
- a kernel whose Python cannot import the course (a kernel spec naming another Python):
  "not graded" with the reason, on `course autograde`'s path and plain nbgrader's, and the
  grades given before are kept;
- (deep) the course installed read-only (not editable) into another virtual environment that
  lives under such a name in ``/tmp``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.coordinator import demo, nbgrader_run, pipeline
from grader.sandbox import bubblewrap as sandbox
from grader.shared import kernel_check, report
from grader.warm import kernel_sandbox
from tests.conftest import REPO, make_course_copy

ASSIGNMENT, NOTEBOOK, STUDENT = "a_masks", "masks_and_positions", "reference"
VENV = Path(sys.prefix)  # this repository's environment: the course installed editable here
ESCAPED = "escaped.txt"
# A submission's own grader/sandbox/rlimits.py: outside the sandbox it would leave a file in the
# course folder (the kernel's cwd is autograded/reference/a_masks, three levels below it).
FAKE_RLIMITS = f"""import pathlib
pathlib.Path(__file__).resolve().parents[4].joinpath({ESCAPED!r}).write_text("outside")
raise SystemExit(3)
"""


def odd_folder(tag: str) -> Path:
    """A new folder under /tmp with spaces and non-ASCII letters in its name."""
    return Path(tempfile.mkdtemp(prefix=f"cours été 2026 {tag} ", dir="/tmp"))


def course_clone(root: Path) -> Path:
    """A course folder as a clone is: config, source/, demo/ and the packages of its own, A's
    reference submitted (with a grader/sandbox/rlimits.py of its own)."""
    make_course_copy(root)
    for package in ("course", "grader", "judge"):
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__py*"))
    reference_only(root)
    planted = root / "submitted" / STUDENT / ASSIGNMENT / "grader"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "rlimits.py").write_text(FAKE_RLIMITS)
    return root


def reference_only(root: Path) -> None:
    """A released and the demo class's reference submitted, no other student."""
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    for folder in (root / "submitted").iterdir():
        if folder.name != STUDENT:
            shutil.rmtree(folder)


def run(root: Path, python: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``python -m ARGS`` in the course folder, as an instructor types it; its output."""
    environ = {**os.environ, **(env or {}), "PATH": f"{python.parent}:{os.environ['PATH']}"}
    environ.pop("COURSE_DB", None)
    done = subprocess.run(
        [str(python), "-m", *args], cwd=root, env=environ, capture_output=True, text=True
    )
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def outcome(root: Path) -> tuple[float, float, str, str]:
    """The reference's points in its test cells and their maximum (the gradebook), its report
    status and detail."""
    with Gradebook(pipeline.db_url(root)) as gb:
        row = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, STUDENT)
        points, most = float(row.code_score), float(row.max_code_score)
    (line,) = [r for r in report.read(root) if r["student"] == STUDENT]
    return points, most, line["status"], line["detail"]


@pytest.fixture(scope="module")
def clone() -> Iterator[Path]:
    """The clone under /tmp (an odd name), its .venv a link to this repository's environment."""
    folder = odd_folder("clone")
    root = course_clone(folder / "course")
    (root / ".venv").symlink_to(VENV)
    yield root
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_clone_anywhere_is_graded_warm_cold_and_by_plain_nbgrader(clone: Path) -> None:
    python = clone / ".venv" / "bin" / "python"  # through the link
    graded = {}
    for way, args in {
        "warm": ["grader.command.cli", "autograde", ASSIGNMENT],
        "cold": ["grader.command.cli", "autograde", ASSIGNMENT, "--cold"],
        "plain": ["nbgrader", "autograde", ASSIGNMENT, "--force"],
    }.items():
        said = run(clone, python, *args)
        points, most, status, detail = outcome(clone)
        graded[way] = points
        assert status == "graded" and points == most > 0, f"{way}: {points}/{most} {detail}\n{said}"
        assert not (clone / ESCAPED).exists(), f"{way}: the submission's grader/ ran outside"
    assert set(graded.values()) == {13.0}, graded  # A's autograded points, full marks


@pytest.mark.slow
def test_a_kernel_without_the_course_is_not_graded_and_keeps_earlier_grades(
    clone: Path, tmp_path: Path
) -> None:
    """A kernel spec "python3" naming a Python without the course (its dependencies reachable):
    every path that grades says "not graded", why and which Python; the gradebook keeps the
    points given before."""
    python = clone / ".venv" / "bin" / "python"
    run(clone, python, "grader.command.cli", "autograde", ASSIGNMENT)
    before = outcome(clone)
    assert before[0] == before[1] == 13.0, before
    bare = no_course_python(tmp_path)
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [str(bare), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    env = {"JUPYTER_PATH": str(tmp_path / "jupyter")}
    for way, args in {
        "course": ["grader.command.cli", "autograde", ASSIGNMENT, "--cold"],
        "plain": ["nbgrader", "autograde", ASSIGNMENT, "--force"],
    }.items():
        said = run(clone, python, *args, env=env)
        points, _, status, detail = outcome(clone)
        assert status == "not graded", f"{way}: {status} {detail}\n{said}"
        assert "cannot import the course" in detail and "No module named 'course'" in detail
        assert str(bare) in detail and "make setup" in detail, detail
        assert points == 13.0, f"{way}: the earlier grades were lost"


@pytest.mark.slow
def test_a_submission_with_a_course_package_of_its_own_is_not_graded(clone: Path) -> None:
    """A folder course/ handed in would stand in for the course where the kernel's working folder
    comes first on its path (cold, plain nbgrader): not graded, said why, earlier grades kept.
    Warm kernels have imported the course before they reach the folder: graded as usual."""
    python = clone / ".venv" / "bin" / "python"
    run(clone, python, "grader.command.cli", "autograde", ASSIGNMENT)
    assert outcome(clone)[0] == 13.0
    planted = clone / "submitted" / STUDENT / ASSIGNMENT / "course"
    planted.mkdir()
    (planted / "__init__.py").write_text("def check(*args, **kwargs):\n    pass\n")
    try:
        for way, args in {
            "cold": ["grader.command.cli", "autograde", ASSIGNMENT, "--cold"],
            "plain": ["nbgrader", "autograde", ASSIGNMENT, "--force"],
        }.items():
            said = run(clone, python, *args)
            points, _, status, detail = outcome(clone)
            assert status == "not graded", f"{way}: {status} {detail}\n{said}"
            assert kernel_check.SHADOW in detail and "remove it" in detail, detail
            assert points == 13.0, f"{way}: the earlier grades were lost"
        said = run(clone, python, "grader.command.cli", "autograde", ASSIGNMENT)
        points, most, status, detail = outcome(clone)
        assert status == "graded" and points == most == 13.0, f"warm: {detail}\n{said}"
    finally:
        shutil.rmtree(planted)


def no_course_python(folder: Path) -> Path:
    """A virtual environment whose Python reaches this one's packages but not the course (a
    ``.pth`` line is a folder on its path; the course's editable finder is not run there)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder / "bare")], check=True)
    site = next((folder / "bare" / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(next(VENV.glob("lib/python3*/site-packages")).as_posix() + "\n")
    python = folder / "bare" / "bin" / "python"
    found = subprocess.run(
        [str(python), "-I", "-c", "import ipykernel, torch, course"], check=False
    )
    assert found.returncode != 0, "the bare environment imports the course"
    return python


@pytest.mark.deep
def test_the_course_installed_read_only_in_a_venv_under_an_odd_name(tmp_path: Path) -> None:
    """The course installed (not editable) into the site-packages of a virtual environment under
    /tmp whose name has spaces and non-ASCII letters: its kernels read it there (the warm
    worker binds it again over the kernel's fresh /tmp), warm and cold."""
    folder = odd_folder("venv")
    try:
        venv = folder / "venv"
        subprocess.run(
            [str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", "--without-pip",
             str(venv)], check=True
        )  # fmt: skip
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "deps.pth").write_text(next(VENV.glob("lib/python3*/site-packages")).as_posix())
        python = venv / "bin" / "python"
        install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
        install += ["--no-build-isolation", "--ignore-installed", str(sources(tmp_path / "src"))]
        subprocess.run(install, check=True, cwd=tmp_path, capture_output=True)
        where = subprocess.run(
            [str(python), "-I", "-c", "import course, grader; print(course.__file__)"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert where.startswith(str(site)), where
        root = make_course_copy(tmp_path / "course")
        reference_only(root)
        for way in ([], ["--cold"]):
            said = run(root, python, "grader.command.cli", "autograde", ASSIGNMENT, *way)
            points, most, status, detail = outcome(root)
            assert status == "graded" and points == most == 13.0, f"{way} {detail}\n{said}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sources(target: Path) -> Path:
    """What building the course's package reads, copied (the build writes beside it)."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, target)
    for package in ("course", "grader", "judge"):
        shutil.copytree(REPO / package, target / package, ignore=shutil.ignore_patterns("__py*"))
    return target


# -- the pieces, without grading -----------------------------------------------------------------


def test_the_kernel_python_is_named_through_the_real_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .venv that is a link: the kernel's Python is named through the folder it links to,
    file name kept (a venv's python is itself a link to the base interpreter)."""
    (tmp_path / "elsewhere" / "bin").mkdir(parents=True)
    (tmp_path / "elsewhere" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / ".venv").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert sandbox.kernel_python() == str((tmp_path / "elsewhere").resolve() / "bin" / "python")


def test_what_the_kernel_reads_is_asked_of_its_python_not_of_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a clone holding a course/ of its own, the grader's view (nbgrader puts its folder
    first on sys.path) names that one; the kernel imports the installed course."""
    clone = tmp_path / "clone"
    (clone / "course").mkdir(parents=True)
    (clone / "course" / "__init__.py").write_text("")
    (clone / "nbgrader_config.py").write_text("")
    monkeypatch.chdir(clone)
    monkeypatch.syspath_prepend(str(clone))
    roots = sandbox.readable_roots()
    assert str(clone / "course") not in roots and str(clone) not in roots
    installed = subprocess.run(
        [sys.executable, "-I", "-c", "import course; print(course.__path__[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert any(installed == r or installed.startswith(r + "/") for r in roots), roots


def test_a_folder_on_the_kernels_path_that_would_show_a_course_is_not_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A static .pth naming a clone (its solutions, its gradebook), a folder above a course
    folder, or /tmp: never bound; the clone's course/ is."""
    clone, other = tmp_path / "clone", tmp_path / "lib"
    for folder in (clone / "course", other):
        folder.mkdir(parents=True)
    (clone / "nbgrader_config.py").write_text("")
    seen = {
        "prefixes": [sys.prefix, sys.base_prefix],
        "path": [str(clone), str(tmp_path), "/tmp", str(other)],
        "course": [str(clone / "course")],
    }
    monkeypatch.setattr(sandbox, "probe", lambda python: seen)
    monkeypatch.chdir("/")
    roots = sandbox.kernel_reads.__wrapped__(sandbox.kernel_python())
    assert str(clone / "course") in roots and str(other) in roots
    assert not {str(clone), str(tmp_path), "/tmp"} & set(roots), roots


def test_mount_points_with_spaces_and_non_ascii_letters_are_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zygote remounts read-only every mount but the kernel's writable ones, read from
    /proc/self/mountinfo, which escapes a space as \\040 and writes UTF-8 as it is: a folder of
    a course under /tmp/cours été 2026/ is known by its name."""
    lines = [
        "1 0 0:1 / /tmp/cours\\040été\\0402026/work rw,relatime - tmpfs x rw",
        "2 0 0:2 / /tmp/cours\\040été\\0402026/venv rw,nosuid - tmpfs x rw",
    ]
    ks = kernel_sandbox
    monkeypatch.setattr(ks, "open", lambda *a: io.BytesIO("\n".join(lines).encode()), False)
    mounted = []
    monkeypatch.setattr(ks, "mount", lambda *args: mounted.append(args))
    ks.read_only_but({"/tmp/cours été 2026/work"})
    flags = ks.MS_REMOUNT | ks.MS_BIND | ks.MS_RDONLY | ks.MS_NOSUID
    assert mounted == [(None, "/tmp/cours été 2026/venv", None, flags)]


def test_the_course_command_names_the_kernel_check_failure() -> None:
    """nbgrader's log of a failed check: `course autograde` reports the check's own words."""
    log = (
        "[AutogradeApp | ERROR] There was an error processing assignment: x\n"
        "    grader.shared.kernel_check.CourseNotImportable: the grading kernel cannot import the "
        "course (ModuleNotFoundError: No module named 'course'): install it\n"
        "[AutogradeApp | ERROR] There was an error processing assignment 'a' for student 'b'\n"
    )
    assert nbgrader_run.first_error(log) == (
        "the grading kernel cannot import the course (ModuleNotFoundError: No module named "
        "'course'): install it"
    )
