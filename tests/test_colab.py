"""The course on Colab: every notebook starts with the cell that installs the student part where
``course`` is missing (and does nothing where it is installed), the release carries that cell, and
docs/colab.md links every assignment; all of it from the one address in ``tools/colab.py``."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from tests.conftest import REPO
from tools import colab

FIND_SPEC = importlib.util.find_spec  # before any test patches it


class FakePip:
    """subprocess.Popen for pip: records the command, prints two lines, exits with ``code``."""

    commands: list[list[str]] = []
    code = 0

    lines = ["Collecting x\n", "Downloading x.whl (1.0 MB)\n"]

    def __init__(self, command: list[str], **kwargs) -> None:
        assert kwargs == {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
        FakePip.commands.append(command)
        self.stdout = iter(FakePip.lines)

    def wait(self) -> int:
        return FakePip.code


def run_install_cell(
    monkeypatch,
    course_found: bool,
    platform: str = "linux",
    nvidia: bool = False,
    torch_found: bool = False,
    pip_version: str = "23.2.1",  # a fresh venv's of Python 3.11: no --progress-bar raw
) -> list[list[str]]:
    """Run the install cell as IPython would on ``platform`` (with an NVIDIA driver or not, torch
    importable or not), pip replaced by :class:`FakePip` (the real pip runs in
    tests/test_pip_install.py); return the commands it ran."""
    real = FIND_SPEC

    def find_spec(name: str, *args):
        if name == "course":
            return real(name) if course_found else None
        if name == "torch":
            return real(name) if torch_found else None
        return real(name, *args)

    FakePip.commands = []
    monkeypatch.setattr(importlib.metadata, "version", lambda name: pip_version)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(subprocess, "Popen", FakePip)
    monkeypatch.setattr(subprocess, "run", None)  # pip only through Popen, its lines shown
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}" if nvidia else None)
    monkeypatch.setattr(os.path, "exists", lambda path: nvidia and path == "/proc/driver/nvidia")
    code = TransformerManager().transform_cell(colab.install_cell_source())
    assert code == colab.install_cell_source() + "\n", "the cell is plain Python, no magic"
    exec(code, {})  # noqa: S102 - the course's own cell
    return FakePip.commands


PIP = [sys.executable, "-m", "pip", "install"]
PACKAGE = f"transformers-course @ git+{colab.REPOSITORY}#subdirectory=student"
CPU_TORCH = [*PIP, "torch", "--index-url", "https://download.pytorch.org/whl/cpu"]


def test_the_install_cell_installs_only_where_the_course_is_missing(monkeypatch, capsys) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_TORCH_INDEX", raising=False)
    assert run_install_cell(monkeypatch, course_found=True) == []
    assert capsys.readouterr().out == ""
    commands = run_install_cell(monkeypatch, course_found=False, torch_found=True)
    assert commands == [[*PIP, PACKAGE]], "never -q: the student sees pip's lines"
    shown = capsys.readouterr().out.splitlines()
    assert shown == [" ".join([*PIP, PACKAGE]), "Collecting x", "Downloading x.whl (1.0 MB)"]


@pytest.mark.parametrize(
    "platform, nvidia, torch_found, torch_first",
    [
        ("linux", False, False, True),  # a laptop or server without an NVIDIA GPU: CPU build
        ("linux", True, False, False),  # an NVIDIA driver: PyPI's CUDA build is the one to use
        ("linux", False, True, False),  # torch already there (Colab): kept
        ("darwin", False, False, False),  # PyPI's macOS wheels are CPU (and MPS) builds
        ("win32", False, False, False),  # PyPI's Windows wheels are CPU builds
    ],
)
def test_the_install_cell_takes_pytorchs_cpu_build_on_linux_without_an_nvidia_gpu(
    monkeypatch, platform: str, nvidia: bool, torch_found: bool, torch_first: bool
) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_TORCH_INDEX", raising=False)
    commands = run_install_cell(monkeypatch, False, platform, nvidia, torch_found)
    assert commands == ([CPU_TORCH] if torch_first else []) + [[*PIP, PACKAGE]]


def test_a_newer_pip_shows_how_far_a_big_download_is(monkeypatch, capsys) -> None:
    """pip 24.1 and later count a download's bytes (`--progress-bar raw`, one line each quarter
    of a second): the cell shows a line per tenth of a file over 10 MB, and no count for a small
    one. An older pip (a fresh venv's 23.2) refuses the option: it is not passed there."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    torch = [f"Progress {n * 18_300_000} of 183000000\n" for n in range(11)]
    small = ["Progress 0 of 700000\n", "Progress 700000 of 700000\n"]
    lines = ["Collecting torch\n", "Downloading torch.whl (183.0 MB)\n", *torch, *small, "Done\n"]
    monkeypatch.setattr(FakePip, "lines", lines)
    commands = run_install_cell(monkeypatch, course_found=False, pip_version="24.1.2")
    assert commands == [
        [*CPU_TORCH, "--progress-bar", "raw"],
        [*PIP, PACKAGE, "--progress-bar", "raw"],
    ]
    shown = capsys.readouterr().out.splitlines()
    counts = [line for line in shown if line.endswith(" of 183 MB")]
    assert counts == 2 * [f"  {n * 18.3:.0f} of 183 MB" for n in range(11)]  # both steps
    assert not [line for line in shown if "Progress" in line or line.endswith(" of 1 MB")]
    assert shown[shown.index(counts[-1]) + 1] == "Done"
    for old in ("23.2.1", "24.0"):
        commands = run_install_cell(monkeypatch, course_found=False, pip_version=old)
        assert commands == [CPU_TORCH, [*PIP, PACKAGE]], old


def test_this_pip_takes_the_progress_option_the_cell_passes() -> None:
    """The option exists in a real pip of 24.1 or later (this environment's): a wrong one would
    be refused as an invalid choice before pip looks for any package."""
    version = importlib.metadata.version("pip")
    assert tuple(int(n) for n in version.split(".")[:2]) >= (24, 1), version
    command = [sys.executable, "-m", "pip", "install", "--progress-bar", "raw", "--dry-run"]
    done = subprocess.run(
        [*command, "--no-index", "--no-deps", "no-such-package-x"], capture_output=True, text=True
    )
    assert done.returncode == 1 and "No matching distribution" in done.stderr, done.stderr
    wrong = subprocess.run([*command[:-2], "rawx", "x"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr, wrong.stderr


def test_the_cpu_index_can_be_a_mirror_and_a_failed_pip_stops_the_cell(monkeypatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setenv("COURSE_TORCH_INDEX", "https://mirror.example/torch-cpu")
    commands = run_install_cell(monkeypatch, course_found=False)
    assert commands[0] == [*PIP, "torch", "--index-url", "https://mirror.example/torch-cpu"]
    monkeypatch.setattr(FakePip, "code", 1)
    with pytest.raises(RuntimeError, match="pip failed"):
        run_install_cell(monkeypatch, course_found=False)
    assert len(FakePip.commands) == 1, "the course is not installed after a failed torch"


@pytest.mark.parametrize("mode", ["autograde", "validate"])  # nbgrader 0.9.6's two values
def test_the_install_cell_never_installs_while_grading(monkeypatch, mode: str) -> None:
    monkeypatch.setenv("NBGRADER_EXECUTION", mode)
    assert run_install_cell(monkeypatch, course_found=True) == []
    with pytest.raises(RuntimeError, match=colab.GRADING_ERROR):
        run_install_cell(monkeypatch, course_found=False)


def test_every_notebook_ends_with_the_check_cell_source_and_release() -> None:
    for source in colab.notebooks():
        release = REPO / "release" / source.parent.name / source.name
        expected = colab.check_cell_source(source.name)
        assert f"\n#     course check {source.name}\n" in expected
        for path in (source, release):
            last = json.loads(path.read_text())["cells"][-1]
            assert last["cell_type"] == "code" and not last["metadata"], path
            assert "".join(last["source"]) == expected, f"{path}: run `course release`"


def test_the_install_line_takes_only_an_address(monkeypatch, capsys) -> None:
    assert colab.install_line("file:///tmp/x@abc") == (
        "transformers-course @ git+file:///tmp/x@abc#subdirectory=student"
    )
    for bad in ["", "https://github.com/a/b#egg=x", 'https://github.com/a/b"', "a b"]:
        with pytest.raises(ValueError, match="not a git repository's address"):
            colab.install_line(bad)
    monkeypatch.setattr(colab, "REPOSITORY", "https://github.com/a/b c")
    assert colab.main(["--check"]) == 1
    assert "not a git repository's address" in capsys.readouterr().err


def test_the_tracked_record_is_the_real_install_s_of_this_cell_and_student_part() -> None:
    """tools/install_tested.json is what `python -m tests.install_record` wrote after a real
    install of this cell from this student/ (what it installed, from where, the visible tests
    and their outcomes)."""
    assert colab.untested() == "", colab.untested()
    record = json.loads(colab.TESTED.read_text())
    assert set(record) == set(colab.RECORD_FIELDS)
    assert record["links"] or record["indexes"], "pip looked nowhere"
    assert len(record["commit"]) == 40 and record["date"].endswith("Z"), record


def doctored(record: dict, change: str) -> object:
    """``record`` with one fault of ``change``'s name (a record that is not the real install's
    of this tree)."""
    record = json.loads(json.dumps(record))
    if change == "no record":
        return None
    if change == "the cell's hash alone":  # what the record was before issue 81
        return {k: record[k] for k in ("install_line", "cell_sha256", "note")}
    if change == "another student part":
        record["student_sha256"] = hashlib.sha256(b"student/ of another commit").hexdigest()
    elif change == "another cell":
        record["cell_sha256"] = hashlib.sha256(b"another cell").hexdigest()
    elif change == "a visible test failed":
        record["visible_tests"][next(iter(record["visible_tests"]))] = "failed"
    elif change == "no visible test":
        record["visible_tests"] = {}
    elif change == "the course not installed":
        record["installed"] = [e for e in record["installed"] if colab.DISTRIBUTION not in e]
    return record


FAULTS = {  # change -> what untested() says of it
    "no record": "it holds no record",
    "the cell's hash alone": "it has no 'date'",
    "another student part": "student/ is not the one it installed",
    "another cell": "the install cell (line",
    "a visible test failed": "did not all pass there (1 of",
    "no visible test": "did not all pass there (0 of 0)",
    "the course not installed": f"{colab.DISTRIBUTION}==0.1.0 is not among what it installed",
}


@pytest.mark.parametrize("change", FAULTS)
def test_a_record_that_is_not_the_real_install_s_of_this_tree_is_refused(
    monkeypatch, capsys, tmp_path: Path, change: str
) -> None:
    """The tool's own check: a record written by hand (the cell's hash alone), of another
    student/ or cell, or of a run whose visible tests failed is refused, saying how to record
    again, and nothing is written; the tracked record, copied, is accepted."""
    (tmp_path / "source" / "x").mkdir(parents=True)
    notebook = tmp_path / "source" / "x" / "n.ipynb"
    notebook.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4}))
    record = json.loads(colab.TESTED.read_text())
    tested = tmp_path / "install_tested.json"
    monkeypatch.setattr(colab, "TESTED", tested)
    tested.write_text(json.dumps(doctored(record, change)))
    assert FAULTS[change] in colab.untested(), colab.untested()
    assert colab.RECORD_COMMAND in colab.untested()
    with pytest.raises(colab.Untested, match="has not been seen to work"):
        colab.write(tmp_path)
    assert colab.main(["--check"]) == 1 and colab.RECORD_COMMAND in capsys.readouterr().err
    assert json.loads(notebook.read_text())["cells"] == []
    assert not (tmp_path / "docs").exists()
    tested.write_text(json.dumps(record))
    assert colab.write(tmp_path) == ["source/x/n.ipynb", "docs/colab.md"]


def test_another_cell_is_refused_until_the_real_install_records_it(monkeypatch) -> None:
    assert colab.untested() == ""
    monkeypatch.setattr(colab, "MARKER", "# Install the course")
    assert "the install cell (line" in colab.untested()
    monkeypatch.setattr(colab, "INSTALL_LINE", "x @ git+{repository}")
    assert "the install cell (line 'x @ git+{repository}')" in colab.untested()


def test_the_student_part_s_hash_is_of_its_tracked_files(tmp_path: Path) -> None:
    """A change to a tracked file of student/ changes the hash; an untracked file does not."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    with pytest.raises(ValueError, match="has no student/ tracked by git"):
        colab.student_sha256(tmp_path)
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "pyproject.toml").write_text("[project]\nversion = '1'\n")
    git("init", "--quiet")
    git("add", "student")
    first = colab.student_sha256(tmp_path)
    (tmp_path / "student" / "build.log").write_text("untracked")
    assert colab.student_sha256(tmp_path) == first
    (tmp_path / "student" / "pyproject.toml").write_text("[project]\nversion = '2'\n")
    second = colab.student_sha256(tmp_path)
    assert second != first and colab.student_version(tmp_path) == "2"
    git("add", "student")
    assert colab.student_sha256(tmp_path) != second  # build.log now tracked


def test_every_notebook_starts_with_the_install_cell_source_and_release() -> None:
    assert colab.stale() == [], "run `python tools/colab.py`, then `course release`"
    expected = colab.install_cell_source()
    for source in colab.notebooks():
        release = REPO / "release" / source.parent.name / source.name
        for path in (source, release):
            first = json.loads(path.read_text())["cells"][0]
            assert first["cell_type"] == "code" and not first["metadata"], path
            assert "".join(first["source"]) == expected, f"{path}: run `course release`"


def test_the_tool_inserts_once_and_follows_the_one_address(tmp_path: Path) -> None:
    (tmp_path / "source" / "x").mkdir(parents=True)
    path = tmp_path / "source" / "x" / "n.ipynb"
    markdown = {"cell_type": "markdown", "id": "cell-000", "metadata": {}, "source": ["# X"]}
    path.write_text(json.dumps({"cells": [markdown], "metadata": {}, "nbformat": 4}))
    assert colab.write(tmp_path, "https://github.com/a/b") == ["source/x/n.ipynb", "docs/colab.md"]
    assert colab.stale(tmp_path, "https://github.com/a/b") == []
    assert colab.write(tmp_path, "https://github.com/c/d") == ["source/x/n.ipynb", "docs/colab.md"]
    cells = json.loads(path.read_text())["cells"]
    assert len(cells) == 3 and cells[1] == markdown  # replaced, not inserted twice
    assert "".join(cells[2]["source"]) == colab.check_cell_source("n.ipynb")
    assert "git+https://github.com/c/d" in "".join(cells[0]["source"])
    page = (tmp_path / "docs" / "colab.md").read_text()
    assert "https://colab.research.google.com/github/c/d/blob/main/release/x/n.ipynb" in page
    assert "a/b" not in page


def test_the_docs_page_links_every_assignment() -> None:
    page = (REPO / "docs" / "colab.md").read_text()
    assert f'\npip install "{colab.install_line()}"\n' in page
    for source in colab.notebooks():
        release = f"release/{source.parent.name}/{source.name}"
        assert colab.colab_url(release) in page


@pytest.mark.parametrize("argv", [["--check"], []])
def test_the_tool_reports_what_is_out_of_date(monkeypatch, capsys, argv) -> None:
    monkeypatch.setattr(colab, "stale", lambda *a: ["docs/colab.md"])
    monkeypatch.setattr(colab, "write", lambda *a: ["docs/colab.md"])
    assert colab.main(argv) == (1 if argv else 0)
    assert "docs/colab.md" in capsys.readouterr().out
