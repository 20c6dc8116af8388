"""One class per LMS (grader/lms/systems/), and the two beyond Canvas and Moodle: D2L
Brightspace and Blackboard Learn, each collected, graded into its own gradebook export and
given its feedback zip. The downloads are built by tests/lms_archives.py (each helper names
what it follows); the gradebook exports below say theirs."""

from __future__ import annotations

import codecs
import csv
import io
import warnings
from datetime import datetime
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.command.cli import main, parser
from grader.lms import LMS_NAMES, collect, export, feedback_zip, system
from grader.lms.base import LmsSystem
from grader.shared.paths import CourseError, db_url
from tests.lms_archives import (
    NOTEBOOK,
    blackboard_name,
    blackboard_record,
    brightspace_flat,
    brightspace_folder,
    brightspace_prefix,
    notebook_bytes,
    read_names,
    write_zip,
)
from tests.test_lms import A, marker, submitted
from tests.test_lms_gradebook import B, graded_gradebook

ZONE = "America/New_York"  # the instructor's zone: in October, UTC-4


def at(day: int, hour: int, minute: int) -> datetime:
    """A wall-clock time in October 2026 (in the instructor's zone, EDT)."""
    return datetime(2026, 10, day, hour, minute)


def test_every_lms_is_one_class_found_by_name() -> None:
    assert {"blackboard", "brightspace", "canvas", "moodle"} <= set(LMS_NAMES)
    assert list(LMS_NAMES) == sorted(LMS_NAMES)  # the module names, in order
    for name in LMS_NAMES:
        lms = system(name)
        assert isinstance(lms, LmsSystem) and lms.name == name
    with pytest.raises(CourseError, match="no LMS 'sakai': choose one of blackboard, "):
        system("sakai")
    collect_command = parser().parse_args(["collect", A, "x.zip", "--lms", "brightspace"])
    assert collect_command.lms == "brightspace"  # the CLI's choices are the registry's
    from grader.lms.export import BlackboardExport, BrightspaceExport  # nbgrader's --exporter

    assert BrightspaceExport is system("brightspace").exporter
    assert BlackboardExport.default_file == "grades-blackboard.csv"


# --- D2L Brightspace ---------------------------------------------------------------------


def brightspace_download(tmp_path: Path, flat: bool = False) -> Path:
    """A folder's download: Jane on time, John twice (the later one late, 14:15 EDT is 18:15
    UTC), Ann's renamed notebook (the evening before), Zoe not in the roster, and the
    ``index.html`` that lists them."""
    name = brightspace_flat if flat else brightspace_folder
    files = {
        "index.html": b"<html><body><table></table></body></html>",
        name("5501-901", "Jane Smith", at(5, 12, 30), f"{NOTEBOOK}.ipynb"): notebook_bytes("jane"),
        name("5501-902", "John Doe", at(5, 11, 0), f"{NOTEBOOK}.ipynb"): notebook_bytes("j1"),
        name("5501-903", "John Doe", at(5, 14, 15), f"{NOTEBOOK}.ipynb"): notebook_bytes("j2"),
        name("5501-903", "John Doe", at(5, 14, 15), "notes.txt"): b"see cell 3",
        name("5501-904", "Ann Lee", at(4, 21, 26), "my work.ipynb"): notebook_bytes("ann"),
        name("5501-905", "Zoe New", at(5, 13, 5), f"{NOTEBOOK}.ipynb"): notebook_bytes("zoe"),
    }
    return write_zip(tmp_path / "Masks Download Oct 6, 2026 900 AM.zip", files)


