"""Personal data out of git and removable (docs/personal-data.md): every file that names a
student or holds a grade is ignored by git, and ``course forget STUDENT`` removes a student from
everything the course keeps.

The fast tests build the gradebook through nbgrader's API (a student, a submission, its grades
and a comment) and the files the commands write, by hand; ``test_a_term_then_one_student_forgotten``
(slow) makes them with the commands themselves: a Canvas download of assignment A collected,
graded, fed back, exported and reported on, then one student forgotten.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.utils import notebook_hash

from grader.command.cli import main
from grader.coordinator.submission import fill, read_description, reference_code
from grader.shared import records, report
from grader.shared.notebooks import read_notebook
from grader.shared.paths import CourseError, db_url, load_config
from grader.term import forget
from tests import lms_archives as lms
from tests.conftest import REPO, make_course_copy
from tests.lms_archives import NOTEBOOK

A = "a_masks"

# What the documented commands write in the course folder, and what the instructor passes to
# them under the names the docs use (docs/lms.md, docs/grading.md, docs/personal-data.md).
WRITTEN = [
    "gradebook.db",
    "gradebook.db-journal",
    f"submitted/s01/{A}/{NOTEBOOK}.ipynb",
    f"submitted/s01/{A}/timestamp.txt",
    f"autograded/s01/{A}/{NOTEBOOK}.ipynb",
    f"feedback/s01/{A}/{NOTEBOOK}.html",
    "grades.csv",
    "grades-canvas.csv",
    "grades-moodle.csv",
    report.FILE,
    f"{records.FOLDER}/{A}/s01.json",
    f"class-report-{A}.html",
    f"feedback-{A}-canvas.zip",
    f"downloaded/{A}/archive/submissions.zip",
    f"downloaded/{A}/extracted/submissions/{lms.canvas_name('lastfirst', 2001, 1, 'x.ipynb')}",
    f"downloaded/{A}/lms.json",
    f"downloaded/{A}/moodle-TR-Masks-7/archive/submissions.zip",
    f".exchange/transformers/inbound/s01+{A}+2026-10-05 17:00:00.000000 UTC+abc/x.ipynb",
    ".nbgrader.log",
    # the instructor's: in private/ as the docs say, or at the top under any name
    "private/roster.csv",
    "private/canvas/2026-10-06T0910_Grades-Transformers.csv",
    "private/moodle/TR-Masks and positions-12.zip",
    "private/anything at all.txt",
]
ELSEWHERE = [
    "roster.csv",
    "submissions.zip",
    "grading_worksheet.csv",
    "worksheet.csv",
    "export.csv",
    "import.csv",
    "2026-10-06T0910_Grades-Transformers.csv",
    "Grades-TR-Masks and positions-12.csv",
    "TR-Masks and positions-12.zip",
    "TR Grades.xlsx",
    "my report.html",
    "lms/roster.csv",
    "lms/submissions.zip",
    "downloads/Grades-TR-Masks-12.csv",
]
NESTED = [
    "demo-course/gradebook.db",
    f"demo-course/submitted/s01/{A}/{NOTEBOOK}.ipynb",
    f"demo-course/autograded/s01/{A}/{NOTEBOOK}.ipynb",
    f"demo-course/feedback/s01/{A}/{NOTEBOOK}.html",
    f"demo-course/{records.FOLDER}/{A}/s01.json",
    "demo-course/grades.csv",
    f"demo-course/{report.FILE}",
]  # a second course folder inside the repository (a demo's, a copy): the same files
PERSONAL = WRITTEN + ELSEWHERE + NESTED
# What stays tracked: the course itself.
TRACKED = [
    f"source/{A}/{NOTEBOOK}.ipynb",
    f"release/{A}/{NOTEBOOK}.ipynb",
    "autograded/README.md",
    "nbgrader_config.py",
    "reference_runs.json",
    "docs/personal-data.md",
    "course/data/cs224n_a5/birth_dev.tsv",
]


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def repository_with_our_ignores(folder: Path) -> Path:
    """A new git repository holding the working tree's ignore files (as a clone has them)."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    listed = git(REPO, "ls-files", "--cached", "--others", "--exclude-standard", "*.gitignore")
    for name in listed.split("\n"):
        if name:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, folder / name)
    return folder


