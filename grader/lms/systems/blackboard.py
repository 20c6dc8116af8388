"""Blackboard Learn (Original and Ultra): its "Assignment File Download", its Grade Center
download and upload; its feedback, which Blackboard takes back one student at a time.

Where each format was read (Blackboard publishes no code; Anthology's help pages
"Upload or download Grade Center items" and "Assignment File Download", and the open-source
tools that parse these files):

- Download (Original: Grade Center, the assignment column's menu, "Assignment File Download";
  Ultra: the assignment's submissions, "Download all"): one flat zip
  ``gradebook_COURSE_ASSIGNMENT_TIME.zip`` whose files are ``ASSIGNMENT_USERNAME_attempt_
  YYYY-MM-DD-HH-MM-SS_FILENAME`` and, per attempt, ``ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-
  HH-MM-SS.txt``: ``Name: Full Name (username)``, ``Assignment:``, ``Date Submitted:`` (the
  same wall clock, with its zone, ``12:51:51 PM EDT``), the grade, the text, the comments, and
  under ``Files:`` each ``Original filename:`` and the ``Filename:`` it got in the zip (as
  codepost-io/integration-blackboard's sample download, vangef/BBGradebookOrganiser and
  CodeGrade's ``blackboard`` parser read them). The username is read from the ``.txt`` where
  there is one (an assignment's name and a username may both hold ``_``), else as the last
  ``_`` part before ``_attempt_``; a file is given its original name from the ``.txt``. With
  "All attempts" downloaded, each attempt has its time: the latest is collected. The time is
  the one the ``.txt`` gives with its zone: give that zone with ``--timezone`` (the zone's
  name in the ``.txt`` is an abbreviation, which names no zone for sure). Not confirmed from
  Anthology's pages: that Ultra's download names its files as the Original's (read here as
  the same).
- Grade Center download (Original: Grade Center, Work Offline, Download; Ultra: Gradebook,
  Download): ``Last Name, First Name, Username, Student ID, Last Access, Availability``, then a
  column per item headed ``NAME [Total Pts: N Score] |COLUMNID`` (Ultra: ``[Total Pts: up to N
  Score]``; nbeaver/offline-grades-upload's example: ``Quiz 3 [Total Pts: 10] |664617``),
  tab-delimited (a ``.xls`` file that is UTF-16 text) or comma-delimited, every cell quoted.
  Not confirmed: which encoding each choice has on every release; the file is read as UTF-16
  by its byte order mark or its zero bytes, else as UTF-8, and written back in the same.
  The upload (Work Offline, Upload) matches a row by Username and a column by its id; a column
  without an id becomes a new column. So the download is filled in and uploaded as it came:
  each row's student is the roster's with that Username as ``lms_user_id`` or as course id (or
  the Student ID as course id, or the email's name part), each assignment's column the one
  whose name is the assignment's, or named with ``--assignment NAME=COLUMN`` (the whole
  header, its name or its id).
- A new upload file: ``Last Name, First Name, Username`` and a column per assignment, without
  ids: Blackboard makes it a new column, so fill the download instead (``--gradebook``).
- Feedback: no bulk upload of feedback files is documented for either view; the zip holds each
  student's file named as the attempt was (``ASSIGNMENT_USERNAME_attempt_TIME_NOTEBOOK_
  feedback.html``), to attach in the attempt's feedback (Grade Center, the attempt,
  "Feedback to Learner"; Ultra: the submission's feedback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from nbgrader.api import Gradebook

from grader.lms.base import ANY_FOLDER, GradebookFile, LmsFile, LmsSystem, named
from grader.lms.export import LmsExport
from grader.lms.fill import header_index
from grader.lms.roster import Person, find
from grader.shared.paths import CourseError

TIME = r"\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}"
FILE = (
    ANY_FOLDER + rf"(?P<prefix>(?P<head>[^/]+)_attempt_(?P<when>{TIME}))"
    r"(?:_(?P<file>[^/]+)|(?P<record>\.txt))$"
)
COLUMN = re.compile(r"^(?P<title>.*?)\s*(?:\[(?P<points>[^\]]*)\])?\s*\|\s*(?P<id>\d+)\s*$")


@dataclass
class Attempt:
    """What an attempt's ``.txt`` says."""

    username: str = ""
    name: str = ""
    submitted: str = ""  # its "Date Submitted", zone included
    originals: dict[str, str] = field(default_factory=dict)  # file in the zip -> its own name


def read_attempt(text: str) -> Attempt:
    """An attempt's ``.txt`` (the English labels; a label it lacks leaves its field empty)."""
    attempt = Attempt()
    who = re.search(r"^Name:\s*(.*?)\s*\(([^()\n]*)\)\s*$", text, re.M)
    if who:
        attempt.name, attempt.username = who.group(1), who.group(2).strip()
    when = re.search(r"^Date Submitted:\s*(.+?)\s*$", text, re.M)
    attempt.submitted = when.group(1) if when else ""
    pairs = re.findall(r"Original filename:\s*(.+?)\s*\n\s*Filename:\s*(.+?)\s*$", text, re.M)
    attempt.originals = {given: original for original, given in pairs}
    return attempt


