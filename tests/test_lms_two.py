"""One assignment collected from two LMSs, and from one LMS in two downloads (two sections):
every download kept, each LMS's feedback zip and grade file with its own students (the refusal
for written answers not graded counting only them), and ``course forget`` finding a student in
every download, feedback zip and record. No grading runs here."""

from __future__ import annotations

import csv
import warnings
import zipfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main
from grader.lms import collect, feedback_zip
from grader.shared.paths import db_url
from grader.term import forget
from tests.lms_archives import (
    NOTEBOOK,
    canvas_name,
    moodle_folder,
    notebook_bytes,
    read_names,
    write_zip,
)

A = "a_masks"
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Masks (5501)"]


def two_lms_class(root: Path) -> dict[str, Path]:
    """A collected from Canvas in two downloads (Jane; Zed, not in the roster) and from Moodle
    (John and Ann, found by name, no worksheet); each student's feedback written."""
    private = root / "private"
    private.mkdir()
    zips = {
        "canvas": write_zip(private / "submissions.zip", {
            canvas_name("smithjane", 1001, 501, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane")}),
        "canvas2": write_zip(private / "section2.zip", {
            canvas_name("newzed", 1009, 509, f"{NOTEBOOK}.ipynb"): notebook_bytes("zed")}),
        "moodle": write_zip(private / "moodle.zip", {
            moodle_folder("John Doe", 72) + f"{NOTEBOOK}.ipynb": notebook_bytes("john"),
            moodle_folder("Ann Lee", 73) + f"{NOTEBOOK}.ipynb": notebook_bytes("ann")}),
    }  # fmt: skip
    for name, path in zips.items():
        done = collect.collect(root, A, path, name.rstrip("2"))
        if name == "moodle":
            assert any("lateness unknown" in note for note in done.notes)
            assert "no --worksheet: lateness unknown" in collect.format_report(done)
    for student in ("jsmith", "1009", "jdoe", "alee"):
        folder = root / "feedback" / student / A
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.html").write_text(f"<p>{student}</p>")
    return zips


def test_every_download_is_kept_and_each_lms_gets_its_feedback_zip(lms_course: Path) -> None:
    two_lms_class(lms_course)
    record = collect.read_record(lms_course, A)
    assert {s: e["lms"] for s, e in record["students"].items()} == {
        "jsmith": "canvas", "1009": "canvas", "jdoe": "moodle", "alee": "moodle"
    }  # fmt: skip
    assert {d: about["lms"] for d, about in record["downloads"].items()} == {
        "canvas-submissions": "canvas", "canvas-section2": "canvas", "moodle-moodle": "moodle"
    }  # fmt: skip
    for download in record["downloads"]:
        assert (lms_course / "downloaded" / A / download / "archive" / "submissions.zip").is_file()
    written, left = feedback_zip.pack(lms_course, A)
    assert left == []
    assert {path.name: packed for path, packed in written} == {
        f"feedback-{A}-canvas.zip": ["1009", "jsmith"],
        f"feedback-{A}-moodle.zip": ["alee", "jdoe"],
    }
    assert read_names(lms_course / f"feedback-{A}-moodle.zip") == [
        f"{moodle_folder('Ann Lee', 73)}{NOTEBOOK}_feedback.html",
        f"{moodle_folder('John Doe', 72)}{NOTEBOOK}_feedback.html",
    ]


def test_two_zips_of_one_name_are_both_kept(lms_course: Path, tmp_path: Path) -> None:
    """Two sections' downloads saved under the same name: both kept; the same zip collected
    again replaces its own folder."""
    first = write_zip(
        tmp_path / "submissions.zip",
        {canvas_name("smithjane", 1001, 501, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane")},
    )
    collect.collect(lms_course, A, first, "canvas")
    collect.collect(lms_course, A, first, "canvas")
    (tmp_path / "s2").mkdir()
    second = write_zip(
        tmp_path / "s2" / "submissions.zip",
        {canvas_name("newzed", 1009, 509, f"{NOTEBOOK}.ipynb"): notebook_bytes("zed")},
    )
    collect.collect(lms_course, A, second, "canvas")
    record = collect.read_record(lms_course, A)
    assert sorted(record["downloads"]) == ["canvas-submissions", "canvas-submissions-2"]
    assert {s: e["download"] for s, e in record["students"].items()} == {
        "jsmith": "canvas-submissions",
        "1009": "canvas-submissions-2",
    }
    assert sorted(p.name for p in (lms_course / "downloaded" / A).iterdir()) == [
        "canvas-submissions", "canvas-submissions-2", "lms.json"]  # fmt: skip


def grades(root: Path, ungraded: str) -> None:
    """A graded for the four: 7 points each, ``ungraded``'s written answer waiting."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_notebook("nb", A)
        gb.update_or_create_grade_cell("q", "nb", A, max_score=10, cell_type="code")
        gb.update_or_create_grade_cell("w", "nb", A, max_score=3, cell_type="markdown")
        for student in ("jsmith", "1009", "jdoe", "alee"):
            gb.update_or_create_submission(A, student)
            auto = gb.find_grade("q", "nb", A, student)
            auto.auto_score, auto.needs_manual_grade = 7, False
            written = gb.find_grade("w", "nb", A, student)
            written.manual_score, written.needs_manual_grade = 0, student == ungraded
        gb.db.commit()


def test_each_lms_s_grade_file_takes_its_own_students(
    lms_course: Path, capsys: pytest.CaptureFixture
) -> None:
    """John (Moodle) waits for a hand grade: the Canvas file is written without a word of him;
    Moodle's is refused naming him, then sent with --allow-ungraded, saying so."""
    two_lms_class(lms_course)
    grades(lms_course, ungraded="jdoe")
    export = lms_course / "private" / "canvas-export.csv"
    with export.open("w", newline="") as handle:
        csv.writer(handle).writerows([
            CANVAS_HEADER, ["    Points Possible", "", "", "", "", "13"],
            ["Smith, Jane", "1001", "", "", "A", ""], ["New, Zed", "1009", "", "", "B", ""],
        ])  # fmt: skip
    cli = ["--root", str(lms_course), "grades"]
    out = lms_course / "private" / "canvas-import.csv"
    argv = [*cli, "--lms", "canvas", "--gradebook", str(export), "--out", str(out),
            "--assignment", f"{A}=Masks (5501)"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "not written" not in said and "jdoe" not in said and "anyway" not in said, said
    rows = list(csv.reader(out.open(newline="")))
    assert [row[5] for row in rows[2:]] == ["7", "7"]
    moodle = [*cli, "--lms", "moodle", "--out", str(lms_course / "grades-moodle.csv"),
              "--assignment", A]  # fmt: skip
    assert main(moodle) == 2
    assert "for 1 students: jdoe" in capsys.readouterr().err
    assert main([*moodle, "--allow-ungraded"]) == 0
    said = capsys.readouterr().out
    assert "exported anyway (--allow-ungraded): a_masks: written answers not graded yet for 1 " \
        "students, sent with 0 for them: jdoe" in said  # fmt: skip
    rows = list(csv.reader((lms_course / "grades-moodle.csv").open(newline="")))
    assert {row[2]: row[4] for row in rows[1:]} == {"alee": "7", "jdoe": "7", "jsmith": "",
                                                    "1009": ""}  # fmt: skip
    # the same refusal, the other way round: Jane (Canvas) waits; Moodle's file is written
    grades(lms_course, ungraded="jsmith")
    assert main([*moodle]) == 0
    assert main([*argv]) == 2 and "for 1 students: jsmith" in capsys.readouterr().err
    assert main([*argv, "--allow-ungraded"]) == 0
    assert "sent with 0 for them: jsmith" in capsys.readouterr().out


def names_in(root: Path) -> str:
    """Every file's name and text under ``root`` (zips' entry names too), private/ aside."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "private" not in p.parts):
        found.append(path.relative_to(root).as_posix())
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found += [n + " " + archive.read(n).decode(errors="replace")
                          for n in archive.namelist()]  # fmt: skip
        elif path.suffix in (".json", ".html", ".csv", ".ipynb"):
            found.append(path.read_text(errors="replace"))
    return "\n".join(found)


@pytest.mark.parametrize(
    ("student", "name", "theirs"),
    [("alee", "Ann Lee", "moodle.zip"), ("1009", "newzed", "section2.zip")],
)
def test_forget_finds_a_student_in_every_download(
    lms_course: Path, student: str, name: str, theirs: str
) -> None:
    zips = two_lms_class(lms_course)
    feedback_zip.pack(lms_course, A)
    found = forget.plan(lms_course, student)
    assert found.yours == [lms_course / "private" / theirs]
    forget.carry_out(found)
    left = names_in(lms_course)
    assert name not in left and f"<p>{student}</p>" not in left
    others = {"alee": "John Doe", "1009": "smithjane"}[student]
    assert others in left  # the other students of the same downloads are kept
    assert name in "\n".join(read_names(zips["moodle" if student == "alee" else "canvas2"]))