def test_every_personal_file_is_ignored_and_the_course_is_not(tmp_path: Path) -> None:
    clone = repository_with_our_ignores(tmp_path / "clone")
    for name in PERSONAL + TRACKED:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text("x")
    seen = set(git(clone, "status", "--porcelain", "--untracked-files=all").split("\n"))
    seen = {line[3:].strip('"') for line in seen if line}
    assert not seen & set(PERSONAL), f"git would track personal files: {seen & set(PERSONAL)}"
    ignored = set(git(clone, "check-ignore", *PERSONAL, *TRACKED).split("\n")) - {""}
    assert ignored == set(PERSONAL), set(PERSONAL) ^ ignored


def test_the_end_of_term_commands_archive_and_remove_the_term(tmp_path: Path) -> None:
    """docs/personal-data.md's commands at the end of term: every file the commands wrote and
    private/ go into the archive and out of the course folder; the course stays."""
    clone = repository_with_our_ignores(tmp_path / "clone")
    for name in WRITTEN + TRACKED:
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text("x")
    guide = (REPO / "docs" / "personal-data.md").read_text()
    end = guide[guide.index("## End of term") :]
    blocks = re.findall(r"```sh\n(.*?)```", end, re.DOTALL)
    script = "\n".join(blocks).replace("course workers stop\n", "")  # no workers here
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=clone, env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    left = [name for name in WRITTEN if (clone / name).exists()]
    assert left == [], left
    assert all((clone / name).exists() for name in TRACKED)
    with tarfile.open(tmp_path / "transformers-term.tar.gz") as archive:
        packed = {member.name for member in archive.getmembers() if member.isfile()}
    assert set(WRITTEN) <= packed, set(WRITTEN) - packed


def test_no_tracked_file_is_ignored() -> None:
    """The patterns catch nothing the repository tracks (a tracked CSV would be a surprise)."""
    assert git(REPO, "ls-files", "--cached", "--ignored", "--exclude-standard") == ""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course of :func:`course`, made once (a new gradebook takes seconds to create)."""
    return make_course(tmp_path_factory.mktemp("template") / "course")


@pytest.fixture
def root(template: Path, tmp_path: Path) -> Path:
    """A copy of the template course, for one test to change."""
    return Path(shutil.copytree(template, tmp_path / "course"))


def make_course(root: Path) -> Path:
    """A course folder: the configuration, and a gradebook of assignment A with one notebook of
    a test cell and a written answer, three students, s01 and s02 with submissions."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        gb.add_assignment(A)
        gb.add_notebook(NOTEBOOK, A)
        gb.add_grade_cell("test_mask", NOTEBOOK, A, max_score=2, cell_type="code")
        gb.add_grade_cell("why", NOTEBOOK, A, max_score=1, cell_type="markdown")
        gb.add_solution_cell("why", NOTEBOOK, A)
        for n, student in enumerate(("s01", "s02", "s03"), start=1):
            gb.add_student(student, first_name=f"First{n}", last_name=f"Last{n}",
                           email=f"{student}@uni.example", lms_user_id=str(2000 + n))  # fmt: skip
        for student in ("s01", "s02"):
            gb.add_submission(A, student)
            row = gb.find_comment("why", NOTEBOOK, A, student)
            row.manual_comment = f"a comment to {student}"
            gb.find_grade("test_mask", NOTEBOOK, A, student).auto_score = 2
        gb.db.commit()
    for folder in ("submitted", "autograded", "feedback"):
        for student in ("s01", "s02"):
            (root / folder / student / A).mkdir(parents=True)
            (root / folder / student / A / f"{NOTEBOOK}.ipynb").write_text("{}")
    return root


def students(root: Path) -> list[str]:
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        return sorted(s.id for s in gb.students)


