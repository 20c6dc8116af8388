"""Grades into the instructor's own LMS gradebook: the CSV that Canvas or Moodle exported,
filled in and written back as it came (its rows, columns, separator, byte order mark and line
ends), so that the LMS imports it as it is.

- Canvas (Grades > Export, then Grades > Import): ``lib/gradebook_exporter.rb`` of
  instructure/canvas-lms writes ``Student`` (or ``LastName, FirstName``), ``ID``, [``SIS User
  ID``], ``SIS Login ID``, [``Integration ID``], [``Root Account``], ``Section``, the custom
  columns, an assignment per column headed ``Title (id)``, then the totals; a row of "Manual
  Posting" marks when some assignment is posted by hand, then ``    Points Possible``, then a row
  per student. ``lib/gradebook_importer.rb`` finds a student by ``ID`` (then SIS ids, then name)
  and an assignment by the id in its header; it skips those rows, the totals and each unchanged
  cell, and reads ``;`` or ``,`` separated files and decimal commas. Here the student is the
  roster's with that Canvas user id (``lms_user_id``), else the one whose id is the SIS User ID
  or SIS Login ID, else the one of that email or name.
- Moodle, its gradebook export (Grades > Export > Plain text file; imported with Grades > Import
  > CSV file, mapping the email or ID number to the user): identity columns, then a column per
  grade item headed by its name. The student is found by email, else by ID number.
- Moodle, an assignment's grading worksheet (:mod:`grader.lms.worksheet`; imported with "Upload
  grading worksheet", ``mod/assign/feedback/offline/importgradeslib.php``, which finds the
  ``Identifier``, ``Grade`` and ``Last modified (grade)`` columns by their names in the teacher's
  language): the participant is the one ``course collect`` recorded for the student.

The column of an assignment is the one whose title is its name (letters and digits compared:
``A Masks (4711)`` for ``a_masks``), or the one given with ``--assignment NAME=COLUMN``.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook

from grader.lms import worksheet
from grader.lms.collect import read_record
from grader.lms.roster import squeeze
from grader.shared.paths import CourseError

TITLE_AND_ID = re.compile(r"^(.*)\s\((\d+)\)$")  # Canvas's Assignment.title_and_id
GRADE_HEADERS = {  # get_string('grade') in Moodle's language packs
    "grade", "bewertung", "note", "calificacion", "valutazione", "nota", "cijfer",
    "qualificacio", "оценка", "not",
}  # fmt: skip
ID_NUMBER_HEADERS = {"id number", "idnumber", "id-nummer", "numero de id", "numero id"}


@dataclass
class Sheet:
    """A CSV as an LMS wrote it."""

    rows: list[list[str]]
    delimiter: str = ","
    bom: bool = False
    newline: str = "\n"


def read_sheet(path: Path) -> Sheet:
    """The CSV at ``path``, with how it was written."""
    if not path.is_file():
        raise CourseError(f"no gradebook export at {path}: export the gradebook from the LMS.")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CourseError(f"{path} is not UTF-8 text: export the gradebook again.") from None
    delimiter = _delimiter(text)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    newline = "\r\n" if "\r\n" in text else "\n"
    return Sheet(rows, delimiter, raw.startswith(codecs.BOM_UTF8), newline)


def write_sheet(sheet: Sheet, path: Path) -> None:
    """Write ``sheet`` as it was read."""
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=sheet.delimiter, lineterminator=sheet.newline).writerows(
        sheet.rows
    )
    path.write_bytes((codecs.BOM_UTF8 if sheet.bom else b"") + buffer.getvalue().encode())


def _delimiter(text: str) -> str:
    """';' or ',' as Canvas's importer decides (``identify_delimiter``): the one that splits
    the first records into as many fields each, the more fields winning (records, not lines:
    a Moodle comment may hold a line break)."""
    counts = {}
    for separator in (";", ","):
        records = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
        sizes = {len(row) for _, row in zip(range(3), records, strict=False)}
        counts[separator] = sizes.pop() if len(sizes) == 1 else 0
    return ";" if counts[";"] > counts[","] else ","


def fill(
    root: Path,
    lms: str,
    plugin: object,
    gb: Gradebook,
    source: Path,
    out: Path,
    columns: dict[str, str],
) -> list[str]:
    """Fill the LMS's gradebook CSV ``source`` with the grades of ``plugin``'s assignments and
    write it to ``out``; return a line for each grade that has no row there."""
    sheet = read_sheet(source)
    if not sheet.rows:
        raise CourseError(f"{source} is empty: export the gradebook from the LMS again.")
    header, names = sheet.rows[0], [a.name for a in plugin.chosen(gb)]
    if lms == "canvas":
        _check_canvas(header, source)
        targets = {n: _column(header, n, columns.get(n, ""), source, canvas=True) for n in names}
        owners = _canvas_owners(sheet.rows, gb)
    elif worksheet.IDENTIFIER.match(_first_cell(sheet.rows)):
        if len(names) != 1:
            raise CourseError(
                f"{source} is a grading worksheet, which is one assignment's: choose it with "
                "--assignment NAME."
            )
        targets = {names[0]: _worksheet_grade_column(header, columns.get(names[0], ""), source)}
        owners = _worksheet_owners(sheet.rows, read_record(root, names[0]), names[0], source)
    else:
        targets = {n: _column(header, n, columns.get(n, ""), source, canvas=False) for n in names}
        owners = _moodle_owners(sheet.rows, gb)
    left = _write_cells(sheet, plugin, gb, targets, owners)
    write_sheet(sheet, out)
    return left


def _first_cell(rows: list[list[str]]) -> str:
    return rows[1][0].strip() if len(rows) > 1 and rows[1] else ""


def _check_canvas(header: list[str], source: Path) -> None:
    """Canvas's importer's test of a header (``row_has_student_headers?``)."""
    plain = len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    split = len(header) > 4 and header[:2] == ["LastName", "FirstName"] and "ID" in header[2]
    if not (plain or split):
        raise CourseError(
            f"{source} is not a Canvas gradebook export (its first columns are not Student, ID): "
            "export it from Canvas's Gradebook (Export, Export Entire Gradebook)."
        )


def _column(header: list[str], name: str, wanted: str, source: Path, canvas: bool) -> int:
    """The column of assignment ``name``: ``wanted`` (a header, a title or a Canvas id), else
    the one titled as the assignment."""
    found = TITLE_AND_ID.match
    titled = (
        [(i, h) for i, h in enumerate(header) if found(h)] if canvas else list(enumerate(header))
    )
    if wanted:
        hits = [i for i, h in titled if wanted in (h, *(found(h).groups() if found(h) else ()))]
    else:
        hits = [i for i, h in titled if _titled(h, name, canvas)]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(repr(h) for _, h in titled[:12] if h) or "none"
    what = f"column {wanted!r}" if wanted else f"column titled as the assignment {name}"
    raise CourseError(
        f"{source} has {'more than one' if hits else 'no'} {what} (its columns: {listed}): "
        f"say which column takes {name}'s grades, --assignment '{name}=COLUMN'."
    )


def _titled(header: str, name: str, canvas: bool) -> bool:
    """Whether a column header names the assignment (Canvas: ``Title (id)``; Moodle: ``Type:
    Title (Real)``), letters and digits compared."""
    match = TITLE_AND_ID.match(header)
    title = match.group(1) if canvas and match else header
    if not canvas:
        title = re.sub(r"\s\([^()]*\)$", "", title.split(":", 1)[-1])
    return squeeze(title) == squeeze(name)


def _canvas_owners(rows: list[list[str]], gb: Gradebook) -> dict[int, str | None]:
    """Each student row's nbgrader student (None: not in the gradebook)."""
    header = rows[0]
    first = 2 if header[:2] == ["LastName", "FirstName"] else 1
    sis = [header.index(h) for h in ("SIS User ID", "SIS Login ID") if h in header]
    by_key = {}  # Canvas user id, course id, email, "Last, First" -> the course's id
    for s in gb.students:
        names = [f"{s.last_name}, {s.first_name}"] if s.last_name else []
        keys = [("canvas", s.lms_user_id)] + [("other", k) for k in [s.id, *names]]
        for key in [*keys, ("other", (s.email or "").lower())]:
            if key[1]:
                by_key.setdefault(key, s.id)
    owners = {}
    for index, row in enumerate(rows[1:], 1):
        if not row or _not_a_student(row):
            continue
        cells = [c.strip() for c in row] + [""] * len(header)
        name = f"{cells[0]}, {cells[1]}" if first == 2 else cells[0]
        keys = [("canvas", cells[first])] + [("other", cells[i]) for i in sis]
        keys += [("other", cells[i].lower()) for i in sis] + [("other", name)]
        owners[index] = next((by_key[k] for k in keys if k[1] and k in by_key), None)
    return owners


