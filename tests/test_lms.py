"""A term with an LMS: Canvas and Moodle downloads collected into submitted/ (latest upload,
lateness, renamed notebooks, extra files, hostile archives), grades exported in each LMS's CSV
through nbgrader's export plugins, feedback packed for upload. No grading runs here (the term
test, tests/test_lms_term.py, grades a few students through nbgrader)."""

from __future__ import annotations

import csv
import shutil
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main
from grader.lms import collect, feedback_zip
from grader.lms import worksheet as worksheet_dates
from grader.shared.paths import CourseError, db_url
from tests.conftest import REPO
from tests.lms_archives import (
    NOTEBOOK,
    canvas_anonymous_name,
    canvas_name,
    moodle_flat,
    moodle_folder,
    notebook_bytes,
    read_names,
    with_link,
    write_zip,
    zip_bytes,
)

A = "a_masks"
DUE = datetime(2026, 10, 5, 17, 0, 0)


def build_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course with A released and in the gradebook (due date set), and a roster of three."""
    root = tmp_path_factory.mktemp("template") / "course"
    for folder in ("source", "release"):
        shutil.copytree(REPO / folder / A, root / folder / A)
    shutil.copy(REPO / "nbgrader_config.py", root)
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_assignment(A, duedate=DUE)
        gb.update_or_create_student("jsmith", first_name="Jane", last_name="Smith",
                                    email="jane@uni.example", lms_user_id="1001")  # fmt: skip
        gb.update_or_create_student("jdoe", first_name="John", last_name="Doe",
                                    email="john@uni.example")  # fmt: skip
        gb.update_or_create_student("alee", first_name="Ann", last_name="Lee",
                                    email="ann@uni.example")  # fmt: skip
    return root


def submitted(root: Path, student: str) -> Path:
    return root / "submitted" / student / A


def marker(root: Path, student: str) -> str:
    nb = nbformat.read(str(submitted(root, student) / f"{NOTEBOOK}.ipynb"), as_version=4)
    return nb.cells[0].source


def canvas_download(tmp_path: Path) -> Path:
    files = {
        # on time, found in the roster by its Canvas id
        canvas_name("smithjane", 1001, 501, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane"),
        # late, found by name; uploaded twice under the same name (-1 is the later)
        canvas_name("doejohn", 1002, 502, f"{NOTEBOOK}.ipynb", late=True): notebook_bytes("j1"),
        canvas_name("doejohn", 1002, 502, f"{NOTEBOOK}-1.ipynb", late=True): notebook_bytes("j2"),
        # renamed, plus an extra file
        canvas_name("leeann", 1003, 503, "my work (final).ipynb"): notebook_bytes("ann"),
        canvas_name("leeann", 1003, 503, "notes.pdf"): b"%PDF-1.4",
        # not in the roster; two notebooks, one with the assignment's name
        canvas_name("parkmin", 1004, 504, f"{NOTEBOOK}.ipynb"): notebook_bytes("min"),
        canvas_name("parkmin", 1004, 504, "scratch.ipynb"): notebook_bytes("min scratch"),
        # two notebooks, neither with the assignment's name: the instructor must choose
        canvas_name("kimbo", 1005, 505, "try1.ipynb"): notebook_bytes("bo 1"),
        canvas_name("kimbo", 1005, 505, "try2.ipynb"): notebook_bytes("bo 2"),
        # a broken notebook
        canvas_name("wuli", 1006, 506, f"{NOTEBOOK}.ipynb"): b"{not json",
        "README.txt": b"not a submission",
        # a zip uploaded as the submission: nbgrader's extractor opens it, nothing in it is named
        canvas_name("ngoan", 1007, 507, "work.zip"): zip_bytes({"a.ipynb": notebook_bytes("z")}),
    }
    return write_zip(tmp_path / "submissions.zip", files)


def test_canvas_download_is_collected(lms_course: Path, tmp_path: Path) -> None:
    done = collect.collect(lms_course, A, canvas_download(tmp_path), "canvas")
    taken = {t.student: t for t in done.taken}
    assert sorted(taken) == ["1004", "alee", "jdoe", "jsmith"]
    assert marker(lms_course, "jsmith") == "# jane"
    assert marker(lms_course, "jdoe") == "# j2"  # the later upload
    assert marker(lms_course, "alee") == "# ann"  # renamed back
    assert "renamed from my work (final).ipynb" in taken["alee"].notes
    assert marker(lms_course, "1004") == "# min"
    assert "not in the roster" in " ".join(taken["1004"].notes)
    # lateness: Canvas's mark, one second after the due date; no timestamp when on time
    stamp = (submitted(lms_course, "jdoe") / "timestamp.txt").read_text()
    assert datetime.fromisoformat(stamp) == DUE + timedelta(seconds=1)
    assert not (submitted(lms_course, "jsmith") / "timestamp.txt").exists()
    assert taken["jdoe"].late and not taken["jsmith"].late
    reasons = {s.path: s.reason for s in done.skipped}
    assert "an older upload" in reasons[canvas_name("doejohn", 1002, 502, f"{NOTEBOOK}.ipynb",
                                                    late=True)]  # fmt: skip
    assert "not a notebook" in reasons[canvas_name("leeann", 1003, 503, "notes.pdf")]
    assert "a second notebook" in reasons[canvas_name("parkmin", 1004, 504, "scratch.ipynb")]
    assert "none is named" in reasons[canvas_name("kimbo", 1005, 505, "try1.ipynb")]
    assert "not a readable notebook" in reasons[canvas_name("wuli", 1006, 506,
                                                            f"{NOTEBOOK}.ipynb")]  # fmt: skip
    assert "not named as Canvas" in reasons["README.txt"]
    assert "not named as Canvas" in reasons[canvas_name("ngoan", 1007, 507, "work/a.ipynb")]
    assert not (lms_course / "submitted" / "1005").exists()
    # the roster learns the Canvas ids; the new student enters the gradebook with hers
    with Gradebook(db_url(lms_course)) as gb:
        assert gb.find_student("jdoe").lms_user_id == "1002"
        assert gb.find_student("1004").lms_user_id == "1004"
    record = collect.read_record(lms_course, A)
    assert record["students"]["jdoe"]["prefix"] == "doejohn_LATE_1002_502_"


def test_canvas_download_in_a_folder_and_collected_again(lms_course: Path, tmp_path: Path) -> None:
    """A zip with a top folder is read as well; a second download replaces the first."""
    first = {"subs/" + canvas_name("smithjane", 1001, 7, f"{NOTEBOOK}.ipynb"): notebook_bytes("v1")}
    collect.collect(lms_course, A, write_zip(tmp_path / "one.zip", first), "canvas")
    assert marker(lms_course, "jsmith") == "# v1"
    second = {canvas_name("smithjane", 1001, 8, f"{NOTEBOOK}-1.ipynb"): notebook_bytes("v2")}
    collect.collect(lms_course, A, write_zip(tmp_path / "two.zip", second), "canvas")
    assert marker(lms_course, "jsmith") == "# v2"
    assert sorted(p.name for p in submitted(lms_course, "jsmith").iterdir()) == [
        f"{NOTEBOOK}.ipynb"
    ]


def test_canvas_anonymous_download_and_names_with_underscores(
    lms_course: Path, tmp_path: Path
) -> None:
    """Anonymous grading: ``[LATE_]anon_ID_...``, no name, no user id (collected under
    ``anon_ID``, not put in the roster as a Canvas user); an older Canvas's anonymous download
    (the user id, no name). A sortable name keeps its underscores (``o_brien_mary``) and is
    still read to the user id; an older Canvas's lower-case ``late`` is read too."""
    files = {
        canvas_anonymous_name("x7k2P", 601, f"{NOTEBOOK}.ipynb"): notebook_bytes("anon 1"),
        canvas_anonymous_name("Q9w3e", 602, f"{NOTEBOOK}.ipynb", late=True): notebook_bytes("a2"),
        canvas_name("smith_jane", 1001, 603, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane"),
        f"o_brien_mary_late_1010_604_{NOTEBOOK}-2.ipynb": notebook_bytes("mary"),
    }
    done = collect.collect(lms_course, A, write_zip(tmp_path / "anon.zip", files), "canvas")
    taken = {t.student: t for t in done.taken}
    assert sorted(taken) == ["1010", "anon_Q9w3e", "anon_x7k2P", "jsmith"], done.skipped
    assert marker(lms_course, "anon_x7k2P") == "# anon 1"
    assert taken["anon_Q9w3e"].late and not taken["anon_x7k2P"].late
    assert marker(lms_course, "jsmith") == "# jane"  # by her Canvas id, underscore and all
    assert taken["1010"].name == "o_brien_mary" and taken["1010"].late
    assert marker(lms_course, "1010") == "# mary"
    with Gradebook(db_url(lms_course)) as gb:
        assert gb.find_student("anon_x7k2P").lms_user_id is None  # no Canvas user id
        assert gb.find_student("1010").lms_user_id == "1010"
    record = collect.read_record(lms_course, A)["students"]
    assert record["anon_Q9w3e"]["prefix"] == "LATE_anon_Q9w3e_602_"


def test_canvas_older_anonymous_download_names_no_one(lms_course: Path, tmp_path: Path) -> None:
    """Older Canvas, graded anonymously: ``[LATE_]USERID_...``, the user id without a name."""
    files = {
        f"LATE_1003_605_{NOTEBOOK}.ipynb": notebook_bytes("ann"),
        "1010_606_2_masks.ipynb": notebook_bytes("mary"),  # her file: 2_masks.ipynb
    }
    done = collect.collect(lms_course, A, write_zip(tmp_path / "old.zip", files), "canvas")
    taken = sorted((t.student, t.late, t.notes[0]) for t in done.taken)
    assert taken == [("1003", True, "not in the roster: collected under the Canvas id"),
                     ("1010", False, "renamed from 2_masks.ipynb")]  # fmt: skip


def test_a_download_of_nobody_says_so(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    archive = write_zip(tmp_path / "other.zip", {"notes/lecture1.ipynb": notebook_bytes("x")})
    argv = ["--root", str(lms_course), "collect", A, str(archive), "--lms", "moodle"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "Moodle download of a_masks: 0 collected" in out
    assert "notes/lecture1.ipynb: not named as Moodle names submissions" in out
    assert "nothing collected: is this the assignment's Moodle download?" in out


def moodle_download(tmp_path: Path, form: str = "4.1") -> Path:
    """Moodle's download in one of its forms: folders since 4.1, folders before 4.1 (a
    trailing underscore), or flat (tests/lms_archives.py says what each follows)."""

    def name(full: str, number: int, file: str) -> str:
        if form == "flat":
            return moodle_flat(full, number, file)
        return moodle_folder(full, number, before_41=form == "4.0") + file

    files = {
        name("Jane Smith", 71, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane"),
        name("John Doe", 72, "masks.ipynb"): notebook_bytes("john"),
        name("John Doe", 72, "data.csv"): b"a,b\n",
        name("Ann Lee", 73, f"{NOTEBOOK}.ipynb"): notebook_bytes("ann"),
        name("Ann Lee", 73, "copy.ipynb"): notebook_bytes("ann copy"),
        name("Zoe New", 74, "x.ipynb"): notebook_bytes("zoe"),
        "Zoe New_74_assignsubmission_onlinetext/onlinetext.html": b"<p>hi</p>",
    }
    return write_zip(tmp_path / "moodle.zip", files)


# The grading worksheet's columns (mod/assign/gradingtable.php, downloading; moodle/moodle
# 1494620bfb) in English and German (projectestac/moodle-langpacks de/assign.php, moodle.php);
# the times as userdate() writes them with the language's strftimedaydatetime (langconfig.php).
SHEET_HEADERS = {
    "en": ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum grade",
           "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
           "Feedback comments"],
    "de": ["ID", "Vollständiger Name", "E-Mail-Adresse", "Status", "Bewertung", "Bestwertung",
           "Bewertung kann geändert werden", "Zuletzt geändert (Abgabe)",
           "Zuletzt geändert (Bewertung)", "Feedback als Kommentar"],
    # a language this reader knows no header of: the columns are found by their place
    "xx": ["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10"],
}  # fmt: skip
SHEET_LABEL = {"en": "Participant ", "de": "Teilnehmer/in ", "xx": "Uczestnik "}
SHEET_TIME = {  # Monday 5 October 2026, (hour, minute) as each language writes it
    "en": lambda h, m: f"Monday, 5 October 2026, {(h - 1) % 12 + 1}:{m:02} {'AP'[h >= 12]}M",
    "de": lambda h, m: f"Montag, 5. Oktober 2026, {h:02}:{m:02}",
    "xx": lambda h, m: f"poniedziałek, 5 października 2026, {h:02}:{m:02}",
}  # fmt: skip


def worksheet(tmp_path: Path, language: str = "en", shift: int = 0, delimiter: str = ",") -> Path:
    """Moodle's grading worksheet; the times written ``shift`` hours ahead of UTC (the
    teacher's zone), the grades' times a day later."""
    path = tmp_path / f"worksheet-{language}.csv"
    label, when = SHEET_LABEL[language], SHEET_TIME[language]
    people = [(71, "Jane Smith", "jane", (9, 15)), (72, "John Doe", "john", (18, 30)),
              (73, "Ann Lee", "ann", None), (74, "Zoe New", "zoe", (16, 0))]  # fmt: skip
    rows = [SHEET_HEADERS[language]]
    for number, name, mail, utc in people:
        sent = when(utc[0] + shift, utc[1]) if utc else "-"
        graded = when(10, 0).replace(" 5", " 6", 1) if utc else "-"
        rows.append([f"{label}{number}", name, f"{mail}@uni.example", "Submitted", "", "10,00",
                     "Yes", sent, graded, "Good start.\nSee the mask, line 3."])  # fmt: skip
    with path.open("w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle, delimiter=delimiter).writerows(rows)
    return path


@pytest.mark.parametrize(
    "written",
    [
        "Monday, 5 October 2026, 6:30 PM",  # en: %A, %d %B %Y, %I:%M %p
        "Monday, October 5, 2026, 6:30 PM",  # en_us: %A, %B %d, %Y, %I:%M %p
        "Montag, 5. Oktober 2026, 18:30",  # de: %A, %d. %B %Y, %H:%M
        "lundi 5 octobre 2026, 18:30",  # fr: %A %d %B %Y, %H:%M
        "lunes, 5 de octubre de 2026, 06:30 p. m.",  # es: %A, %d de %B de %Y, %I:%M %p
        "понедельник, 5 октября 2026, 18:30",  # ru, the month in the genitive
        "Pazartesi, 5 Ekim 2026, 18:30",  # tr
        "2026年 10月 5日(月曜日) 18:30",  # year, month, day in numbers
        "05.10.2026 18:30",  # day, month, year in numbers
    ],
)
def test_moodle_dates_in_its_languages(written: str) -> None:
    assert worksheet_dates.parse_moodle_date(written) == datetime(2026, 10, 5, 18, 30)


@pytest.mark.parametrize("written", ["-", "Submitted", "10,00", "5 Smarch 2026, 18:30"])
def test_what_is_not_a_moodle_date(written: str) -> None:
    assert worksheet_dates.parse_moodle_date(written) is None


@pytest.mark.parametrize("form", ["4.1", "4.0", "flat"])
def test_moodle_download_is_collected(lms_course: Path, tmp_path: Path, form: str) -> None:
    archive = moodle_download(tmp_path, form)
    done = collect.collect(lms_course, A, archive, "moodle", worksheet(tmp_path), "UTC")
    taken = {t.student: t for t in done.taken}
    assert sorted(taken) == ["74", "alee", "jdoe", "jsmith"]
    assert marker(lms_course, "jdoe") == "# john"  # renamed back from masks.ipynb
    assert marker(lms_course, "alee") == "# ann"
    # John submitted 90 minutes after the due date: late, with the worksheet's time
    stamp = (submitted(lms_course, "jdoe") / "timestamp.txt").read_text()
    assert datetime.fromisoformat(stamp) == datetime(2026, 10, 5, 18, 30)
    assert taken["jdoe"].late and not taken["jsmith"].late and not taken["74"].late
    assert not (submitted(lms_course, "alee") / "timestamp.txt").exists()
    reasons = " | ".join(s.reason for s in done.skipped)
    assert "not a notebook" in reasons and "a second notebook" in reasons
    assert "not named as Moodle" in reasons  # the online text
    with Gradebook(db_url(lms_course)) as gb:
        zoe = gb.find_student("74")
        assert (zoe.first_name, zoe.last_name, zoe.email) == ("Zoe", "New", "zoe@uni.example")
    prefix = collect.read_record(lms_course, A)["students"]["jdoe"]["prefix"]
    assert prefix == "John Doe_72_assignsubmission_file" + ("" if form == "4.1" else "_")


@pytest.mark.parametrize(
    ("language", "zone", "shift", "delimiter"),
    [("de", "Europe/Berlin", 2, ";"), ("xx", "America/Sao_Paulo", -3, ","),
     ("en", "America/New_York", -4, ",")],
)  # fmt: skip
def test_worksheet_in_the_teachers_zone_and_language(
    lms_course: Path, tmp_path: Path, language: str, zone: str, shift: int, delimiter: str
) -> None:
    """The same submissions, written in the teacher's time zone (in October: Berlin UTC+2,
    New York UTC-4, Sao Paulo UTC-3) and language, or with headers this reader does not know
    (Polish dates: the columns found by their place)."""
    sheet = worksheet(tmp_path, language, shift, delimiter)
    done = collect.collect(lms_course, A, moodle_download(tmp_path), "moodle", sheet, zone)
    taken = {t.student: t for t in done.taken}
    stamp = (submitted(lms_course, "jdoe") / "timestamp.txt").read_text()
    assert datetime.fromisoformat(stamp) == datetime(2026, 10, 5, 18, 30)  # in UTC
    assert taken["jdoe"].late and not taken["jsmith"].late and not taken["74"].late
    zoe = (submitted(lms_course, "74") / "timestamp.txt").read_text()
    assert datetime.fromisoformat(zoe) == datetime(2026, 10, 5, 16, 0)


def test_collect_command_takes_the_teachers_zone(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--root", str(lms_course), "collect", A, str(moodle_download(tmp_path)), "--lms",
            "moodle", "--worksheet", str(worksheet(tmp_path, "de", 2, ";"))]  # fmt: skip
    assert main([*argv, "--timezone", "Europe/Berlin"]) == 0
    out = capsys.readouterr().out
    assert "jdoe: John Doe_72_assignsubmission_file/masks.ipynb -> " in out
    assert "late (submitted 2026-10-05 18:30:00 UTC)" in out
    assert main([*argv, "--timezone", "Berlin"]) == 2
    assert "unknown time zone 'Berlin'" in capsys.readouterr().err


def test_worksheet_read_in_utc_would_be_wrong(lms_course: Path, tmp_path: Path) -> None:
    """Berlin's 18:00 (16:00 UTC, on time) read as UTC is an hour late: the zone matters."""
    sheet = worksheet(tmp_path, "de", 2)
    done = collect.collect(lms_course, A, moodle_download(tmp_path), "moodle", sheet, "UTC")
    assert {t.student for t in done.taken if t.late} == {"jdoe", "74"}


def test_worksheet_problems_are_explained(lms_course: Path, tmp_path: Path) -> None:
    archive = moodle_download(tmp_path)
    with pytest.raises(CourseError, match="unknown time zone 'Mars/Olympus'"):
        collect.collect(lms_course, A, archive, "moodle", worksheet(tmp_path), "Mars/Olympus")
    grades = tmp_path / "grades.csv"
    grades.write_text("Name,Score\nJane,7\n")
    with pytest.raises(CourseError, match="not Moodle's grading worksheet"):
        collect.collect(lms_course, A, archive, "moodle", grades, "UTC")
    nothing = tmp_path / "nothing.csv"
    nothing.write_text("Identifier,Full name,Status\nParticipant 71,Jane Smith,Submitted\n")
    with pytest.raises(CourseError, match="no column of submission times"):
        collect.collect(lms_course, A, archive, "moodle", nothing, "UTC")


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({"../evil.ipynb": b"x"}, "a path that leaves the folder"),
        ({"a/../../evil.ipynb": b"x"}, "a path that leaves the folder"),
        ({"/etc/evil.ipynb": b"x"}, "an absolute path"),
    ],
)
def test_hostile_archive_is_refused(
    lms_course: Path, tmp_path: Path, entries: dict, expected: str
) -> None:
    archive = write_zip(tmp_path / "bad.zip", entries)
    with pytest.raises(CourseError, match=expected):
        collect.collect(lms_course, A, archive, "canvas")
    assert not (lms_course / "submitted").exists()


def test_archive_with_a_link_or_not_a_zip_is_refused(lms_course: Path, tmp_path: Path) -> None:
    link = with_link(tmp_path / "link.zip", canvas_name("x", 1, 2, "a.ipynb"), "/etc/passwd")
    with pytest.raises(CourseError, match="a symbolic link"):
        collect.collect(lms_course, A, link, "canvas")
    text = tmp_path / "grades.zip"
    text.write_text("this is no zip")
    with pytest.raises(CourseError, match="is not a zip archive"):
        collect.collect(lms_course, A, text, "canvas")
    assert not (lms_course / "submitted").exists()


def test_collect_command_prints_the_report_and_one_line_errors(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    archive = canvas_download(tmp_path)
    assert main(["--root", str(lms_course), "collect", A, str(archive), "--lms", "canvas"]) == 0
    out = capsys.readouterr().out
    assert "Canvas download of a_masks: 4 collected" in out
    assert "jdoe: doejohn_LATE_1002_502_masks_and_positions-1.ipynb" in out
    assert "skipped 9 file(s):" in out
    moodle = ["--root", str(lms_course), "collect", A, str(archive), "--lms", "moodle"]
    assert main(moodle) == 1  # a Canvas download read as Moodle's: nothing collected
    assert "(a Canvas download needs --lms canvas)" in capsys.readouterr().out
    missing = tmp_path / "nowhere.zip"
    assert main(["--root", str(lms_course), "collect", A, str(missing), "--lms", "moodle"]) == 2
    assert capsys.readouterr().err.startswith("course: error: no file at")
    sheet = ["--worksheet", str(worksheet(tmp_path))]
    assert (
        main(["--root", str(lms_course), "collect", A, str(archive), "--lms", "canvas", *sheet])
        == 2
    )
    assert "--worksheet is Moodle's" in capsys.readouterr().err
    unknown = ["--root", str(lms_course), "collect", "zz", str(archive), "--lms", "canvas"]
    assert main(unknown) == 2
    assert "unknown assignment 'zz'" in capsys.readouterr().err


@pytest.mark.parametrize("lms", ["canvas", "moodle"])
def test_feedback_zip_names_each_file_for_the_lms(
    lms_course: Path, tmp_path: Path, lms: str
) -> None:
    archive = canvas_download(tmp_path) if lms == "canvas" else moodle_download(tmp_path)
    sheet = worksheet(tmp_path) if lms == "moodle" else None
    collect.collect(lms_course, A, archive, lms, sheet)
    for student in ("jsmith", "jdoe", "stranger"):
        folder = lms_course / "feedback" / student / A
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.html").write_text(f"<p>{student}</p>")
    [(path, packed)], left = feedback_zip.pack(lms_course, A)
    assert path.name == f"feedback-a_masks-{lms}.zip"
    assert packed == ["jdoe", "jsmith"]
    assert left == ["stranger (in no LMS download of a_masks)"]
    expected = {
        "canvas": [f"doejohn_LATE_1002_502_{NOTEBOOK}_feedback.html",
                   f"smithjane_1001_501_{NOTEBOOK}_feedback.html"],
        "moodle": [f"Jane Smith_71_assignsubmission_file/{NOTEBOOK}_feedback.html",
                   f"John Doe_72_assignsubmission_file/{NOTEBOOK}_feedback.html"],
    }  # fmt: skip
    assert read_names(path) == expected[lms]


def test_feedback_zip_needs_a_collection(lms_course: Path) -> None:
    with pytest.raises(CourseError, match="run `course collect` first"):
        feedback_zip.pack(lms_course, A)
