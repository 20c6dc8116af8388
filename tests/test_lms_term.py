"""A whole term with an LMS, on a class of 30 (docs/lms.md, deploy/jupyterhub/README.md):
roster import, release, due date, a Canvas download collected, autograding, manual grades of the
written answers, the grade export and the feedback zip.

Kept cheap: four students submit (the reference solutions on time and late, a typical mistake,
the blank release notebook), 26 submit nothing; only the four are graded through nbgrader.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main
from grader.coordinator import pipeline
from grader.coordinator.submission import fill, read_description, reference_code
from grader.shared.notebooks import read_notebook
from grader.shared.paths import db_url, load_config
from tests.conftest import make_course_copy
from tests.lms_archives import NOTEBOOK, canvas_name, read_names, write_zip

pytestmark = pytest.mark.slow  # grades through nbgrader

A = "a_masks"
CLASS = 30


def nbgrader(root: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def roster(path: Path) -> Path:
    """nbgrader's roster CSV: id, names, email and the Canvas user id of 30 students."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "first_name", "last_name", "email", "lms_user_id"])
        for n in range(1, CLASS + 1):
            writer.writerow([f"s{n:02}", f"First{n}", f"Last{n}", f"s{n}@uni.example", 2000 + n])
    return path


def submission(root: Path, mistake: str | None, blank: bool = False) -> bytes:
    """A's notebook: the reference solutions (with a demo student's mistake), or blank."""
    nb = read_notebook(root / "release" / A / f"{NOTEBOOK}.ipynb")
    if not blank:
        source = read_notebook(root / "source" / A / f"{NOTEBOOK}.ipynb")
        fill(nb, reference_code(source, load_config(root)))
    if mistake:
        fill(nb, read_description(root / "demo" / A / f"{mistake}.yaml")["code"])
    return nbformat.writes(nb).encode()


def canvas_export(path: Path) -> Path:
    """Canvas's gradebook export of the class (``lib/gradebook_exporter.rb`` of
    instructure/canvas-lms: ``Student, ID, SIS User ID, SIS Login ID, Section``, ``Title (id)``
    per assignment, totals, a ``Points Possible`` row), as a German-locale user downloads it:
    ``;`` separated, with a byte order mark. The SIS ids are not the course's ids: the rows are
    found by Canvas user id."""
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
              "Masks and positions (5501)", "Attention (5502)", "Final Score"]  # fmt: skip
    rows = [header, ["    Points Possible", "", "", "", "", "20.0", "10.0", "(read only)"]]
    for n in range(1, CLASS + 1):
        rows.append([f"Last{n}, First{n}", str(2000 + n), f"SIS-{n:04}", f"s{n}@uni.example",
                     "Main", "", "9.0", "90.0"])  # fmt: skip
    with path.open("w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle, delimiter=";").writerows(rows)
    return path


def test_a_term_on_canvas(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = make_course_copy(tmp_path / "course")
    with (root / "nbgrader_config.py").open("a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"  # the term test\'s\n')
    cli = ["--root", str(root)]

    # roster, release, due date (docs/lms.md)
    assert main([*cli, "release", A, "--clone-only"]) == 0
    nbgrader(root, "db", "student", "import", str(roster(tmp_path / "roster.csv")))
    nbgrader(root, "db", "assignment", "add", A, "--duedate=2026-10-05 17:00:00 UTC")

    # the Canvas download: 4 of 30 submitted
    files = {
        canvas_name("last1first1", 2001, 1, f"{NOTEBOOK}.ipynb"): submission(root, None),
        canvas_name("last2first2", 2002, 2, "masks.ipynb"): submission(root, "mask_transposed"),
        canvas_name("last3first3", 2003, 3, f"{NOTEBOOK}.ipynb", late=True): submission(root, None),
        canvas_name("last4first4", 2004, 4, f"{NOTEBOOK}.ipynb"): submission(root, None, True),
    }
    archive = write_zip(tmp_path / "submissions.zip", files)
    assert main([*cli, "collect", A, str(archive), "--lms", "canvas"]) == 0
    assert "4 collected" in capsys.readouterr().out

    graded = pipeline.autograde(root, A, jobs=2)
    assert sorted(g.student for g in graded if g.ok) == ["s01", "s02", "s03", "s04"]

    # before the written answers are graded by hand the grades are not final: nothing is written
    # (s04's blank answers are the template: nbgrader scores them 0 itself)
    out = tmp_path / "canvas.csv"
    argv = ["grades", "--lms", "canvas", "--out", str(out), "--missing", "zero"]
    assert main([*cli, *argv]) == 2 and not out.exists()
    said = capsys.readouterr().err
    assert "not graded yet for 3 students: s01, s02, s03" in said, said
    assert "--allow-ungraded" in said, said

    # the written answers graded by hand (as in formgrader): full marks for s01, none for s02
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for student, share in (("s01", 1.0), ("s02", 0.0), ("s03", 1.0)):
            for grade in gb.find_submission_notebook(NOTEBOOK, A, student).grades:
                if grade.needs_manual_grade:  # as formgrader saves a score
                    grade.manual_score = share * grade.max_score
                    grade.needs_manual_grade = False
        gb.db.commit()
        total = gb.find_assignment(A).max_score
        late = gb.find_submission(A, "s03")
        # nbgrader's penalty, computed when autograding, did not see the written answers
        assert late.score == total and 0 < late.late_submission_penalty < total

    assert main([*cli, *argv]) == 0  # every written answer graded: the grades are final
    with out.open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:2] == ["Student", "ID"] and rows[0][5] == A
    assert rows[1][5] == f"{total:g}"
    scores = {row[2]: (row[1], float(row[5])) for row in rows[2:]}
    assert len(scores) == CLASS
    assert scores["s01"] == ("2001", total)  # everything right
    assert 0 < scores["s02"][1] < total  # the transposed mask costs its tests and the answers
    assert scores["s03"][1] == 0  # late: the course's penalty takes it all
    assert scores["s04"][1] == 0 and scores["s30"] == ("2030", 0)

    # the grades into the Canvas gradebook that the instructor exported
    export, filled = canvas_export(tmp_path / "export.csv"), tmp_path / "import.csv"
    column = "a_masks=Masks and positions (5501)"
    argv = ["grades", "--lms", "canvas", "--gradebook", str(export), "--out", str(filled)]
    assert main([*cli, *argv, "--assignment", column]) == 0
    with filled.open(newline="", encoding="utf-8-sig") as handle:
        back = list(csv.reader(handle, delimiter=";"))
    header = back[0]
    cells = {row[1]: row[header.index("Masks and positions (5501)")] for row in back[2:]}
    assert float(cells["2001"]) == total and float(cells["2002"]) == scores["s02"][1]
    assert float(cells["2003"]) == 0 and float(cells["2004"]) == 0
    assert all(cells[str(2000 + n)] == "" for n in range(5, CLASS + 1))  # nothing submitted
    assert [row[-1] for row in back] == ["Final Score", "(read only)"] + ["90.0"] * CLASS

    assert main([*cli, "feedback", A, "--zip"]) == 0
    assert "4 students' feedback packed" in capsys.readouterr().out
    assert read_names(root / f"feedback-{A}-canvas.zip") == [
        f"last1first1_2001_1_{NOTEBOOK}_feedback.html",
        f"last2first2_2002_2_{NOTEBOOK}_feedback.html",
        f"last3first3_LATE_2003_3_{NOTEBOOK}_feedback.html",
        f"last4first4_2004_4_{NOTEBOOK}_feedback.html",
    ]
