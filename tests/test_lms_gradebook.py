"""Grades out of the course into the LMS: ``course grades --lms`` as a new CSV (nbgrader export
plugins) and as the instructor's own gradebook export filled in (grader/lms/fill.py).

The Canvas gradebook exports below are as instructure/canvas-lms ``lib/gradebook_exporter.rb``
(at 0140a2effa) writes them: ``Student, ID, SIS User ID, SIS Login ID, Section``, the custom
columns, ``Title (id)`` per assignment, the totals; a "Manual Posting" row, then
``    Points Possible`` with ``(read only)`` totals; ``;`` and a byte order mark when the user's
CSV setting asks. ``lib/gradebook_importer.rb`` (at 00b222d77e) is what reads them back: by
``ID`` (then SIS ids, then name) and by the id in ``Title (id)``."""

from __future__ import annotations

import codecs
import csv
import io
import subprocess
import sys
import warnings
from datetime import timedelta
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main
from grader.lms import collect, export
from grader.shared.paths import CourseError, db_url
from tests.test_lms import DUE, A, moodle_download, worksheet

B = "b_attention"


def graded_gradebook(root: Path) -> None:
    """A and B in the gradebook (10 points each) with scores: Jane 7 on A, John 9 on A but
    late (penalty 4) and 5 on B, Ann nothing; C with no submission at all."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for assignment in (B, "c_pretrain"):
            gb.update_or_create_assignment(assignment)
        for assignment in (A, B, "c_pretrain"):
            gb.update_or_create_notebook("nb", assignment)
            gb.update_or_create_grade_cell("q", "nb", assignment, max_score=10, cell_type="code")
        for assignment, student, points, penalty in [
            (A, "jsmith", 7, 0), (A, "jdoe", 9, 4), (B, "jdoe", 5, 0)
        ]:  # fmt: skip
            late = DUE + timedelta(hours=1) if penalty else None  # A is due at DUE
            gb.add_submission(assignment, student, timestamp=late)
            grade = gb.find_grade("q", "nb", assignment, student)
            grade.auto_score, grade.needs_manual_grade = points, False
            gb.find_submission_notebook("nb", assignment, student).late_submission_penalty = penalty
        gb.db.commit()


def read_csv(path: Path, delimiter: str = ",") -> list[list[str]]:
    text = path.read_bytes().decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))


def test_canvas_export(lms_course: Path, tmp_path: Path) -> None:
    graded_gradebook(lms_course)
    out, left = export.export(lms_course, "canvas", tmp_path / "canvas.csv", missing="zero")
    rows = read_csv(out)
    assert left == []
    # the assignments someone submitted (c_pretrain has no submission: no column)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A, B]
    assert rows[1] == ["Points Possible", "", "", "", "", "10", "10"]
    assert rows[2:] == [
        ["Lee, Ann", "", "alee", "", "", "0", "0"],
        ["Doe, John", "", "jdoe", "", "", "5", "5"],  # 9 less the late penalty of 4
        ["Smith, Jane", "1001", "jsmith", "", "", "7", "0"],
    ]
    # by default a student without a submission gets an empty cell, not 0
    out, _ = export.export(lms_course, "canvas", tmp_path / "default.csv", assignments=[A])
    assert [row[5:] for row in read_csv(out)] == [[A], ["10"], [""], ["5"], ["7"]]


def test_moodle_export_with_empty_cells_for_no_submission(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    graded_gradebook(lms_course)
    out = tmp_path / "moodle.csv"
    argv = ["--root", str(lms_course), "grades", "--lms", "moodle", "--out", str(out)]
    assert main([*argv, "--missing", "blank", "--assignment", f"{A},{B}"]) == 0
    assert "for import into Moodle" in capsys.readouterr().out
    assert main(["--root", str(lms_course), "grades", "--out", str(out)]) == 2
    assert "--out, --gradebook and --assignment go with --lms" in capsys.readouterr().err
    assert read_csv(out) == [
        ["First name", "Last name", "ID number", "Email address", A, B],
        ["Ann", "Lee", "alee", "ann@uni.example", "", ""],
        ["John", "Doe", "jdoe", "john@uni.example", "5", "5"],
        ["Jane", "Smith", "jsmith", "jane@uni.example", "7", ""],
    ]
    assert main([*argv, "--assignment", "c_pretrain", "--assignment", B, "--missing", "zero"]) == 0
    assert [row[4:] for row in read_csv(out)] == [[B, "c_pretrain"], ["0", "0"], ["5", "0"],
                                                   ["0", "0"]]  # fmt: skip
    assert main([*argv, "--assignment", "z_nothing"]) == 2
    assert "no assignment z_nothing in the gradebook" in capsys.readouterr().err


def test_nbgrader_export_runs_the_course_plugin(lms_course: Path, tmp_path: Path) -> None:
    """The same plugin through nbgrader's own command (``nbgrader export --exporter``)."""
    graded_gradebook(lms_course)
    out = tmp_path / "via-nbgrader.csv"
    command = [sys.executable, "-m", "nbgrader", "export",
               "--exporter=grader.lms.export.CanvasExport", f"--to={out}"]  # fmt: skip
    done = subprocess.run(command, cwd=lms_course, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ours, _ = export.export(lms_course, "canvas", tmp_path / "c.csv")
    assert read_csv(out) == read_csv(ours)


def test_export_without_students_says_what_to_do(lms_course: Path, tmp_path: Path) -> None:
    with Gradebook(db_url(lms_course)) as gb:
        for student in ("jsmith", "jdoe", "alee"):
            gb.remove_student(student)
    with pytest.raises(CourseError, match="nbgrader db student import"):
        export.export(lms_course, "canvas", tmp_path / "x.csv")
    (lms_course / "gradebook.db").unlink()
    with pytest.raises(CourseError, match="no gradebook at"):
        export.export(lms_course, "canvas", tmp_path / "x.csv")


TOTALS = ["Current Points", "Final Points", "Current Score", "Unposted Current Score",
          "Final Score", "Unposted Final Score"]  # fmt: skip


def canvas_gradebook(path: Path, delimiter: str = ",", bom: bool = False) -> list[list[str]]:
    """A Canvas gradebook export of the course (see the module): Jane (Canvas id 1001, as the
    roster has it), John (found by his SIS User ID), Ann (by her SIS Login ID, her email),
    Canvas's test student; the assignment titled a_masks, another titled otherwise, an essay
    graded in Canvas, a custom column."""
    ro = "(read only)"
    rows = [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes", "a_masks (4711)",
         "Self-attention (4712)", "Essay (4713)", *TOTALS],
        ["", "", "", "", "", "", "Manual Posting", "", "", "", "", "", "", "", ""],
        ["    Points Possible", "", "", "", "", "", "10.0", "10.0", "20.0", ro, ro, ro, ro, ro, ro],
        ["Smith, Jane", "1001", "S-0007", "jane.smith", "Section 1", "", "", "", "18.5",
         "18.5", "18.5", "92.5", "92.5", "46.25", "46.25"],
        ["Doe, John", "1002", "jdoe", "john.doe", "Section 1", "asked for more time", "N/A", "",
         "12.0", "12.0", "12.0", "60.0", "60.0", "30.0", "30.0"],
        ["Lee, Ann", "1003", "", "ann@uni.example", "Section 2", "", "6.0", "", "", "6.0",
         "6.0", "60.0", "60.0", "15.0", "15.0"],
        ["Student, Test", "1099", "", "test_student_1", "Section 1", "", "", "", "", "0.0",
         "0.0", "", "", "0.0", "0.0"],
    ]  # fmt: skip
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\n").writerows(rows)
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + buffer.getvalue().encode())
    return rows