class BlackboardExport(LmsExport):
    """A Grade Center upload CSV (new columns: see the module)."""

    default_file = "grades-blackboard.csv"

    def header(self, assignments: list) -> list[list[str]]:
        items = [f"{a.name} [Total Pts: {a.max_score:g} Score]" for a in assignments]
        return [["Last Name", "First Name", "Username", *items]]

    def identity(self, student: object) -> list[str]:
        return [
            student.last_name or "",
            student.first_name or "",
            student.lms_user_id or student.id,
        ]


class Blackboard(LmsSystem):
    """Blackboard Learn, Original and Ultra (see the module)."""

    name = "blackboard"
    title = "Blackboard"
    download_steps = "Grade Center, the assignment column's menu, 'Assignment File Download'"
    whole_attempts = True
    times_note = "Blackboard writes each attempt's time in its download (see --timezone)."
    exporter = BlackboardExport

    def __init__(self) -> None:
        self.attempts: dict[str, Attempt] = {}  # attempt prefix -> its .txt

    def prepare(self, extracted: Path) -> None:
        """Read every attempt's ``.txt``."""
        for path in extracted.rglob("*.txt"):
            match = named(FILE, path.relative_to(extracted).as_posix())
            if match and match["record"]:
                text = path.read_bytes().decode("utf-8", errors="replace")
                self.attempts[match["prefix"]] = read_attempt(text)

    def parse(self, relative: str) -> LmsFile | None:
        match = named(FILE, relative)
        if match is None or match["record"]:
            return None
        attempt = self.attempts.get(match["prefix"], Attempt())
        username = attempt.username or match["head"].rsplit("_", 1)[-1]
        given = relative.rsplit("/", 1)[-1]
        own = attempt.originals.get(given, match["file"])
        stem, dot, ext = own.rpartition(".")
        stem, ext = (stem, f".{ext}") if dot and stem else (own, "")
        return LmsFile(
            path=relative,
            lms_id=username,
            name=attempt.name,
            stem=stem,
            ext=ext.lower(),
            attempt=int(re.sub(r"\D", "", match["when"])),
            prefix=match["prefix"],
            written=match["when"],
        )

    def skip_reason(self, relative: str) -> str:
        match = named(FILE, relative)
        if match and match["record"]:
            return "the attempt's record (Blackboard's .txt: name, time, comments)"
        return super().skip_reason(relative)

    def local_time(self, written: str) -> datetime | None:
        try:
            return datetime.strptime(written, "%Y-%m-%d-%H-%M-%S")
        except ValueError:
            return None

    def find_person(self, people: list[Person], chosen: LmsFile, email: str) -> Person | None:
        """By Username as LMS id, by name, else the student whose course id or email's name
        part is the Username."""
        person = find(people, chosen.lms_id, chosen.name, email)
        if person is not None:
            return person
        wanted = chosen.lms_id.lower()
        same = [p for p in people if wanted in (p.id.lower(), p.email.lower().split("@")[0])]
        return same[0] if len(same) == 1 else None

    def lasting_id(self, chosen: LmsFile) -> str:
        return chosen.lms_id  # the Username: the Grade Center's key

    def gradebook(self, export: GradebookFile) -> tuple[dict[str, int], dict[int, str | None]]:
        header = export.header
        user = header_index(header, "Username")
        if user is None:
            raise CourseError(
                f"{export.source} is not a Blackboard Grade Center download (no Username column): "
                "download it from Grade Center, Work Offline, Download (Ultra: Gradebook, "
                "Download), with the users' information."
            )
        owners = _owners(export.sheet.rows, export.gb, user, header_index(header, "Student ID"))
        return export.assignment_columns(_titles), owners

    def feedback_entry(self, prefix: str, notebook: str) -> str:
        return f"{prefix}_{notebook}_feedback.html"


def _titles(header: str) -> tuple[str, str] | None:
    """An item column's name and column id (``NAME [Total Pts: N Score] |ID``); None for the
    columns without an id (the users' information)."""
    match = COLUMN.match(header)
    return (match.group("title"), match.group("id")) if match else None


def _owners(
    rows: list[list[str]], gb: Gradebook, user: int, number: int | None
) -> dict[int, str | None]:
    """Each row's course student, by its Username (or Student ID)."""
    by_key = {}
    for s in gb.students:
        mail = (s.email or "").lower().split("@")[0]
        for key in (("user", s.lms_user_id), ("user", s.id), ("number", s.id), ("user", mail)):
            if key[1]:
                by_key.setdefault((key[0], key[1].lower()), s.id)
    owners = {}
    for index, row in enumerate(rows[1:], 1):
        if user >= len(row) or not row[user].strip():
            continue
        given = row[number].strip().lower() if number is not None and number < len(row) else ""
        keys = [("user", row[user].strip().lower()), ("number", given)]
        owners[index] = next((by_key[k] for k in keys if k[1] and k in by_key), None)
    return owners
