"""Moodle: its "Download all submissions" zip, its grading worksheet (the submission times), its
gradebook export and import, its feedback files zip, as moodle/moodle's own code writes and
reads them.

- Download ("View all submissions", "Download all submissions"; ``mod/assign/locallib.php``
  ``download_submissions``): a folder per participant, ``Full Name_ID_assignsubmission_file/
  FILENAME`` since Moodle 4.1 and ``Full Name_ID_assignsubmission_file_/FILENAME`` before
  (Moodle's own feedback import, ``mod/assign/feedback/file/importziplib.php``
  ``is_valid_filename_for_import``, reads both); or, without folders, ``Full
  Name_ID_assignsubmission_file_FILENAME``. Moodle writes the full name with its underscores
  turned into spaces, so the name holds none; with blind marking it is ``Participant``. The ID
  is Moodle's participant id for the assignment (it does not last beyond it); the download
  holds only the latest submission and no times: they are in the grading worksheet
  (:mod:`grader.lms.worksheet`, ``--worksheet``), by participant id.
- Gradebook export (Grades, Export, Plain text file; imported with Grades, Import, CSV file,
  mapping the email or ID number to the user): identity columns, then a column per grade item
  headed ``Type: Title (Real)``. A row's student is found by email, else by ID number.
- The grading worksheet is also an import (``mod/assign/feedback/offline/importgradeslib.php``,
  "Upload grading worksheet", which finds the ``Identifier``, ``Grade`` and ``Last modified
  (grade)`` columns by their names in the teacher's language): its Grade column takes the
  grades, each participant being the one ``course collect`` recorded.
- A new import file: ``First name, Last name, ID number, Email address``, then a column per
  assignment; map "Email address" (or "ID number") to the user when importing.
- Feedback ("Upload multiple feedback files in a zip"): a folder per participant named as in
  its download, ``Full Name_id_assignsubmission_file/NOTEBOOK_feedback.html``.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

from grader.lms import worksheet
from grader.lms.base import ANY_FOLDER, GradebookFile, LmsFile, LmsSystem, named
from grader.lms.collect import read_record, students_of
from grader.lms.export import LmsExport
from grader.shared.paths import CourseError

GRADE_HEADERS = {  # get_string('grade') in Moodle's language packs
    "grade", "bewertung", "note", "calificacion", "valutazione", "nota", "cijfer",
    "qualificacio", "оценка", "not",
}  # fmt: skip
ID_NUMBER_HEADERS = {"id number", "idnumber", "id-nummer", "numero de id", "numero id"}


class MoodleFileNames(FileNameCollectorPlugin):
    """Moodle's ``Full Name_id_assignsubmission_file[_]/file.ext`` (in folders) or
    ``Full Name_id_assignsubmission_file_file.ext`` (flat)."""

    named_regexp = Unicode(
        ANY_FOLDER + r"(?P<folder>(?P<name>[^/_]+)_(?P<student_id>\d+)_assignsubmission_file"
        r"(?:_?/(?:.*/)?|_))(?P<file_id>[^/]+?)(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


class MoodleExport(LmsExport):
    """Moodle's grade import CSV."""

    default_file = "grades-moodle.csv"

    def header(self, assignments: list) -> list[list[str]]:
        names = ["First name", "Last name", "ID number", "Email address"]
        return [names + [a.name for a in assignments]]

    def identity(self, student: object) -> list[str]:
        return [student.first_name or "", student.last_name or "", student.id, student.email or ""]


