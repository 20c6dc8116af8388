"""The `course` command: self-check exit codes, grades, feedback, and one-line errors.

Also the grader's units around nbgrader: the rlimit wrapper of a grading process, the duplicate
cell preprocessor, the solution markers of submissions and the self-check's read-only cells.
"""

from __future__ import annotations

import copy
import csv
import json
import logging
import re
import resource
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.converters import Autograde
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooOldError
from nbgrader.preprocessors import DeduplicateIds
from traitlets.config import Config
from traitlets.utils.importstring import import_item

from grader.command.cli import main
from grader.coordinator import nbgrader_run
from grader.coordinator.job import GradingJob
from grader.coordinator.scratch import scratch_course
from grader.coordinator.submission import fill, reference_code, solution_markers
from grader.nbgrader.drop_duplicate_cells import REMOVED, DropDuplicateCells
from grader.nbgrader.execute_keeping_points import DIED
from grader.sandbox import rlimits
from grader.selfstudy import check
from grader.shared import tampering
from grader.shared.limits import Limits, TimeLimits
from grader.shared.notebooks import read_notebook
from grader.shared.notes import Notes, read_notes
from grader.shared.paths import load_config
from tests.conftest import ASSIGNMENTS, REPO

COURSE = [sys.executable, "-m", "grader.command.cli"]


def course(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*COURSE, *args], cwd=cwd, capture_output=True, text=True)


def test_check_passes_the_reference_and_fails_a_mistake(graded_class: Path) -> None:
    good = graded_class / "submitted/reference/a_masks/masks_and_positions.ipynb"
    done = course("check", str(good))
    assert done.returncode == 0, done.stdout
    source = read_notebook(REPO / "source/a_masks/masks_and_positions.ipynb")
    visible = [
        c.metadata["nbgrader"]["points"]
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("grade")
        and c.cell_type == "code"
        and "BEGIN HIDDEN TESTS" not in c.source
    ]
    total = f"{sum(visible):g}"
    assert f"Visible tests: {total}/{total} points, 0 failed" in done.stdout, done.stdout

    bad = graded_class / "submitted/mask_transposed/a_masks/masks_and_positions.ipynb"
    done = course("check", str(bad))
    assert done.returncode == 1
    assert "[FAIL] test_mask_visible: 0/1" in done.stdout
    assert "transposed" in done.stdout  # the message names the mistake


