"""Grades into the instructor's own LMS gradebook: the CSV that the LMS exported, filled in and
written back as it came (its rows, columns, separator, encoding, byte order mark, quotes and
line ends), so that the LMS imports it as it is.

What is the LMS's own (which column is an assignment's, which row is whose, whether the file
is its export at all) is asked of the LMS's class (:meth:`grader.lms.base.LmsSystem.gradebook`);
here are the file, the column search they share, and the writing of the cells.

The column of an assignment is the one whose title is its name (letters and digits compared:
``A Masks (4711)`` for ``a_masks``), or the one given with ``--assignment NAME=COLUMN``.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from pathlib import Path

from nbgrader.api import Gradebook

from grader.lms import system
from grader.lms.base import GradebookFile, Sheet
from grader.shared.paths import CourseError

BOMS = [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be")]  # fmt: skip


def read_sheet(path: Path) -> Sheet:
    """The CSV at ``path``, with how it was written: UTF-8 or UTF-16 (by its byte order mark,
    or without one by its zero bytes), separated by ``,``, ``;`` or a tab."""
    if not path.is_file():
        raise CourseError(f"no gradebook export at {path}: export the gradebook from the LMS.")
    raw = path.read_bytes()
    bom, encoding = next(((b, e) for b, e in BOMS if raw.startswith(b)), (b"", "utf-8"))
    if not bom and b"\x00" in raw[:400]:  # UTF-16 without a byte order mark
        encoding = "utf-16-be" if raw[:1] == b"\x00" else "utf-16-le"
    try:
        text = raw[len(bom) :].decode(encoding)
    except UnicodeDecodeError:
        raise CourseError(f"{path} is not UTF-8 or UTF-16 text: export it again.") from None
    delimiter = _delimiter(text)
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    newline = "\r\n" if "\r\n" in text else "\n"
    first = text.split("\n", 1)[0].rstrip("\r")
    quoted = bool(first) and all(
        len(c) > 1 and c[0] == c[-1] == '"' for c in first.split(delimiter)
    )  # a header with a quoted separator inside reads as unquoted: written as csv would
    return Sheet(rows, delimiter, bom, newline, encoding, quoted)


def write_sheet(sheet: Sheet, path: Path) -> None:
    """Write ``sheet`` as it was read."""
    buffer = io.StringIO()
    quoting = csv.QUOTE_ALL if sheet.quote_all else csv.QUOTE_MINIMAL
    writer = csv.writer(
        buffer, delimiter=sheet.delimiter, lineterminator=sheet.newline, quoting=quoting
    )
    writer.writerows(sheet.rows)
    path.write_bytes(sheet.bom + buffer.getvalue().encode(sheet.encoding))


def _delimiter(text: str) -> str:
    """';', ',' or a tab, as Canvas's importer decides between the first two
    (``identify_delimiter``): the one that splits the first records into as many fields each,
    the more fields winning (records, not lines: a Moodle comment may hold a line break)."""
    counts = {}
    for separator in (";", ",", "\t"):
        records = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
        sizes = {len(row) for _, row in zip(range(3), records, strict=False)}
        counts[separator] = sizes.pop() if len(sizes) == 1 else 0
    return max((",", ";", "\t"), key=lambda s: counts[s])  # a tie: ',' (max keeps the first)


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
    names = [a.name for a in plugin.chosen(gb)]
    export = GradebookFile(sheet, names, columns, gb, root, source)
    targets, owners = system(lms).gradebook(export)
    left = _write_cells(sheet, plugin, gb, targets, owners)
    write_sheet(sheet, out)
    return left


def header_index(header: list[str], *names: str) -> int | None:
    """The first column whose header is one of ``names`` (case, spaces and '#' aside)."""
    plain = [re.sub(r"[\s#]", "", n).lower() for n in names]
    return next((i for i, h in enumerate(header) if re.sub(r"[\s#]", "", h).lower() in plain), None)


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
        placed = set(owners.values()) | plugin.elsewhere.get(name, set())
        for student in sorted(s.id for s in gb.students if s.id not in placed):
            if plugin.points(gb, name, student) is not None:
                left.append(
                    f"{student}: the grade of {name} is not written, no row of the export is "
                    "theirs (is the student enrolled in the LMS course, with the LMS user id "
                    "or email of the roster?)"
                )
    return left