@pytest.mark.parametrize(("delimiter", "bom"), [(",", False), (";", True)])
def test_canvas_gradebook_export_filled_as_canvas_imports_it(
    lms_course: Path, tmp_path: Path, delimiter: str, bom: bool
) -> None:
    graded_gradebook(lms_course)
    source = tmp_path / "export.csv"
    before = canvas_gradebook(source, delimiter, bom)
    out, left = export.export(
        lms_course, "canvas", tmp_path / "import.csv", "skip",
        [A, f"{B}=Self-attention (4712)"], source,
    )  # fmt: skip
    assert left == []
    raw = out.read_bytes()
    assert raw.startswith(codecs.BOM_UTF8) == bom and b"\r\n" not in raw
    after = read_csv(out, delimiter)
    expected = [list(row) for row in before]
    expected[3][6] = "7"  # Jane (Canvas id 1001) in a_masks (4711)
    expected[4][6], expected[4][7] = "5", "5"  # John (SIS User ID jdoe): 9 less 4; and B
    # Ann submitted nothing (skip): her 6.0 entered in Canvas stays; so does everything else,
    # the header, the Manual Posting and Points Possible rows, the notes, the essay, the totals
    assert after == expected


@pytest.mark.parametrize(("missing", "cell"), [("blank", ""), ("zero", "0")])
def test_canvas_gradebook_missing_students(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture, missing: str, cell: str
) -> None:
    graded_gradebook(lms_course)
    source, out = tmp_path / "export.csv", tmp_path / "import.csv"
    before = canvas_gradebook(source)
    argv = ["--root", str(lms_course), "grades", "--lms", "canvas", "--gradebook", str(source),
            "--out", str(out), "--assignment", A, "--missing", missing]  # fmt: skip
    assert main(argv) == 0
    after = read_csv(out)
    assert [row[6] for row in after[3:]] == ["7", "5", cell, cell]  # Ann, the test student
    assert [row[7] for row in after] == [row[7] for row in before]  # B not chosen: untouched