@pytest.mark.parametrize("flat", [False, True])
def test_brightspace_download_is_collected(lms_course: Path, tmp_path: Path, flat: bool) -> None:
    done = collect.collect(lms_course, A, brightspace_download(tmp_path, flat), "brightspace",
                           None, ZONE)  # fmt: skip
    taken = {t.student: t for t in done.taken}
    assert sorted(taken) == ["alee", "jdoe", "jsmith", "zoenew"], done.skipped
    assert marker(lms_course, "jdoe") == "# j2"  # the later submission replaces the first
    assert (
        marker(lms_course, "alee") == "# ann"
        and "renamed from my work.ipynb" in taken["alee"].notes
    )
    stamp = (submitted(lms_course, "jdoe") / "timestamp.txt").read_text()
    assert datetime.fromisoformat(stamp) == datetime(2026, 10, 5, 18, 15)  # in UTC
    assert datetime.fromisoformat((submitted(lms_course, "alee") / "timestamp.txt").read_text()) \
        == datetime(2026, 10, 5, 1, 26)  # fmt: skip
    assert [s for s, t in sorted(taken.items()) if t.late] == ["jdoe", "zoenew"]
    reasons = {s.path: s.reason for s in done.skipped}
    assert "list of the submissions" in reasons["index.html"]
    older = [p for p, r in reasons.items() if "older submission" in r]
    assert len(older) == 1 and "11" in older[0]
    with Gradebook(db_url(lms_course)) as gb:
        zoe = gb.find_student("zoenew")
        assert (zoe.first_name, zoe.last_name, zoe.lms_user_id) == ("Zoe", "New", None)
    prefix = collect.read_record(lms_course, A)["students"]["jdoe"]["prefix"]
    assert prefix == brightspace_prefix("5501-903", "John Doe", at(5, 14, 15)) + (
        " - " if flat else ""
    )


def test_brightspace_times_are_read_in_the_zone_given(lms_course: Path, tmp_path: Path) -> None:
    """John's 14:15 read as UTC is before the 17:00 UTC due date: the zone decides."""
    done = collect.collect(
        lms_course, A, brightspace_download(tmp_path), "brightspace", None, "UTC"
    )
    assert {t.student for t in done.taken if t.late} == set()
    with pytest.raises(CourseError, match="--worksheet is Moodle's; Brightspace writes"):
        collect.collect(lms_course, A, brightspace_download(tmp_path), "brightspace",
                        tmp_path / "sheet.csv", ZONE)  # fmt: skip


def test_a_brightspace_download_read_as_canvas_says_which_lms(
    lms_course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--root", str(lms_course), "collect", A, str(brightspace_download(tmp_path))]
    assert main([*argv, "--lms", "canvas"]) == 1
    out = capsys.readouterr().out
    assert "(a Brightspace download needs --lms brightspace)" in out
    assert main([*argv, "--lms", "brightspace", "--timezone", ZONE]) == 0
    assert "Brightspace download of a_masks: 4 collected" in capsys.readouterr().out


@pytest.mark.parametrize("flat", [False, True])
def test_brightspace_feedback_zip_is_the_download_s_form(
    lms_course: Path, tmp_path: Path, flat: bool
) -> None:
    collect.collect(lms_course, A, brightspace_download(tmp_path, flat), "brightspace", None, ZONE)
    for student in ("jsmith", "jdoe"):
        folder = lms_course / "feedback" / student / A
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.html").write_text(f"<p>{student}</p>")
    [(path, packed)], _ = feedback_zip.pack(lms_course, A)
    jane = brightspace_prefix("5501-901", "Jane Smith", at(5, 12, 30))
    john = brightspace_prefix("5501-903", "John Doe", at(5, 14, 15))
    tail = f" - {NOTEBOOK}_feedback.html" if flat else f"/{NOTEBOOK}_feedback.html"
    assert packed == ["jdoe", "jsmith"]
    assert read_names(path) == sorted(["index.html", jane + tail, john + tail])


# The grades export of Brightspace (Grades, Export; D2L's "Importing grades"): ids prefixed
# with '#', each item ``NAME Points Grade <Numeric MaxPoints:N ...>``, the final grade
# columns, ``End-of-Line Indicator`` with '#' cells (as the Brightspace exports read by
# grading scripts: ``Lab x Points Grade <Numeric MaxPoints:10 Weight:16.66666667 ...>``).
BRIGHTSPACE_EXPORT = [
    ["OrgDefinedId", "Username", "Last Name", "First Name", "Email",
     "a_masks Points Grade <Numeric MaxPoints:10 Weight:10 Category:Labs CategoryWeight:50>",
     "Attention Points Grade <Numeric MaxPoints:10>", "Calculated Final Grade Numerator",
     "Calculated Final Grade Denominator", "End-of-Line Indicator"],
    ["#S-0007", "#jsmith", "Smith", "Jane", "jane.smith@mail.example", "", "", "0", "20", "#"],
    ["#jdoe", "#john.doe", "Doe", "John", "", "", "", "0", "20", "#"],
    ["#S-0009", "#a.lee", "Lee", "Ann", "ann@uni.example", "6", "", "6", "20", "#"],
    ["#S-0099", "#d2l_test", "Student", "Test", "", "", "", "0", "20", "#"],
]  # fmt: skip


def write_rows(path: Path, rows: list[list[str]], delimiter: str = ",", **how: object) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator=how.get("newline", "\n"),
               quoting=how.get("quoting", csv.QUOTE_MINIMAL)).writerows(rows)  # fmt: skip
    path.write_bytes(how.get("bom", b"") + buffer.getvalue().encode(how.get("encoding", "utf-8")))
    return path


