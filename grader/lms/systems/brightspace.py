"""D2L Brightspace: an assignment folder's "Download" of its submissions, its grades export and
import, its feedback files upload.

What each format is, and where it was read (D2L does not publish its code; the pages below are
D2L's own help, and the open-source tools that parse these files):

- Download (Assignments, the folder, its submissions page: select all, "Download"): a zip with
  an ``index.html`` (the list of submissions) and, per submission, a folder
  ``KEY - First Last - Mon D, YYYY HMM AM/`` holding its files, or the files flat as
  ``KEY - First Last - Mon D, YYYY HMM AM - FILE`` (KEY is two numbers, ``271836-442356``; the
  time has no colon, ``926 PM`` is 9:26 PM). Both forms are read: the folder form as the
  ``rename_and_move.sh`` D2L scripts shown in its comments, the flat form as kodiak's
  ``parse_submission_file_name`` tests (``13394-80551 - Eric Gillotti - Mar 29, 2018 1205 PM -
  EGillotti - Homework 6.zip``) and grading scripts written for it. A name may be followed by
  ``- `` without a space (seen in such scripts): read too. Not confirmed: which of KEY's two
  numbers is the student's (kodiak calls the pair the submission id; other tools call its first
  number the user's). So a student is known here by the name, and a resubmission (a later
  submission of the same name: its own folder, or its own prefix) replaces the earlier one;
  two students of one name in a course cannot be told apart by the download. The time is
  written in the downloading user's time zone (their Brightspace account setting), in
  English month names (others not confirmed): give that zone with ``--timezone``.
- Grades export (Grades, Enter Grades, Export: "Org Defined ID" and/or "Username", the grade
  items' points): ``OrgDefinedId``, ``Username`` (their values prefixed with ``#``), names,
  ``Email``, a column per grade item headed ``NAME Points Grade <Numeric MaxPoints:N ...>``,
  the final grade columns, and ``End-of-Line Indicator`` (its cells ``#``) last. The import
  (Grades, Import; D2L's "Importing grades" and its sample import file) matches a student by
  ``OrgDefinedId`` or ``Username`` and a grade item by ``NAME Points Grade`` (what follows in
  ``<...>`` describes an item to create), and needs the ``End-of-Line Indicator`` column. The
  ``#`` before an id: written by the export and taken by the import; here an id is compared
  with or without it. A row's student is the roster's with that Username as ``lms_user_id``
  or as course id, else with that OrgDefinedId as course id, else with that email, else (where
  the export has ``First Name`` and ``Last Name``) with that name, as the download wrote it and
  ``course collect`` put it in the gradebook: the download carries no id that the export has
  (its KEY is not the OrgDefinedId), so without a roster the name is all that links the two.
  A name two students of the course share, or two rows of the export, matches no one.
- A new import file: ``OrgDefinedId, Username``, a ``NAME Points Grade <Numeric MaxPoints:N>``
  column per assignment, ``End-of-Line Indicator``; OrgDefinedId is the course's id (right only
  where it is the student number Brightspace knows), Username the roster's ``lms_user_id``
  (else the course's id).
- Feedback ("Add Feedback Files" in bulk, on the folder's submissions page): the download's own
  form back, each student's files in the folder (or under the prefix) the download gave them,
  with the ``index.html``; as grading scripts for Brightspace pack it. Not confirmed from D2L's
  pages: that the upload needs the ``index.html`` (it is put in; an upload that does not need
  it ignores it).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from nbgrader.api import Gradebook

from grader.lms.base import ANY_FOLDER, GradebookFile, LmsFile, LmsSystem, named
from grader.lms.export import LmsExport
from grader.lms.fill import header_index
from grader.lms.roster import squeeze
from grader.shared.paths import CourseError

WHEN = r"[A-Za-z]{3,9}\.? \d{1,2}, \d{4},? \d{1,2}:?\d\d(?: ?[AaPp]\.?[Mm]\.?)?"
HEAD = rf"(?P<key>\d+-\d+) - (?P<name>[^/]+?) ?- (?P<when>{WHEN})"
FOLDER = ANY_FOLDER + rf"(?P<prefix>{HEAD})/(?:.*/)?(?P<file_id>[^/]+?)(?P<ext>\.[^./]+)?$"
FLAT = ANY_FOLDER + rf"(?P<prefix>{HEAD} - )(?P<file_id>[^/]+?)(?P<ext>\.[^./]+)?$"
MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
END = "End-of-Line Indicator"
POINTS = re.compile(r"^(.*?) Points Grade(?: <.*>)?$")


class BrightspaceExport(LmsExport):
    """Brightspace's grades import CSV."""

    default_file = "grades-brightspace.csv"

    def header(self, assignments: list) -> list[list[str]]:
        items = [f"{a.name} Points Grade <Numeric MaxPoints:{a.max_score:g}>" for a in assignments]
        return [["OrgDefinedId", "Username", *items, END]]

    def identity(self, student: object) -> list[str]:
        return [f"#{student.id}", f"#{student.lms_user_id or student.id}"]

    def row_end(self) -> list[str]:
        return ["#"]


