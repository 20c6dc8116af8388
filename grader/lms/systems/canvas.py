"""Canvas: its "Download Submissions" zip, its gradebook export and import, its "Upload
Submissions" of feedback, each as instructure/canvas-lms's own code writes and reads them.

- Download (the assignment's page, "Download Submissions"; ``lib/content_zipper.rb`` at
  05e9653c12: ``get_filename``, ``add_upload_submission``, ``sanitize_user_name``): one flat
  folder of ``NAME_[LATE_]USERID_ATTACHMENTID_FILENAME``. NAME is the student's sortable name
  lower-cased with every non-word character removed (``smithjane``); an underscore is a word
  character, so NAME may keep one (``o_brienmary``; Canvas only removes a ``_digits_`` run from
  it). With anonymous grading there is no NAME and the id is ``anon_`` and the submission's
  anonymous id: ``[LATE_]anon_x7k2P_ATTACHMENTID_FILENAME`` (older Canvas wrote the user id
  without the name, and lower-cased the whole prefix: ``late`` is read as well). A file
  uploaded again under the same name is ``NAME-1.ipynb``, ``NAME-2.ipynb``, ... (the highest
  number is the latest). Canvas marks a late submission but gives no time: it is recorded one
  second after nbgrader's due date.
- Gradebook export (Grades, Export; ``lib/gradebook_exporter.rb``): ``Student`` (or
  ``LastName, FirstName``), ``ID``, [``SIS User ID``], ``SIS Login ID``, [``Integration ID``],
  [``Root Account``], ``Section``, the custom columns, an assignment per column headed
  ``Title (id)``, then the totals; a row of "Manual Posting" marks when some assignment is
  posted by hand, then ``    Points Possible``, then a row per student.
  ``lib/gradebook_importer.rb`` finds a student by ``ID`` (then SIS ids, then name) and an
  assignment by the id in its header; it skips those rows, the totals and each unchanged cell,
  and reads ``;`` or ``,`` separated files and decimal commas. Here a row's student is the
  roster's with that Canvas user id (``lms_user_id``), else the one whose id is the SIS User ID
  or SIS Login ID, else the one of that email or name.
- A new import file: ``Student, ID, SIS User ID, SIS Login ID, Section``, a column per
  assignment (Canvas matches ``Title (canvas id)``, else the exact title) and a ``Points
  Possible`` row.
- Feedback ("Upload Submissions" of the assignment's page, the same zip form as its download):
  flat, ``lastfirst_userid_submissionid_NOTEBOOK_feedback.html``; Canvas attaches each file to
  the submission of the user id in its name, as a comment.
"""

from __future__ import annotations

import re
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

from grader.lms.base import ANY_FOLDER, GradebookFile, LmsFile, LmsSystem, named
from grader.lms.export import LmsExport
from grader.shared.paths import CourseError

LATE = r"[Ll][Aa][Tt][Ee]"
ANONYMOUS = "anon_"  # Canvas's id of a student of an anonymously graded assignment
TITLE_AND_ID = re.compile(r"^(.*)\s\((\d+)\)$")  # Canvas's Assignment.title_and_id


class CanvasFileNames(FileNameCollectorPlugin):
    """Canvas's ``name_[LATE_]userid_attachmentid_file[-N].ext`` and, graded anonymously,
    ``[LATE_]anon_ID_attachmentid_file[-N].ext``."""

    named_regexp = Unicode(
        ANY_FOLDER + rf"(?:(?P<anon_late>{LATE})_(?=anon_))?(?:(?!anon_|\d+_)(?P<name>[^/]+?)_)?"
        rf"(?:(?P<late>{LATE})_)?(?P<student_id>\d+|anon_[A-Za-z0-9]+)_(?P<submission_id>\d+)_"
        r"(?P<file_id>[^/]+?)(?:-(?P<attempt>\d+))?(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


class CanvasExport(LmsExport):
    """Canvas's gradebook import CSV."""

    default_file = "grades-canvas.csv"

    def header(self, assignments: list) -> list[list[str]]:
        names = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
        points = ["Points Possible", "", "", "", ""]
        return [
            names + [a.name for a in assignments],
            points + [f"{a.max_score:g}" for a in assignments],
        ]

    def identity(self, student: object) -> list[str]:
        name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
        return [name, student.lms_user_id or "", student.id, "", ""]


class Canvas(LmsSystem):
    """Canvas (see the module)."""

    name = "canvas"
    title = "Canvas"
    download_steps = "the assignment's page, 'Download Submissions'"
    times_note = "Canvas marks lateness in its file names."
    exporter = CanvasExport

    def parse(self, relative: str) -> LmsFile | None:
        match = named(CanvasFileNames().named_regexp, relative)
        if match is None:
            return None
        own = match["file_id"] + (f"-{match['attempt']}" if match["attempt"] else "")
        full = relative.rsplit("/", 1)[-1]
        name, late = match["name"], bool(match["late"] or match["anon_late"])
        if name.lower() == "late" and not late:  # [LATE_]userid_..., no name
            name, late = "", True
        return LmsFile(
            path=relative,
            lms_id=match["student_id"],
            name=name,
            stem=match["file_id"],
            ext=match["ext"].lower(),
            attempt=int(match["attempt"] or 0),
            submission_id=int(match["submission_id"] or 0),
            late=late,
            prefix=full[: len(full) - len(own + match["ext"])],
            anonymous=match["student_id"].startswith(ANONYMOUS),
        )

    def lasting_id(self, chosen: LmsFile) -> str:
        """The Canvas user id (not an anonymous id, which is the submission's)."""
        return "" if chosen.anonymous else chosen.lms_id

    def split_name(self, name: str) -> tuple[str, str]:
        return "", ""  # Canvas's "lastfirst" cannot be split

    def gradebook(self, export: GradebookFile) -> tuple[dict[str, int], dict[int, str | None]]:
        _check_header(export.header, export.source)
        return export.assignment_columns(_titles), _owners(export.sheet.rows, export.gb)

    def feedback_entry(self, prefix: str, notebook: str) -> str:
        return f"{prefix}{notebook}_feedback.html"  # the download's own name: Canvas matches it


def _titles(header: str) -> tuple[str, str] | None:
    """An assignment column's title and Canvas id (``Title (id)``); None for other columns."""
    match = TITLE_AND_ID.match(header)
    return (match.group(1), match.group(2)) if match else None


def _check_header(header: list[str], source: Path) -> None:
    """Canvas's importer's test of a header (``row_has_student_headers?``)."""
    plain = len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    split = len(header) > 4 and header[:2] == ["LastName", "FirstName"] and "ID" in header[2]
    if not (plain or split):
        raise CourseError(
            f"{source} is not a Canvas gradebook export (its first columns are not Student, ID): "
            "export it from Canvas's Gradebook (Export, Export Entire Gradebook)."
        )


def _owners(rows: list[list[str]], gb: Gradebook) -> dict[int, str | None]:
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