def read_rows(path: Path, delimiter: str = ",", encoding: str = "utf-8-sig") -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode(encoding), newline=""),
                           delimiter=delimiter))  # fmt: skip


def test_brightspace_grades_export_filled(lms_course: Path, tmp_path: Path) -> None:
    """Jane by Username (her course id), John by OrgDefinedId, Ann by email; the test student
    is no one; Ann's 6 entered in Brightspace stays (she submitted nothing: skip)."""
    graded_gradebook(lms_course)
    source = write_rows(tmp_path / "export.csv", BRIGHTSPACE_EXPORT, bom=codecs.BOM_UTF8)
    chosen = [A, f"{B}=Attention"]
    out, left = export.export(
        lms_course, "brightspace", tmp_path / "in.csv", "skip", chosen, source
    )
    assert left == [] and out.read_bytes().startswith(codecs.BOM_UTF8)
    expected = [list(row) for row in BRIGHTSPACE_EXPORT]
    expected[1][5] = "7"
    expected[2][5], expected[2][6] = "5", "5"  # 9 less the late penalty of 4; and B
    assert read_rows(out) == expected
    without = write_rows(tmp_path / "no-end.csv", [r[:-1] for r in BRIGHTSPACE_EXPORT])
    out, _ = export.export(lms_course, "brightspace", tmp_path / "in2.csv", "zero", [A], without)
    rows = read_rows(out)
    assert [r[-1] for r in rows] == ["End-of-Line Indicator"] + ["#"] * 4  # the import needs it
    assert [r[5] for r in rows[1:]] == ["7", "5", "0", "0"]
    moodle_like = write_rows(tmp_path / "m.csv", [["First name", "Email address", "a_masks"]])
    with pytest.raises(CourseError, match="not a Brightspace grades export"):
        export.export(lms_course, "brightspace", tmp_path / "x.csv", "skip", [A], moodle_like)