class Moodle(LmsSystem):
    """Moodle (see the module)."""

    name = "moodle"
    title = "Moodle"
    download_steps = "'View all submissions', 'Download all submissions'"
    exporter = MoodleExport
    times_missing = (
        "no --worksheet: lateness unknown, no time recorded (Moodle writes the submission "
        "times only in its grading worksheet: collect again with --worksheet)"
    )

    def parse(self, relative: str) -> LmsFile | None:
        match = named(MoodleFileNames().named_regexp, relative)
        if match is None:
            return None
        return LmsFile(
            path=relative,
            lms_id=match["student_id"],
            name=match["name"],
            stem=match["file_id"],
            ext=match["ext"].lower(),
            # the participant's folder as the download named it (without its slash), or the
            # flat prefix (the feedback zip puts its files in a folder of that name)
            prefix=match["folder"].split("/", 1)[0],
        )

    def read_times(self, path: Path | None, zone: tzinfo) -> dict[str, worksheet.WorksheetRow]:
        return worksheet.read_worksheet(path, zone) if path else {}

    def submission_time(
        self, chosen: LmsFile, row: worksheet.WorksheetRow | None, zone: tzinfo
    ) -> tuple[str, datetime | None]:
        """The worksheet's time (already in UTC), none without a worksheet."""
        return (row.modified, row.submitted) if row else ("", None)

    def gradebook(self, export: GradebookFile) -> tuple[dict[str, int], dict[int, str | None]]:
        rows, names, source = export.sheet.rows, export.names, export.source
        first = rows[1][0].strip() if len(rows) > 1 and rows[1] else ""
        if not worksheet.IDENTIFIER.match(first):
            return export.assignment_columns(_titles), _owners(rows, export.gb)
        if len(names) != 1:
            raise CourseError(
                f"{source} is a grading worksheet, which is one assignment's: choose it with "
                "--assignment NAME."
            )
        column = _worksheet_grade_column(export.header, export.columns.get(names[0], ""), source)
        return {names[0]: column}, _worksheet_owners(rows, export.root, names[0], source)

    def feedback_entry(self, prefix: str, notebook: str) -> str:
        return f"{prefix}/{notebook}_feedback.html"


def _titles(header: str) -> tuple[str] | None:
    """A grade item's name in its header ``Type: Title (Real)`` (any column may be one)."""
    return (re.sub(r"\s\([^()]*\)$", "", header.split(":", 1)[-1]),)


def _owners(rows: list[list[str]], gb: Gradebook) -> dict[int, str | None]:
    """Each row's student of a Moodle gradebook export: by email, else by ID number."""
    header, body = rows[0], rows[1:]
    email = worksheet.first_column(body, lambda cell: "@" in cell)
    number = next((i for i, h in enumerate(header) if worksheet.fold(h) in ID_NUMBER_HEADERS), None)
    if email is None and number is None:
        raise CourseError(
            "the Moodle gradebook export has neither an email nor an ID number column: export "
            "it again with the user's email address among the identity fields."
        )
    by_email = {s.email.lower(): s.id for s in gb.students if s.email}
    ids = {s.id for s in gb.students}
    owners = {}
    for index, row in enumerate(body, 1):
        mail = row[email].strip().lower() if email is not None and email < len(row) else ""
        given = row[number].strip() if number is not None and number < len(row) else ""
        owners[index] = by_email.get(mail) or (given if given in ids else None)
    return owners


def _worksheet_owners(
    rows: list[list[str]], root: Path, assignment: str, source: Path
) -> dict[int, str | None]:
    """Each participant row's student, by the participant id that ``course collect`` recorded
    from the assignment's Moodle download."""
    students = students_of(read_record(root, assignment), "moodle")
    if not students:
        raise CourseError(
            f"{source} names Moodle participants, whom only the assignment's Moodle download "
            f"names: collect it first (course collect {assignment} ZIP --lms moodle)."
        )
    student_of = {taken["lms_id"]: student for student, taken in students.items()}
    ident = worksheet.identifier_column(rows[0], rows[1:])
    owners = {}
    for index, row in enumerate(rows[1:], 1):
        found = worksheet.IDENTIFIER.match(row[ident].strip()) if ident < len(row) else None
        owners[index] = student_of.get(found.group(1)) if found else None
    return owners


def _worksheet_grade_column(header: list[str], wanted: str, source: Path) -> int:
    """The worksheet's grade column: ``wanted``, else ``get_string('grade')`` of its language."""
    hits = [
        i
        for i, h in enumerate(header)
        if (h == wanted if wanted else worksheet.fold(h) in GRADE_HEADERS)
    ]
    if len(hits) != 1:
        raise CourseError(
            f"{source}: no {'column ' + repr(wanted) if wanted else 'Grade column'} (its columns: "
            f"{', '.join(repr(h) for h in header)}): name it, --assignment 'NAME=COLUMN'."
        )
    return hits[0]
