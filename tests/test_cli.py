"""The `course` command: self-check exit codes, grades, feedback, and one-line errors."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader import tampering
from grader.cli import main
from grader.submission import read_notebook
from tests.conftest import ASSIGNMENTS, REPO

COURSE = [sys.executable, "-m", "grader.cli"]


def course(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*COURSE, *args], cwd=cwd, capture_output=True, text=True)


def test_check_passes_the_reference_and_fails_a_mistake(graded_class: Path) -> None:
    good = graded_class / "submitted/reference/a_masks/masks_and_positions.ipynb"
    done = course("check", str(good))
    assert done.returncode == 0, done.stdout
    assert "Visible tests: 4/4 points, 0 failed" in done.stdout

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
    assert sum("raise NotImplementedError()" in s for s in sources) == 2  # the others untouched

    description.write_text("code:\n  not_a_function: 'x = 1'\n")
    done = course("submission", "build", str(release), str(description), str(out))
    assert done.returncode == 2
    assert "not_a_function" in done.stderr and "generate_square_subsequent_mask" in done.stderr