def test_brightspace_rows_found_by_name_where_no_id_matches(
    lms_course: Path, tmp_path: Path
) -> None:
    """The download carries D2L's key and name, the export OrgDefinedId and Username: with no
    roster of those ids, each row is found by its First Name and Last Name, as the download
    wrote them (Zoe, whom only the download named, too); a name two rows share matches no one."""
    collect.collect(lms_course, A, brightspace_download(tmp_path), "brightspace", None, ZONE)
    with warnings.catch_warnings(), Gradebook(db_url(lms_course)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_notebook("nb", A)
        gb.update_or_create_grade_cell("q", "nb", A, max_score=10, cell_type="code")
        for points, student in enumerate(["jsmith", "jdoe", "alee", "zoenew"], 4):
            gb.update_or_create_submission(A, student)
            grade = gb.find_grade("q", "nb", A, student)
            grade.auto_score, grade.needs_manual_grade = points, False
        gb.db.commit()
    header = [
        "OrgDefinedId",
        "Username",
        "Last Name",
        "First Name",
        "Email",
        "a_masks Points Grade <Numeric MaxPoints:10>",
        "End-of-Line Indicator",
    ]
    rows = [header] + [[f"#{900 + n}", f"#u{n}", last, first, "", "", "#"] for n, (first, last)
                       in enumerate([("Jane", "Smith"), ("John", "Doe"), ("Ann", "Lee"),
                                     ("Zoe", "New"), ("Tom", "Absent")])]  # fmt: skip
    out, left = export.export(lms_course, "brightspace", tmp_path / "in.csv", "skip", [A],
                              write_rows(tmp_path / "hidden.csv", rows))  # fmt: skip
    assert left == [] and [r[5] for r in read_rows(out)[1:]] == ["4", "5", "6", "7", ""]
    twice = rows + [["#999", "#u9", "New", "Zoe", "", "", "#"]]
    out, left = export.export(lms_course, "brightspace", tmp_path / "in2.csv", "skip", [A],
                              write_rows(tmp_path / "twice.csv", twice))  # fmt: skip
    assert [r[5] for r in read_rows(out)[1:]] == ["4", "5", "6", "", "", ""]
    assert [line.split(":")[0] for line in left] == ["zoenew"]


def test_brightspace_import_file(lms_course: Path, tmp_path: Path) -> None:
    graded_gradebook(lms_course)
    out, _ = export.export(lms_course, "brightspace", tmp_path / "b.csv", "zero", [A])
    assert read_rows(out) == [
        ["OrgDefinedId", "Username", "a_masks Points Grade <Numeric MaxPoints:10>",
         "End-of-Line Indicator"],
        ["#alee", "#alee", "0", "#"], ["#jdoe", "#jdoe", "5", "#"],
        ["#jsmith", "#1001", "7", "#"],
    ]  # fmt: skip


# --- Blackboard Learn --------------------------------------------------------------------


def blackboard_download(tmp_path: Path) -> Path:
    """An "Assignment File Download" of all attempts of "Masks_lab" (an underscore in its
    name): Jane (username jsmith); John's two attempts (username john, his email's name), the
    later one late and renamed in the zip; Ann (username ann_lee, read from her record); Zoe
    with no record and not in the roster."""
    task = "Masks_lab"
    jane, john1, john2 = at(5, 12, 30), at(5, 11, 0), at(5, 14, 15)
    ann, zoe = at(4, 21, 26), at(5, 9, 0)
    renamed = blackboard_name(task, "john", john2, "masks_and_positions_1_.ipynb")
    files = {
        blackboard_name(task, "jsmith", jane, f"{NOTEBOOK}.ipynb"): notebook_bytes("jane"),
        blackboard_name(task, "jsmith", jane): blackboard_record(
            task, "Jane Smith", "jsmith", jane,
            {blackboard_name(task, "jsmith", jane, f"{NOTEBOOK}.ipynb"): f"{NOTEBOOK}.ipynb"}),
        blackboard_name(task, "john", john1, f"{NOTEBOOK}.ipynb"): notebook_bytes("j1"),
        renamed: notebook_bytes("j2"),
        blackboard_name(task, "john", john2): blackboard_record(
            task, "John Doe", "john", john2, {renamed: f"{NOTEBOOK}.ipynb"}),
        blackboard_name(task, "ann_lee", ann, "masks.ipynb"): notebook_bytes("ann"),
        blackboard_name(task, "ann_lee", ann): blackboard_record(
            task, "Ann Lee", "ann_lee", ann, {}),
        blackboard_name(task, "zoe", zoe, f"{NOTEBOOK}.ipynb"): notebook_bytes("zoe"),
    }  # fmt: skip
    return write_zip(tmp_path / "gradebook_CS101_Masks_lab_2026-10-06-09-00-00.zip", files)


def test_blackboard_download_is_collected(lms_course: Path, tmp_path: Path) -> None:
    done = collect.collect(lms_course, A, blackboard_download(tmp_path), "blackboard", None, ZONE)
    taken = {t.student: t for t in done.taken}
    assert sorted(taken) == ["alee", "jdoe", "jsmith", "zoe"], done.skipped
    assert marker(lms_course, "jdoe") == "# j2" and taken["jdoe"].notes == [
        "late (submitted 2026-10-05 18:15:00 UTC)"
    ]  # its name in the zip was mangled; its record gives it back: not "renamed"
    assert taken["alee"].lms_id == "ann_lee" and "renamed from masks.ipynb" in taken["alee"].notes
    assert not taken["jsmith"].late and not taken["zoe"].late
    reasons = [s.reason for s in done.skipped]
    assert reasons.count("the attempt's record (Blackboard's .txt: name, time, comments)") == 3
    assert sum("older submission" in r for r in reasons) == 1
    with Gradebook(db_url(lms_course)) as gb:  # the Username lasts: it is the Grade Center's key
        assert gb.find_student("jdoe").lms_user_id == "john"
        assert gb.find_student("alee").lms_user_id == "ann_lee"
        assert gb.find_student("zoe").lms_user_id == "zoe"
    for student in ("jdoe", "zoe"):
        folder = lms_course / "feedback" / student / A
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.html").write_text("<p>feedback</p>")
    [(path, packed)], _ = feedback_zip.pack(lms_course, A)
    assert read_names(path) == [
        f"Masks_lab_john_attempt_2026-10-05-14-15-00_{NOTEBOOK}_feedback.html",
        f"Masks_lab_zoe_attempt_2026-10-05-09-00-00_{NOTEBOOK}_feedback.html",
    ]


# Blackboard's Grade Center download (Work Offline, Download; Ultra: Gradebook, Download):
# the users' columns, then ``NAME [Total Pts: N Score] |ID`` per item (Ultra: "up to N");
# every cell quoted; tab-delimited UTF-16 (the ".xls" choice) or comma-delimited UTF-8.
# nbeaver/offline-grades-upload's example header: ``Quiz 3 [Total Pts: 10] |664617``.
def blackboard_gradebook(ultra: bool) -> list[list[str]]:
    pts = "Total Pts: up to 10 Score" if ultra else "Total Pts: 10 Score"
    return [
        ["Last Name", "First Name", "Username", "Student ID", "Last Access", "Availability",
         f"Masks lab [{pts}] |4711", f"Attention [{pts}] |4712", "Quiz 3 [Total Pts: 10] |664617"],
        ["Smith", "Jane", "jsmith", "S-0007", "2026-10-05 12:31:02", "Available", "", "", "8"],
        ["Doe", "John", "john", "S-0008", "2026-10-05 14:16:40", "Available", "", "", "7"],
        ["Lee", "Ann", "ann_x", "alee", "2026-10-04 21:27:11", "Available", "6", "", ""],
        ["Student", "Test", "bb_test_1", "", "", "Available", "", "", ""],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("ultra", "delimiter", "encoding", "bom"),
    [(False, "\t", "utf-16-le", codecs.BOM_UTF16_LE), (True, ",", "utf-8", b"")],
)
def test_blackboard_grade_center_filled_as_downloaded(
    lms_course: Path, tmp_path: Path, ultra: bool, delimiter: str, encoding: str, bom: bytes
) -> None:
    """Rows by Username (John's is his email's name), or Student ID (Ann's is her course id);
    columns by id or by name; the file written back in its separator, encoding and quotes."""
    graded_gradebook(lms_course)
    before = blackboard_gradebook(ultra)
    source = write_rows(tmp_path / "gc.xls", before, delimiter, encoding=encoding, bom=bom,
                        quoting=csv.QUOTE_ALL, newline="\r\n")  # fmt: skip
    chosen = [f"{A}=4711", f"{B}=Attention"]
    out, left = export.export(lms_course, "blackboard", tmp_path / "up.xls", "skip", chosen, source)
    raw = out.read_bytes()
    assert left == [] and raw.startswith(bom) and raw[len(bom) :].decode(encoding).startswith(
        f'"Last Name"{delimiter}"First Name"'
    )  # fmt: skip
    expected = [list(row) for row in before]
    expected[1][6] = "7"
    expected[2][6], expected[2][7] = "5", "5"
    assert read_rows(out, delimiter, "utf-16" if bom else "utf-8") == expected
    assert raw[len(bom) :].decode(encoding).count("\r\n") == len(before)
    with pytest.raises(CourseError, match=r"no column titled as the assignment a_masks"):
        export.export(lms_course, "blackboard", tmp_path / "x.csv", "skip", [A], source)
    canvas_like = write_rows(tmp_path / "c.csv", [["Student", "ID", "a_masks (1)"]])
    with pytest.raises(CourseError, match="not a Blackboard Grade Center download"):
        export.export(lms_course, "blackboard", tmp_path / "x.csv", "skip", [A], canvas_like)


def test_blackboard_upload_file(lms_course: Path, tmp_path: Path) -> None:
    graded_gradebook(lms_course)
    with warnings.catch_warnings(), Gradebook(db_url(lms_course)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_student("jdoe", lms_user_id="john")
    out, _ = export.export(lms_course, "blackboard", tmp_path / "b.csv", "blank", [A])
    assert read_rows(out) == [
        ["Last Name", "First Name", "Username", "a_masks [Total Pts: 10 Score]"],
        ["Lee", "Ann", "alee", ""], ["Doe", "John", "john", "5"], ["Smith", "Jane", "1001", "7"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("Sep 24, 2024 926 PM", datetime(2024, 9, 24, 21, 26)),  # as D2L writes it
        ("Mar 29, 2018 1205 PM", datetime(2018, 3, 29, 12, 5)),
        ("Oct 5, 2026 1205 AM", datetime(2026, 10, 5, 0, 5)),
        ("Oct 5, 2026 2:15 PM", datetime(2026, 10, 5, 14, 15)),  # not seen: read as well
        ("Oct 5, 2026 14:15", datetime(2026, 10, 5, 14, 15)),
        ("Foo 5, 2026 215 PM", None),
        ("Feb 30, 2026 215 PM", None),
    ],
)
def test_brightspace_times(written: str, expected: datetime | None) -> None:
    assert system("brightspace").local_time(written) == expected


def test_blackboard_term_returns_grades_by_the_usernames_collect_learned(
    lms_course: Path, tmp_path: Path
) -> None:
    """Collected, graded, returned: John's username (``jd_bb``) is in neither the roster nor
    his email; his attempt's record names him, collect records it, and his Grade Center row is
    found by it. Zoe, new to the course, is collected and graded under her username."""
    task, when = "Masks_lab", at(5, 12, 0)
    john = blackboard_name(task, "jd_bb", when, f"{NOTEBOOK}.ipynb")
    files = {
        john: notebook_bytes("john"),
        blackboard_name(task, "jd_bb", when): blackboard_record(
            task, "John Doe", "jd_bb", when, {john: f"{NOTEBOOK}.ipynb"}
        ),
        blackboard_name(task, "zoe", when, f"{NOTEBOOK}.ipynb"): notebook_bytes("zoe"),
    }
    archive = write_zip(tmp_path / "gradebook.zip", files)
    done = collect.collect(lms_course, A, archive, "blackboard", None, ZONE)
    assert sorted(t.student for t in done.taken) == ["jdoe", "zoe"]
    graded_gradebook(lms_course)  # as autograding would: John 9 (late penalty 4), Jane 7
    with warnings.catch_warnings(), Gradebook(db_url(lms_course)) as gb:
        warnings.simplefilter("ignore")
        gb.add_submission(A, "zoe")
        grade = gb.find_grade("q", "nb", A, "zoe")
        grade.auto_score, grade.needs_manual_grade = 8, False
        gb.db.commit()
    rows = [
        ["Last Name", "First Name", "Username", "Masks lab [Total Pts: 10 Score] |4711"],
        ["Doe", "John", "jd_bb", ""], ["New", "Zoe", "zoe", ""], ["Smith", "Jane", "js_bb", ""],
    ]  # fmt: skip
    source = write_rows(tmp_path / "gc.csv", rows, quoting=csv.QUOTE_ALL)
    chosen = [f"{A}=4711"]  # by the column's id
    out, left = export.export(lms_course, "blackboard", tmp_path / "up.csv", "skip", chosen, source)
    assert [r[3] for r in read_rows(out)[1:]] == ["5", "8", ""]
    assert left == [  # Jane's Blackboard username is nowhere in the course: said, not guessed
        "jsmith: the grade of a_masks is not written, no row of the export is theirs (is the "
        "student enrolled in the LMS course, with the LMS user id or email of the roster?)"
    ]