def test_an_unknown_student_is_refused_clearly(root: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--root", str(root), "forget", "s99", "--yes"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("course: error: unknown student 's99'") and "s01, s02, s03" in error
    with pytest.raises(CourseError, match="not a student id"):
        forget.plan(root, "../s01")
    assert students(root) == ["s01", "s02", "s03"]


def test_without_yes_it_lists_and_removes_nothing(
    root: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["--root", str(root), "forget", "s02"]) == 0
    out = capsys.readouterr().out
    assert "s02: would remove:" in out and "First2 Last2, s02@uni.example" in out
    assert "1 submission(s)" in out and "submitted/s02/ (1 file(s))" in out
    assert "Nothing was removed" in out
    assert students(root) == ["s01", "s02", "s03"]
    assert (root / "submitted" / "s02").is_dir()


def test_forget_removes_the_gradebook_rows_and_the_folders(
    root: Path, capsys: pytest.CaptureFixture
) -> None:
    size = (root / "gradebook.db").stat().st_size
    assert main(["--root", str(root), "forget", "s02", "s03", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "s02: removed:" in out and "s03: removed:" in out and "Nothing was removed" not in out
    assert students(root) == ["s01"]
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        with pytest.raises(MissingEntry):
            gb.find_submission(A, "s02")
        assert gb.find_comment("why", NOTEBOOK, A, "s01").manual_comment == "a comment to s01"
        assert gb.find_grade("test_mask", NOTEBOOK, A, "s01").score == 2
        assert len(gb.find_assignment(A).submissions) == 1
    # vacuumed: no deleted row left in the file's free pages
    data = (root / "gradebook.db").read_bytes()
    assert b"s02@uni.example" not in data and b"a comment to s02" not in data
    assert b"a comment to s01" in data and len(data) <= size
    for folder in ("submitted", "autograded", "feedback"):
        assert sorted(p.name for p in (root / folder).iterdir()) == ["s01"]


def test_forget_edits_the_reports_and_keeps_their_form(root: Path) -> None:
    """The student's lines go from the grading report, the grade table and an LMS file (its
    BOM, delimiter and line ends kept); their record and a class report naming them go."""
    (root / report.FILE).write_text(
        "assignment,student,notebook,status,points,max_points,detail\n"
        f"{A},s01,{NOTEBOOK},graded,3,3,\n{A},s02,{NOTEBOOK},timed out,1,3,slow\n"
    )
    (root / "grades.csv").write_text(f"student,assignment\ns01,{A}\ns02,{A}\ns02,b\n")
    canvas = "\ufeffStudent;ID;SIS User ID;Masks (5501)\r\n    Points Possible;;;3\r\n"
    canvas += "Last1, First1;2001;SIS-1;3\r\nLast2, First2;2002;SIS-2;2\r\n"
    (root / "grades-canvas.csv").write_bytes(canvas.encode())
    for student in ("s01", "s02"):
        records.write(root, A, student, {"seconds": 1.0, "notebooks": {}})
    (root / f"class-report-{A}.html").write_text("<td>s01 and s02</td>")
    (root / "class-report-b.html").write_text("<td>s01 and s020</td>")
    (root / "private").mkdir()
    (root / "private" / "report.html").write_text("<td>s02</td>")  # `course report --out`
    found = forget.plan(root, "s02")
    assert found.yours == [root / "private" / "report.html"]
    forget.carry_out(found)
    assert [r["student"] for r in report.read(root)] == ["s01"]
    assert (root / "grades.csv").read_text() == f"student,assignment\ns01,{A}\n"
    kept = (root / "grades-canvas.csv").read_bytes().decode()
    assert kept == canvas[: canvas.index("Last2")]
    assert not records.path(root, A, "s02").exists() and records.path(root, A, "s01").exists()
    assert not (root / f"class-report-{A}.html").exists()
    assert (root / "class-report-b.html").exists()  # s020 is another student


def test_forget_removes_their_files_from_the_lms_downloads(root: Path) -> None:
    """Moodle: the participant's folder (it holds their name) in the extracted copy and in the
    zip's copy, their entry of lms.json, their feedback for upload; the instructor's own
    download is listed, not touched."""
    folder = root / "downloaded" / A
    files = {
        lms.moodle_folder("Ann Smith", 11) + f"{NOTEBOOK}.ipynb": lms.notebook_bytes("ann"),
        lms.moodle_folder("Bob Jones", 12) + f"{NOTEBOOK}.ipynb": lms.notebook_bytes("bob"),
        lms.moodle_folder("Bob Jones", 12) + "notes.txt": b"bob's notes",
    }
    (root / "private").mkdir()
    mine = lms.write_zip(root / "private" / "TR-Masks-7.zip", files)
    (folder / "archive").mkdir(parents=True)
    shutil.copy(mine, folder / "archive" / "submissions.zip")
    with zipfile.ZipFile(mine) as archive:
        archive.extractall(folder / "extracted" / "submissions")
    entry = {"lms_id": "12", "name": "Bob Jones", "prefix": "Bob Jones_12_assignsubmission_file"}
    other = {"lms_id": "11", "name": "Ann Smith", "prefix": "Ann Smith_11_assignsubmission_file"}
    (folder / "lms.json").write_text(
        json.dumps({"lms": "moodle", "students": {"s02": entry, "s01": other}})
    )
    lms.write_zip(
        root / f"feedback-{A}-moodle.zip",
        {f"{other['prefix']}/{NOTEBOOK}_feedback.html": b"1",
         f"{entry['prefix']}/{NOTEBOOK}_feedback.html": b"2"},
    )  # fmt: skip
    found = forget.plan(root, "s02")
    assert found.yours == [mine]
    text = forget.format_plan(found, done=False)
    assert "2 file(s) of theirs in downloaded/a_masks/extracted/submissions/" in text
    forget.carry_out(found)
    assert sorted(p.name for p in (folder / "extracted" / "submissions").iterdir()) == [
        "Ann Smith_11_assignsubmission_file"
    ]
    assert lms.read_names(folder / "archive" / "submissions.zip") == [
        f"{lms.moodle_folder('Ann Smith', 11)}{NOTEBOOK}.ipynb"
    ]
    assert list(json.loads((folder / "lms.json").read_text())["students"]) == ["s01"]
    assert lms.read_names(root / f"feedback-{A}-moodle.zip") == [
        f"{other['prefix']}/{NOTEBOOK}_feedback.html"
    ]
    assert len(lms.read_names(mine)) == 3  # the instructor's own file, listed above, untouched


def canvas_submission(root: Path, mistake: str | None) -> bytes:
    """A's notebook with the reference solutions (and a demo student's mistake)."""
    nb = read_notebook(root / "release" / A / f"{NOTEBOOK}.ipynb")
    fill(
        nb,
        reference_code(read_notebook(root / "source" / A / f"{NOTEBOOK}.ipynb"), load_config(root)),
    )
    if mistake:
        fill(nb, read_description(root / "demo" / A / f"{mistake}.yaml")["code"])
    return nbformat.writes(nb).encode()


def left_behind(root: Path, needles: list[bytes]) -> list[str]:
    """The course's own files (not source/, release/, demo/ or the instructor's) whose name or
    content holds one of ``needles``."""
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or relative.split("/")[0] in ("source", "release", "demo", "private"):
            continue
        if relative == "roster.csv":
            continue
        data = relative.encode() + b"\n" + path.read_bytes()
        if any(needle in data for needle in needles):
            found.append(relative)
    return found


# The LMS's user ids of the term's students: seven digits, which no timestamp holds and a
# random hex id of the gradebook (nbgrader's uuid4) holds about once in ten million; "2002"
# was found in one of them about once in twenty runs.
LMS_ID = 7_340_000


@pytest.mark.slow  # grades three submissions through nbgrader
def test_a_term_then_one_student_forgotten(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = make_course_copy(tmp_path / "course")
    cli = ["--root", str(root)]
    assert main([*cli, "release", A, "--clone-only"]) == 0
    roster = root / "roster.csv"  # where docs/lms.md's command reads it
    roster.write_text(
        "id,first_name,last_name,email,lms_user_id\n"
        + "".join(f"s0{n},First{n},Last{n},s0{n}@uni.example,{LMS_ID + n}\n" for n in (1, 2, 3))
    )
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "db", "student", "import", "roster.csv"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = {
        lms.canvas_name(f"last{n}first{n}", LMS_ID + n, n, f"{NOTEBOOK}.ipynb"): canvas_submission(
            root, mistake
        )
        for n, mistake in ((1, None), (2, "mask_transposed"), (3, "copied_pair_1"))
    }
    (root / "private").mkdir()
    download = lms.write_zip(root / "private" / "submissions.zip", files)
    assert main([*cli, "collect", A, str(download), "--lms", "canvas"]) == 0
    assert main([*cli, "autograde", A, "--jobs", "2"]) == 0
    assert main([*cli, "feedback", A, "--zip"]) == 0
    assert main([*cli, "grades"]) == 0
    assert main([*cli, "grades", "--lms", "canvas", "--allow-ungraded"]) == 0
    assert main([*cli, "report", A]) == 0
    capsys.readouterr()

    # git sees the course and nothing the term wrote or read
    repository_with_our_ignores(root)
    seen = git(root, "status", "--porcelain", "--untracked-files=all").split("\n")
    course_files = ("source/", "release/", "demo/", "nbgrader_config.py", "reference_runs.json")
    personal = [line for line in seen if line and not line[3:].startswith(course_files)]
    assert personal == ["?? .gitignore"], personal

    def scores() -> dict[str, float]:
        with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
            warnings.simplefilter("ignore")
            return {s.student.id: s.score for s in gb.find_assignment(A).submissions}

    before = scores()
    assert sorted(before) == ["s01", "s02", "s03"]
    needles = [b"s02", b"last2first2", b"First2", b"Last2", str(LMS_ID + 2).encode()]
    assert len(left_behind(root, needles)) > 8

    assert main([*cli, "forget", "s02"]) == 0
    listed = capsys.readouterr().out
    assert main([*cli, "forget", "s02", "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.replace("removed:", "would remove:") in listed
    assert "private/submissions.zip" in out and "roster.csv" in out  # the instructor's
    assert left_behind(root, needles) == []
    assert scores() == {s: before[s] for s in ("s01", "s03")}
    with (root / "grades-canvas.csv").open(newline="") as handle:
        assert [row[2] for row in csv.reader(handle)][2:] == ["s01", "s03"]
    assert lms.read_names(root / f"feedback-{A}-canvas.zip") == [
        f"last1first1_{LMS_ID + 1}_1_{NOTEBOOK}_feedback.html",
        f"last3first3_{LMS_ID + 3}_3_{NOTEBOOK}_feedback.html",
    ]
    assert main([*cli, "forget", "s02"]) == 2
    assert "unknown student 's02'" in capsys.readouterr().err


def test_forget_removes_what_the_exchange_holds_of_them(root: Path) -> None:
    """nbgrader's exchange (JupyterHub): the student's hand-ins and the feedback released to
    them (named by nbgrader's hash of the submission's secret and the notebook)."""
    course_id = load_config(root).CourseDirectory.course_id
    exchange = Path(load_config(root).Exchange.root) / course_id
    pages = {}
    for student in ("s01", "s02"):
        (exchange / "inbound" / f"{student}+{A}+2026-10-05 17:00:00 UTC+x").mkdir(parents=True)
        folder = root / "feedback" / student / A
        (folder / "submission_secret.txt").write_text(f"secret of {student}")
        (folder / f"{NOTEBOOK}.html").write_text(f"feedback to {student}")
        name = notebook_hash(secret=f"secret of {student}", notebook_id=NOTEBOOK)
        pages[student] = exchange / "feedback" / f"{name}.html"
        pages[student].parent.mkdir(parents=True, exist_ok=True)
        pages[student].write_text(f"feedback to {student}")
    text = forget.format_plan(forget.plan(root, "s02"), done=False)
    assert "1 feedback page(s) released to them in the exchange" in text
    forget.carry_out(forget.plan(root, "s02"))
    assert [p.name.split("+")[0] for p in (exchange / "inbound").iterdir()] == ["s01"]
    assert not pages["s02"].exists() and pages["s01"].exists()


def test_no_gradebook_is_created_and_a_closed_one_is_named(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "gradebook.db").unlink()
    forget.carry_out(forget.plan(root, "s02"))  # the folders only
    assert not (root / "gradebook.db").exists() and not (root / "submitted" / "s02").exists()
    monkeypatch.setenv("COURSE_DB", "postgresql+psycopg2://grader:secret@127.0.0.1:9/none")
    with pytest.raises(CourseError, match="cannot open the gradebook database at 127.0.0.1:9/none"):
        forget.plan(root, "s01")