def _not_a_student(row: list[str]) -> bool:
    """Canvas's rows that are not students (``check_for_non_student_row``)."""
    if "Points Possible" in row[0]:
        return True
    return all(re.match(r"^\s*(Muted|Manual Posting.*)?\s*$", c, re.I) for c in row)


def _moodle_owners(rows: list[list[str]], gb: Gradebook) -> dict[int, str | None]:
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
    rows: list[list[str]], record: dict, assignment: str, source: Path
) -> dict[int, str | None]:
    """Each participant row's student, by the participant id that ``course collect`` recorded
    from the assignment's Moodle download."""
    if record.get("lms") != "moodle":
        raise CourseError(
            f"{source} names Moodle participants, whom only the assignment's Moodle download "
            f"names: collect it first (course collect {assignment} ZIP --lms moodle)."
        )
    student_of = {taken["lms_id"]: student for student, taken in record["students"].items()}
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


def _write_cells(
    sheet: Sheet, plugin: object, gb: Gradebook, targets: dict[str, int], owners: dict
) -> list[str]:
    """Write each owner's grade in each target column (the rest as the LMS wrote it); return a
    line per graded student who has no row."""
    nothing = {"zero": "0", "skip": None}.get(plugin.missing, "")
    left = []
    for name, column in targets.items():
        for index, owner in owners.items():
            row = sheet.rows[index]
            value = plugin.cell(gb, name, owner) if owner else nothing
            if value is not None:
                row.extend([""] * (column + 1 - len(row)))
                row[column] = value
        placed = set(owners.values())
        for student in sorted(s.id for s in gb.students if s.id not in placed):
            if plugin.points(gb, name, student) is not None:
                left.append(
                    f"{student}: the grade of {name} is not written, no row of the export is "
                    "theirs (is the student enrolled in the LMS course, with the LMS user id "
                    "or email of the roster?)"
                )
    return left