def test_canvas_gradebook_problems_are_explained(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    graded_gradebook(lms_course)
    source, out = tmp_path / "export.csv", tmp_path / "import.csv"
    rows = canvas_gradebook(source)
    with pytest.raises(CourseError, match=r"no column titled as the assignment b_attention"):
        export.export(lms_course, "canvas", out, "skip", [B], source)
    by_id, _ = export.export(lms_course, "canvas", out, "zero", [f"{B}=4712"], source)
    assert [row[7] for row in read_csv(by_id)[3:]] == ["0", "5", "0", "0"]  # by Canvas's id
    with pytest.raises(CourseError, match=r"no column 'Attention \(9999\)'.*'a_masks \(4711\)'"):
        export.export(lms_course, "canvas", out, "skip", [f"{B}=Attention (9999)"], source)
    # Jane is not in the Canvas course: her grade has no row, and the command says so
    with source.open("w", newline="") as handle:
        csv.writer(handle).writerows([r for r in rows if r[0] != "Smith, Jane"])
    argv = ["--root", str(lms_course), "grades", "--lms", "canvas", "--gradebook", str(source),
            "--out", str(out), "--assignment", A]  # fmt: skip
    assert main(argv) == 1
    said = capsys.readouterr().out
    assert "not written: jsmith: the grade of a_masks is not written" in said
    moodle_like = tmp_path / "moodle.csv"
    moodle_like.write_text("First name,Last name,Email address,a_masks\nJane,Smith,j@x,1\n")
    assert main([*argv[:6], str(moodle_like), *argv[7:]]) == 2
    assert "is not a Canvas gradebook export" in capsys.readouterr().err


def test_moodle_gradebook_export_filled(lms_course: Path, tmp_path: Path) -> None:
    """Moodle's gradebook export (Grades > Export > Plain text file): the student by email."""
    graded_gradebook(lms_course)
    source = tmp_path / "moodle-export.csv"
    rows = [
        ["First name", "Last name", "ID number", "Institution", "Department", "Email address",
         "Assignment: a_masks (Real)", "Assignment: Attention (Real)", "Course total (Real)",
         "Last downloaded from this course"],
        ["Jane", "Smith", "", "", "", "jane@uni.example", "-", "-", "-", "1760000000"],
        ["John", "Doe", "", "", "", "john@uni.example", "-", "-", "-", "1760000000"],
        ["Ann", "Lee", "", "", "", "ann@uni.example", "-", "-", "-", "1760000000"],
    ]  # fmt: skip
    with source.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    out, left = export.export(lms_course, "moodle", tmp_path / "in.csv", "skip", [A], source)
    assert left == []
    assert [row[6] for row in read_csv(out)] == [rows[0][6], "7", "5", "-"]
    assert read_csv(out)[0] == rows[0] and [r[7:] for r in read_csv(out)] == [r[7:] for r in rows]


def test_moodle_grading_worksheet_filled(lms_course: Path, tmp_path: Path) -> None:
    """An assignment's grading worksheet: each participant's grade in its Grade column, the
    participant being the one of the collected download (Jane 71, John 72)."""
    collect.collect(lms_course, A, moodle_download(tmp_path), "moodle", None, "UTC")
    graded_gradebook(lms_course)
    source = worksheet(tmp_path, "de", 2, ";")
    before = read_csv(source, ";")
    out, left = export.export(lms_course, "moodle", tmp_path / "in.csv", "skip", [A], source)
    after = read_csv(out, ";")
    assert [row[4] for row in after] == ["Bewertung", "7", "5", "", ""]
    assert [row[:4] + row[5:] for row in after] == [row[:4] + row[5:] for row in before]
    with pytest.raises(CourseError, match="one assignment's: choose it with --assignment"):
        export.export(lms_course, "moodle", tmp_path / "in.csv", "skip", [A, B], source)