def test_check_blank_release_says_not_implemented() -> None:
    done = course("check", str(REPO / "release/a_masks/masks_and_positions.ipynb"))
    assert done.returncode == 1
    assert "not implemented yet" in done.stdout
    assert "[hidden] test_mask_hidden" in done.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["check", "missing.ipynb"], "no notebook at"),
        (["autograde", "z_unknown"], "unknown assignment 'z_unknown'"),
        (["feedback", "z_unknown"], "unknown assignment 'z_unknown'"),
        (["release", "z_unknown"], "unknown assignment 'z_unknown'"),
    ],
)
def test_errors_are_one_clear_line(args: list[str], words: str) -> None:
    done = course(*args)
    assert done.returncode == 2
    assert words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_malformed_notebook_is_one_clear_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{ this is not json")
    done = course("check", str(broken))
    assert done.returncode == 2
    assert "is not a valid notebook" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_missing_gradebook_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    done = course("grades", cwd=tmp_path)
    assert done.returncode == 2
    assert "no gradebook" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_grades_table_and_csv(graded_class: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--root", str(graded_class), "grades"]) == 0
    table = capsys.readouterr().out
    assert re.search(r"^reference\s+\S", table, re.M)
    rows = list(csv.DictReader((graded_class / "grades.csv").open()))
    by_key = {(r["student"], r["assignment"]): r for r in rows}
    for assignment in ASSIGNMENTS:
        reference = by_key[("reference", assignment)]
        blank = by_key[("blank", assignment)]
        nb = read_notebook(next((graded_class / "source" / assignment).glob("*.ipynb")))
        auto_max = sum(
            c.metadata.nbgrader["points"]
            for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
        )
        assert float(reference["auto_score"]) == auto_max
        assert float(blank["auto_score"]) == 0
        assert float(reference["max_score"]) >= auto_max


def test_feedback_hides_hidden_tests(graded_class: Path) -> None:
    for assignment in ASSIGNMENTS:
        hidden_lines, open_text = set(), ""
        for nb_path in (graded_class / "source" / assignment).glob("*.ipynb"):
            hidden, visible = tampering.split_hidden(read_notebook(nb_path))
            hidden_lines |= {line.strip() for line in hidden if len(line.strip()) > 25}
            open_text += "\n".join(line.strip() for line in visible)
        # The course's own modules are public (tracebacks show them).
        for module in (REPO / "course").rglob("*.py"):
            open_text += "\n".join(line.strip() for line in module.read_text().splitlines())
        # A hidden line that the visible code also contains may be shown.
        hidden_lines = {line for line in hidden_lines if line not in open_text}
        assert hidden_lines, f"{assignment} has no hidden tests"
        pages = list((graded_class / "feedback").glob(f"*/{assignment}/*.html"))
        assert len(pages) >= 3
        for page in pages:
            text = page.read_text()
            assert "HIDDEN TESTS" not in text, page
            for line in hidden_lines:
                escaped = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                assert escaped not in text and line not in text, f"{page}: shows {line!r}"


def test_feedback_keeps_the_failure_message(graded_class: Path) -> None:
    page = graded_class / "feedback/mask_transposed/a_masks/masks_and_positions.html"
    assert "transposed" in page.read_text()


def test_submission_build(tmp_path: Path) -> None:
    description = tmp_path / "student.yaml"
    description.write_text(
        "code:\n  generate_square_subsequent_mask: |\n"
        "    def generate_square_subsequent_mask(sz):\n        return 42\n"
    )
    out = tmp_path / "out.ipynb"
    release = REPO / "release/a_masks/masks_and_positions.ipynb"
    assert main(["submission", "build", str(release), str(description), str(out)]) == 0
    nb = nbformat.read(str(out), as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert any("return 42" in s for s in sources)
    stubs = sum(
        "raise NotImplementedError()" in c.source
        for c in nbformat.read(str(release), as_version=4).cells
        if c.cell_type == "code"
    )
    assert sum("raise NotImplementedError()" in s for s in sources) == stubs - 1  # others kept

    description.write_text("code:\n  not_a_function: 'x = 1'\n")
    done = course("submission", "build", str(release), str(description), str(out))
    assert done.returncode == 2
    assert "not_a_function" in done.stderr and "generate_square_subsequent_mask" in done.stderr


# ----------------------------------------------------------------------------- limits
RLIMITS = ["RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE"]
SHOW_LIMITS = (
    "import json, os, resource, subprocess, sys\n"
    f"names = {RLIMITS!r}\n"
    "mine = [resource.getrlimit(getattr(resource, n)) for n in names]\n"
    "code = 'import json, resource; print(json.dumps([resource.getrlimit(getattr(resource, n))'"
    " + f' for n in {names!r}]))'\n"
    "child = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True,"
    " text=True, check=True).stdout)\n"
    "try:\n"
    "    with open(sys.argv[1], 'wb') as f:\n"
    "        f.write(bytes(3 * 1024 * 1024))\n"
    "    big = 'written'\n"
    "except OSError as error:\n"
    "    big = type(error).__name__\n"
    "print(json.dumps({'pid': os.getpid(), 'mine': mine, 'child': child, 'big': big}))\n"
)


def test_limits_wrapper_sets_the_rlimits_then_becomes_the_command(tmp_path: Path) -> None:
    """The limits hold in the command and in what it starts; the command keeps the pid."""
    command = rlimits.wrap(
        [sys.executable, "-c", SHOW_LIMITS, str(tmp_path / "big")],
        memory_mb=3000,
        file_size_mb=2,
        processes=4000,
    )
    assert command[:4] == [sys.executable, "-P", "-m", "grader.sandbox.rlimits"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    shown = json.loads(out)
    mb = 1024 * 1024
    expected = [[3000 * mb] * 2, [2 * mb] * 2, [4000] * 2, [0, 0]]
    assert shown["mine"] == expected
    assert shown["child"] == expected  # a kernel inherits them
    assert shown["big"] == "OSError"  # a 3 MB file under a 2 MB limit: EFBIG
    assert shown["pid"] == process.pid  # exec, not a child: kill_tree(pid) reaches nbgrader
    assert resource.getrlimit(resource.RLIMIT_FSIZE) != (2 * mb, 2 * mb)  # caller untouched


def test_limits_wrapper_reports_a_missing_command(tmp_path: Path) -> None:
    command = rlimits.wrap(["no-such-program-here"], memory_mb=3000, file_size_mb=2, processes=99)
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    assert "cannot run no-such-program-here" in done.stderr and "Error" in done.stderr


def test_nbgrader_starts_through_the_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No preexec_fn (unsafe with threads): the limits come from the wrapper's arguments."""
    root = tmp_path / "course"
    (root / "submitted/ann/a_masks").mkdir(parents=True)
    (root / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    (root / "gradebook.db").write_bytes(b"")
    started = []

    class Finished:
        pid, returncode = -1, 1

        def communicate(self, timeout: float | None = None) -> tuple[str, None]:
            return "[AutogradeApp | ERROR] ValueError: boom\n", None

    def popen(command: list[str], **kwargs: object) -> Finished:
        started.append((command, kwargs))
        return Finished()

    monkeypatch.setattr(nbgrader_run.process_output, "BoundedPopen", popen)
    config = Limits(memory_mb=1234, file_size_mb=56, processes=78)
    times = TimeLimits(0, 900, "the configured limits")
    job = GradingJob(root, "a_masks", root / "gradebook.db", config, times, {})
    with scratch_course(root, "a_masks", "ann", job.gradebook) as folder:
        outcome = nbgrader_run.run(job, "ann", folder, seed=0)
    assert not folder.exists(), "the scratch course outlived its block"
    ((command, kwargs),) = started
    assert "preexec_fn" not in kwargs
    marker = command.index("--")
    assert command[:marker] == rlimits.wrap([], 1234, 56, 78)[:-1]
    nbgrader = [sys.executable, "-P", "-m", "grader.nbgrader.main", "autograde"]
    assert command[marker + 1 : marker + 6] == nbgrader
    assert f"--Notes.path={folder / 'notes.json'}" in command  # out of the kernel's reach
    assert not outcome.ok and "boom" in outcome.message


def test_a_killed_run_is_not_waited_for_while_another_process_holds_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its time the nbgrader process is killed; a process outside its tree that still
    holds its output (a warm kernel, forked by the zygote) must not keep the run waiting."""
    root = tmp_path / "course"
    (root / "submitted/ann/a_masks").mkdir(parents=True)
    (root / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text())
    (root / "gradebook.db").write_bytes(b"")
    marker = "61.25"  # the orphan's sleep: found and killed at the end
    bounded = nbgrader_run.process_output.BoundedPopen

    def popen(command: list[str], **kwargs: object) -> subprocess.Popen:
        # the subshell exits at once: its sleep, re-parented, is no descendant of sh
        line = ["sh", "-c", f"(sleep {marker} &); sleep 60"]
        return bounded(line, **kwargs)

    monkeypatch.setattr(nbgrader_run.process_output, "BoundedPopen", popen)
    monkeypatch.setattr(nbgrader_run, "KILLED_WAIT", 2)
    times = TimeLimits(0, 1, "the configured limits")
    job = GradingJob(root, "a_masks", root / "gradebook.db", Limits(), times, {})
    try:
        with scratch_course(root, "a_masks", "ann", job.gradebook) as folder:
            outcome = nbgrader_run.run(job, "ann", folder, seed=0)
        assert not outcome.ok and "stopped after 1 s" in outcome.message
        # Not waited for: the orphan, which holds the output until its sleep of 61 s ends, is
        # still there when the run returns (and the run took far less than its sleep: a wide
        # margin over its 1 s limit and 2 s wait, which a loaded machine keeps).
        orphans = [
            p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker]
        ]
        assert orphans, "the orphan holding the output had ended: the run waited for it"
        assert outcome.seconds < 20, f"the run waited {outcome.seconds:.0f} s for the orphan"
    finally:
        for process in psutil.process_iter(["cmdline"]):
            if process.info["cmdline"] == ["sleep", marker]:
                process.kill()


# ----------------------------------------------------------------------------- duplicate cells
def graded_cell(grade_id: str, source: str, **flags: object) -> NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    meta = {"grade": False, "locked": False, "solution": False, "task": False, **flags}
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "schema_version": 3, **meta}
    if meta["grade"]:
        cell.metadata["nbgrader"]["points"] = 1
    return cell


def notebook_with_copies() -> NotebookNode:
    nb = nbformat.v4.new_notebook()
    answer = graded_cell("answer", "x = 1", solution=True)
    test = graded_cell("test_x", "assert x == 1", grade=True, locked=True)
    second = copy.deepcopy(test)
    second.source = "pass  # the student's copy"
    nb.cells = [answer, test, nbformat.v4.new_code_cell("plain = 1"), second, copy.deepcopy(answer)]
    return nb


def test_drop_duplicate_cells_keeps_the_first_copy(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    nb = notebook_with_copies()
    config = Config()
    config.Notes.path = str(tmp_path / "notes.json")  # as grader.coordinator.nbgrader_run names it
    with caplog.at_level(logging.WARNING):
        dedup = DropDuplicateCells(log=logging.getLogger("dedup"), config=config)
        nb, _ = dedup.preprocess(nb, {})
    assert [c.source for c in nb.cells] == ["x = 1", "assert x == 1", "plain = 1"]
    notes = [REMOVED.format("test_x"), REMOVED.format("answer")]
    assert [r.getMessage() for r in caplog.records] == notes
    MetadataValidator().validate_nb(nb)  # what nbgrader's CheckCellMetadata runs next
    # The report reads the notes file: each removed copy once, then the kernels that died.
    Notes(config=config).add("died", DIED.format("test_x"))
    Notes(config=config).add("removed", notes[0])
    assert read_notes(tmp_path / "notes.json") == [*notes, DIED.format("test_x")]
    assert read_notes(tmp_path / "none.json") == []


def test_nbgraders_deduplicate_ids_fails_the_whole_notebook() -> None:
    """Why DropDuplicateCells replaces DeduplicateIds (if this fails, nbgrader has changed)."""
    nb, _ = DeduplicateIds().preprocess(notebook_with_copies(), {})
    assert nb.cells[1].metadata.nbgrader == {}  # the earlier copy: empty metadata, kept
    with pytest.raises(SchemaTooOldError):
        MetadataValidator().validate_nb(nb)  # nbgrader then refuses the whole submission


def test_the_course_sanitizes_with_drop_duplicate_cells() -> None:
    configured = load_config(REPO).Autograde.sanitize_preprocessors
    resolved = [import_item(p) if isinstance(p, str) else p for p in configured]
    default = Autograde.class_traits()["sanitize_preprocessors"].default()
    assert resolved == [DropDuplicateCells if p is DeduplicateIds else p for p in default]


# ----------------------------------------------------------------------------- markers, metadata
def test_reference_code_uses_the_configured_solution_markers() -> None:
    assert solution_markers() == ("BEGIN SOLUTION", "END SOLUTION")
    config = Config()
    config.ClearSolutions.begin_solution_delimeter = "<<< ANSWER"
    config.ClearSolutions.end_solution_delimeter = ">>> ANSWER"
    source = nbformat.v4.new_notebook()
    source.cells = [
        graded_cell(
            "f", "def f():\n    # <<< ANSWER\n    return 1\n    # >>> ANSWER", solution=True
        ),
        graded_cell("t", "assert f() == 1", grade=True, locked=True),
    ]
    code = reference_code(source, config)
    assert code == {"f": "def f():\n    return 1"}
    assert "<<< ANSWER" in reference_code(source)["f"]  # nbgrader's defaults do not see them
    release = copy.deepcopy(source)
    release.cells[0].source = "def f():\n    raise NotImplementedError()"
    assert fill(release, code) == []
    assert release.cells[0].source == "def f():\n    return 1"
    assert release.cells[1].source == "assert f() == 1"


def test_reference_code_of_the_course_has_no_marker() -> None:
    begin, end = solution_markers(load_config(REPO))
    for path in REPO.glob("source/*/*.ipynb"):
        nb = read_notebook(path)
        assert sum(utils.is_solution(c) for c in nb.cells)
        for grade_id, code in reference_code(nb, load_config(REPO)).items():
            assert begin not in code and end not in code, f"{path.name}: {grade_id}"


def test_check_sees_an_edited_read_only_cell() -> None:
    test = graded_cell("t", "assert f() == 1", grade=True, locked=True)
    test.metadata.nbgrader["checksum"] = utils.compute_checksum(test)
    assert not check.edited(test)
    test.source = "pass"
    assert check.edited(test)
    test.metadata.nbgrader["locked"] = False  # a test cell is read-only whatever the flag says
    assert check.edited(test)
    answer = graded_cell("f", "def f(): ...", solution=True)
    answer.metadata.nbgrader["checksum"] = "0"
    assert not check.edited(answer)


def test_every_sub_command_has_its_function_in_the_table():
    """The parser's sub-commands and cli.COMMANDS (plus lab, which runs before it) agree."""
    import argparse

    from grader.command import cli

    subparsers = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(cli.COMMANDS) | {"lab"}
