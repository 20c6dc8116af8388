"""A whole graded term in a private copy of the course, as docs/term.md runs it.

A clone of the repository with its students' address set; three assignments released; A handed in
by 30 students through Canvas (two late, one of them with an extension; three with another
correct style) and by two through Moodle (one assignment from two LMSs), B by 10 through Moodle;
written answers graded by hand; a hidden test of A that rejected a correct style fixed mid-term
and A regraded (hand grades and comments kept, the moved points reported); grades filled into a
Canvas export and a Moodle worksheet, A's Moodle students into a Moodle file; feedback zips for
both LMSs; a student of each LMS removed and found nowhere, in the course folder or in the
end-of-term archive (docs/personal-data.md) once the files the command lists are deleted; the
demo run in the same clone at the start and at the end without changing one grade of the term;
and `git status` naming no file with a student's data.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main
from grader.coordinator import pipeline
from grader.coordinator.submission import fill, read_description, reference_code
from grader.shared.notebooks import read_notebook
from grader.shared.paths import db_url, load_config
from grader.term import final
from tests.conftest import REPO
from tests.lms_archives import canvas_name, moodle_folder, read_names, write_zip
from tests.test_lms import SHEET_HEADERS, SHEET_TIME
from tests.test_lms_term import canvas_export, roster

pytestmark = [pytest.mark.deep, pytest.mark.slow]  # a term's worth of grading: minutes

A, B, C = "a_masks", "b_attention", "c_params"
NOTEBOOK = {A: "masks_and_positions", B: "attention_and_layer"}
ADDRESS = "https://github.com/teacher/course-public"
ALT = ("s26", "s27", "s28")  # another correct style, which A's wrong hidden test rejects
WRONG_TEST = (  # a hidden test that wrongly asks for torch.triu
    '\nassert "triu" in generate_square_subsequent_mask.__code__.co_names, "use torch.triu"\n'
)
MOODLE = 10


def git(clone: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def handed_in(root: Path, assignment: str, style: str | None) -> bytes:
    """A student's notebook: the reference solutions, or a demo student's code, or blank."""
    name = NOTEBOOK[assignment]
    nb = read_notebook(root / "release" / assignment / f"{name}.ipynb")
    if style != "blank":
        source = read_notebook(root / "source" / assignment / f"{name}.ipynb")
        fill(nb, reference_code(source, load_config(root)))
    if style not in (None, "blank"):
        fill(nb, read_description(root / "demo" / assignment / f"{style}.yaml")["code"])
    return nbformat.writes(nb).encode()


def with_wrong_hidden_test(root: Path) -> str:
    """Put the wrong hidden test into A's mask test; return the notebook as it was."""
    path = root / "source" / A / f"{NOTEBOOK[A]}.ipynb"
    text = path.read_text()
    notebook = json.loads(text)
    for cell in notebook["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "test_mask_hidden":
            source = "".join(cell["source"]).replace(
                "### BEGIN HIDDEN TESTS", "### BEGIN HIDDEN TESTS" + WRONG_TEST, 1
            )
            cell["source"] = source.splitlines(keepends=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return text


def moodle_class(private: Path) -> tuple[Path, Path]:
    """B's Moodle download (10 participants, one with a typical mistake) and its worksheet."""
    rows, files = [SHEET_HEADERS["en"]], {}
    for n in range(1, MOODLE + 1):
        name, participant = f"Mia Student{n}", 80 + n
        rows.append([f"Participant {participant}", name, f"m{n:02}@uni.example", "Submitted", "",
                     "31,00", "Yes", SHEET_TIME["en"](9, n), "-", ""])  # fmt: skip
        files[f"{moodle_folder(name, participant)}{NOTEBOOK[B]}.ipynb"] = n
    sheet = private / "worksheet.csv"
    with sheet.open("w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle).writerows(rows)
    return sheet, files


def class_roster(private: Path) -> Path:
    """The roster: Canvas's 30 (s01-s30, their Canvas user ids) and Moodle's 10 (m01-m10)."""
    path = roster(private / "roster.csv")
    with path.open("a", newline="") as handle:
        for n in range(1, MOODLE + 1):
            csv.writer(handle).writerow([f"m{n:02}", "Mia", f"Student{n}", f"m{n:02}@uni.example"])
    return path


def scores(root: Path) -> dict[tuple[str, str], float]:
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        return {(a.name, s.student.id): s.score for a in gb.assignments for s in a.submissions}


def grade_by_hand(root: Path, assignment: str) -> None:
    """Every written answer graded (full marks; none for a blank notebook), one comment."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for submission in gb.find_assignment(assignment).submissions:
            for notebook in submission.notebooks:
                blank = submission.student.id == "s30"
                for grade in notebook.grades:
                    if grade.needs_manual_grade:  # as formgrader saves a score
                        grade.manual_score = 0 if blank else grade.max_score
                        grade.needs_manual_grade = False
                for comment in notebook.comments[:1]:
                    comment.manual_comment = f"well argued, {submission.student.id}"
        gb.db.commit()


def hand_grades(root: Path, assignment: str, student: str) -> list:
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        notebook = gb.find_submission(assignment, student).notebooks[0]
        manual = sorted((g.name, g.manual_score) for g in notebook.grades if g.manual_score)
        return manual + [c.manual_comment for c in notebook.comments if c.manual_comment]


def test_a_whole_term(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    clone = tmp_path / "my-course"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    cli, private = ["--root", str(clone)], clone / "private"
    private.mkdir()

    # the demo first, in its own folder
    assert main([*cli, "demo", A, "--jobs", "2"]) == 0
    demo_grades = (clone / "demo-course" / "grades.csv").read_text()
    assert not (clone / "gradebook.db").exists() and not (clone / "submitted").exists()

    # the address, a late penalty, a hidden test that is wrong (found later), the releases
    assert main([*cli, "address", ADDRESS]) == 0
    with (clone / "nbgrader_config.py").open("a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    original = with_wrong_hidden_test(clone)
    git(clone, "commit", "-qam", "the term's configuration")
    for assignment in (A, B, C):
        assert main([*cli, "release", assignment]) == 0
    cell = "".join(
        read_notebook(clone / "release" / C / "counting_parameters.ipynb").cells[0].source
    )
    assert f"git+{ADDRESS}#subdirectory=student" in cell
    subprocess.run([sys.executable, "-m", "nbgrader", "db", "student", "import",
                    str(class_roster(private))], cwd=clone, check=True)  # fmt: skip
    for assignment in (A, B):
        assert main([*cli, "due", assignment, "2026-10-05 17:00", "--timezone", "UTC"]) == 0
    capsys.readouterr()

    # A through Canvas: 30 students, s02 and s03 late, s03 with an extension of a day
    styles = {"s29": "mask_transposed", "s30": "blank"} | dict.fromkeys(ALT, "alt_correct")
    files = {
        canvas_name(f"last{n}first{n}", 2000 + n, n, f"{NOTEBOOK[A]}.ipynb", late=n in (2, 3)):
        handed_in(clone, A, styles.get(f"s{n:02}"))
        for n in range(1, 31)
    }  # fmt: skip
    assert main([*cli, "extension", A, "s03", "--hours", "24"]) == 0
    assert main([*cli, "collect", A, str(write_zip(private / "canvas.zip", files)), "--lms",
                 "canvas"]) == 0  # fmt: skip
    # B through Moodle: 10 students, found in the roster by their email
    sheet, numbers = moodle_class(private)
    download = {path: handed_in(clone, B, "ln_unbiased" if n == MOODLE else None)
                for path, n in numbers.items()}  # fmt: skip
    argv = ["collect", B, str(write_zip(private / "moodle.zip", download)), "--lms", "moodle",
            "--worksheet", str(sheet), "--timezone", "UTC"]  # fmt: skip
    assert main([*cli, *argv]) == 0
    assert "10 collected" in capsys.readouterr().out
    # A through Moodle as well, for m01 and m02 (no worksheet: lateness unknown, said)
    a_moodle = {f"{moodle_folder(f'Mia Student{n}', 90 + n)}{NOTEBOOK[A]}.ipynb":
                handed_in(clone, A, None) for n in (1, 2)}  # fmt: skip
    argv = ["collect", A, str(write_zip(private / "moodle-a.zip", a_moodle)), "--lms", "moodle"]
    assert main([*cli, *argv]) == 0
    said = capsys.readouterr().out
    assert "2 collected" in said and "lateness unknown" in said

    graded = pipeline.autograde(clone, A, jobs=2) + pipeline.autograde(clone, B, jobs=2)
    assert len(graded) == 42 and all(g.ok for g in graded), [g.message for g in graded]
    for assignment in (A, B):
        grade_by_hand(clone, assignment)
    first = scores(clone)
    full = first[(A, "s01")]
    assert first[(A, "s26")] == full - 2  # the wrong hidden test took its 2 points
    kept = hand_grades(clone, A, "s26")
    assert kept and "well argued, s26" in kept

    # the fix: the hidden test put right, released with --force, A regraded
    (clone / "source" / A / f"{NOTEBOOK[A]}.ipynb").write_text(original)
    assert main([*cli, "release", A]) == 1
    said = capsys.readouterr().out  # the changed test alone: the install cell has the address
    assert "test cell test_mask_hidden changed (hidden)" in said and said.count(" changed") == 1
    assert main([*cli, "release", A, "--force"]) == 0
    log = json.loads((clone / "releases.json").read_text())
    assert [len(entry["changes"]) for entry in log] == [1], log
    assert main([*cli, "regrade", A, "--jobs", "2"]) == 0
    said = capsys.readouterr().out
    moved = [line for line in said.splitlines() if "->" in line]
    assert moved == [f"{s}: {full - 2:g} -> {full:g} (+2)" for s in ALT], said
    assert hand_grades(clone, A, "s26") == kept  # hand grades and comments kept
    assert "written answers graded by hand kept as graded" in said
    assert final.ungraded(clone, [A]) == {}  # nothing to grade again by hand
    after = scores(clone)
    assert {k: v for k, v in after.items() if k[1] not in ALT} == {
        k: v for k, v in first.items() if k[1] not in ALT
    }

    # grades out: refused while anything is left to grade by hand, then into the LMS's files
    lines = [line for line in _grades(cli, capsys).splitlines() if "late by" in line]
    assert [line.split(":")[0].strip() for line in lines] == ["s02"]  # s03 had a day more
    canvas_in = private / "canvas-import.csv"
    argv = ["grades", "--lms", "canvas", "--gradebook", str(canvas_export(private / "export.csv")),
            "--out", str(canvas_in), "--assignment", f"{A}=Masks and positions (5501)"]  # fmt: skip
    assert main([*cli, *argv]) == 0  # A's Moodle students are not "not written" here
    assert "not written" not in capsys.readouterr().out
    with canvas_in.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    column = rows[0].index("Masks and positions (5501)")
    got = {row[1]: float(row[column]) for row in rows[2:]}
    assert got["2001"] == got["2003"] == got["2026"] == full  # s03's extension: on time
    assert got["2002"] == 0 and got["2030"] == 0  # late (penalty "zero"), blank
    moodle_in = private / "moodle-import.csv"
    argv = ["grades", "--lms", "moodle", "--gradebook", str(sheet), "--out", str(moodle_in),
            "--assignment", B]  # fmt: skip
    assert main([*cli, *argv]) == 0
    with moodle_in.open(newline="", encoding="utf-8-sig") as handle:
        worksheet = list(csv.reader(handle))
    filled = {row[2]: float(row[4].replace(",", ".")) for row in worksheet[1:]}
    assert filled == {f"m{n:02}@uni.example": after[(B, f"m{n:02}")] for n in range(1, 11)}
    assert len(set(filled.values())) == 2  # nine full marks, one typical mistake
    a_moodle_in = private / "moodle-a-import.csv"
    argv = ["grades", "--lms", "moodle", "--out", str(a_moodle_in), "--assignment", A]
    assert main([*cli, *argv]) == 0
    with a_moodle_in.open(newline="") as handle:
        a_rows = {row[2]: row[4] for row in list(csv.reader(handle))[1:]}
    assert a_rows["m01"] == a_rows["m02"] == f"{full:g}" and a_rows["s01"] == ""

    # feedback zips for each LMS, A's for both
    assert main([*cli, "feedback", A, "--zip"]) == 0 and main([*cli, "feedback", B, "--zip"]) == 0
    assert len(read_names(clone / f"feedback-{A}-canvas.zip")) == 30
    assert len(read_names(clone / f"feedback-{A}-moodle.zip")) == 2
    assert len(read_names(clone / f"feedback-{B}-moodle.zip")) == MOODLE
    capsys.readouterr()

    # a student of each LMS removed; the files of theirs the command lists deleted by hand
    for student in ("s29", "m02"):
        assert main([*cli, "forget", student, "--yes"]) == 0
        listed = capsys.readouterr().out.split("your own files", 1)[-1].splitlines()[1:]
        for line in listed:
            (clone / line.strip()).unlink()
    assert (A, "s29") not in scores(clone) and not (clone / "submitted" / "s29").exists()
    assert len(read_names(clone / f"feedback-{A}-moodle.zip")) == 1
    for where, text in archive_texts(clone, tmp_path / "term.tar.gz"):
        found = FORGOTTEN.search(text)
        assert found is None, f"{where} still holds {found.group(0)!r}"

    # the demo again, at the end: the term's grades unchanged, the demo's as before
    before_demo = scores(clone)
    assert main([*cli, "demo", A, "--jobs", "2"]) == 0
    assert scores(clone) == before_demo
    assert (clone / "demo-course" / "grades.csv").read_text() == demo_grades

    # git sees no file that holds a student's name, id or grade
    changed = {line[3:] for line in git(clone, "status", "--porcelain").splitlines()}
    allowed = {"releases.json", "reference_runs.json", f"source/{A}/{NOTEBOOK[A]}.ipynb"}
    assert {p for p in changed if not p.startswith("release/")} <= allowed, changed


# What names s29 (Canvas: id, user id 2029, sortable name, names) and m02 (Moodle: id, email,
# name, participant ids 82 and 92 in the folders' names).
FORGOTTEN = re.compile(
    r"(?<![\w-])(s29|First29|Last29|m02|m02@uni\.example)(?![\w-])"
    r"|(?<![\w.-])2029(?![\w.-])|last29first29|_2029_"
    r"|Mia Student2(?!\d)|_(82|92)_assignsubmission"
)
ARCHIVED = ("gradebook.db", "submitted", "autograded", "feedback", "grading_records",
            "grading_report.csv", "grades.csv", "downloaded", "private", ".exchange",
            ".nbgrader.log")  # fmt: skip


def archive_texts(clone: Path, path: Path) -> list[tuple[str, str]]:
    """The end-of-term archive of docs/personal-data.md (its files and folders, the globs'
    matches), written; every member's name and text read back, a zip's entries too."""
    names = [n for n in ARCHIVED if (clone / n).exists()]
    for pattern in ("gradebook.db*", "grades-*.csv", "class-report-*.html", "feedback-*.zip"):
        names += sorted(p.name for p in clone.glob(pattern) if p.name not in names)
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            tar.add(clone / name, arcname=name)
    texts = []
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read() if member.isfile() else b""
            texts.append((member.name, member.name + "\n" + data.decode(errors="replace")))
            if member.name.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(data)) as inner:
                    texts += [(f"{member.name}:{n}", n + "\n" + inner.read(n).decode(
                        errors="replace")) for n in inner.namelist()]  # fmt: skip
    return texts


def _grades(cli: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main([*cli, "grades"]) == 0
    return capsys.readouterr().out