class Brightspace(LmsSystem):
    """D2L Brightspace (see the module)."""

    name = "brightspace"
    title = "Brightspace"
    download_steps = "the assignment's submissions, select all, 'Download'"
    whole_attempts = True
    times_note = "Brightspace writes each submission's time in its download (see --timezone)."
    exporter = BrightspaceExport

    def parse(self, relative: str) -> LmsFile | None:
        match = named(FOLDER, relative) or named(FLAT, relative)
        if match is None:
            return None
        local = self.local_time(match["when"])
        return LmsFile(
            path=relative,
            lms_id=squeeze(match["name"]) or match["key"],
            name=match["name"].strip(),
            stem=match["file_id"],
            ext=match["ext"].lower(),
            attempt=int(local.strftime("%Y%m%d%H%M")) if local else 0,
            prefix=match["prefix"],
            written=match["when"],
        )

    def skip_reason(self, relative: str) -> str:
        if relative.rsplit("/", 1)[-1] == "index.html":
            return "Brightspace's list of the submissions (given back with the feedback)"
        return super().skip_reason(relative)

    def local_time(self, written: str) -> datetime | None:
        """``Sep 24, 2024 926 PM`` (English month names; no colon in the time, as D2L writes
        it; a colon, or a 24-hour time without AM or PM, is read too)."""
        found = re.match(
            r"([A-Za-z]{3})\w*\.? (\d{1,2}), (\d{4}),? (\d{1,2}):?(\d\d) ?([AaPp]?)", written
        )
        if found is None or found.group(1).lower() not in MONTHS:
            return None
        month, day, year, clock, minute, half = found.groups()
        hour = int(clock) % 12 + (12 if half.lower() == "p" else 0) if half else int(clock)
        try:
            return datetime(int(year), MONTHS.index(month.lower()) + 1, int(day), hour, int(minute))
        except ValueError:
            return None

    def split_name(self, name: str) -> tuple[str, str]:
        if "," in name:  # a site that shows names as "Last, First"
            last, first = name.split(",", 1)
            return first.strip(), last.strip()
        return super().split_name(name)

    def gradebook(self, export: GradebookFile) -> tuple[dict[str, int], dict[int, str | None]]:
        header = export.header
        org, user = header_index(header, "OrgDefinedId"), header_index(header, "Username")
        if org is None and user is None:
            raise CourseError(
                f"{export.source} is not a Brightspace grades export (no OrgDefinedId or Username "
                "column): export it from Grades, Export, with Org Defined ID and Username and "
                "the grade items' points."
            )
        if header_index(header, END) is None:  # the import needs it; the export always has it
            for row in export.sheet.rows:
                row.append(END if row is header else "#")
        names = (header_index(header, "First Name"), header_index(header, "Last Name"))
        owners = _owners(export.sheet.rows, export.gb, org, user, header_index(header, "Email"))
        _by_name(export.sheet.rows, export.gb, names, owners)
        return export.assignment_columns(_titles), owners

    def feedback_entry(self, prefix: str, notebook: str) -> str:
        if prefix.endswith(" - "):  # the flat form: the file's name begins with the prefix
            return f"{prefix}{notebook}_feedback.html"
        return f"{prefix}/{notebook}_feedback.html"

    def feedback_extras(self, download: Path) -> dict[str, Path]:
        found = sorted(download.rglob("index.html"), key=lambda p: len(p.parts))
        return {found[0].relative_to(download).as_posix(): found[0]} if found else {}


def _titles(header: str) -> tuple[str] | None:
    """A grade item's name in ``NAME Points Grade <...>``; None for other columns."""
    match = POINTS.match(header)
    return (match.group(1),) if match else None


def _by_name(
    rows: list[list[str]], gb: Gradebook, names: tuple[int | None, int | None], owners: dict
) -> None:
    """Give each row no id matched the student of its first and last name, where one student
    of the course and one row of the export have that name (letters compared, case aside)."""
    first, last = names
    if first is None or last is None:
        return

    def name_of(row: list[str]) -> str:
        cells = [row[i] if i < len(row) else "" for i in (first, last)]
        return squeeze(" ".join(cells)) if all(c.strip() for c in cells) else ""

    students: dict[str, list[str]] = {}
    for s in gb.students:
        if s.first_name and s.last_name:
            students.setdefault(squeeze(f"{s.first_name} {s.last_name}"), []).append(s.id)
    in_rows = [name_of(row) for row in rows]
    taken = {owner for owner in owners.values() if owner}
    for index in owners:
        name = in_rows[index]
        found = students.get(name, []) if name and in_rows.count(name) == 1 else []
        if owners[index] is None and len(found) == 1 and found[0] not in taken:
            owners[index] = found[0]
            taken.add(found[0])


def _owners(
    rows: list[list[str]], gb: Gradebook, org: int | None, user: int | None, email: int | None
) -> dict[int, str | None]:
    """Each row's course student: by Username (the roster's LMS id or id), OrgDefinedId (the
    course's id) or email; an id read with or without its ``#``."""
    by_key = {}
    for s in gb.students:
        for key in (("user", s.lms_user_id), ("user", s.id), ("org", s.id),
                    ("email", (s.email or "").lower())):  # fmt: skip
            if key[1]:
                by_key.setdefault(key, s.id)
    owners = {}
    for index, row in enumerate(rows[1:], 1):
        if not any(c.strip() for c in row):
            continue

        def cell(i: int | None, r: list[str] = row) -> str:
            return r[i].strip().removeprefix("#").strip() if i is not None and i < len(r) else ""

        keys = [("user", cell(user)), ("org", cell(org)), ("email", cell(email).lower())]
        owners[index] = next((by_key[k] for k in keys if k[1] and k in by_key), None)
    return owners
