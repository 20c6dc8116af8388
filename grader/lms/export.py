"""Grades out, in the CSV each LMS imports: nbgrader export plugins of the course.

``course grades --lms canvas|moodle --out FILE`` runs one of them on the course gradebook; so
does nbgrader's own command, ``nbgrader export --exporter=grader.lms.export.CanvasExport
--to FILE``. Each writes one row per student of the roster (the gradebook's students) and one
column per assignment. A score is nbgrader's, less the late penalty that autograding recorded
(``AssignLatePenalties`` with the course's ``LateSubmissionPlugin``), computed again here on the
notebook's current score: nbgrader computes it when autograding, before the written answers
are graded by hand, so a penalty that depends on the score (``penalty_method = "zero"``) would
leave the manual points in. A student who submitted nothing gets 0, or an empty cell with
``missing = "empty"``.

- Canvas (Grades > Import): ``Student, ID, SIS User ID, SIS Login ID, Section``, then a column
  per assignment, and a ``Points Possible`` row. Canvas finds a student by ``ID`` (the Canvas user
  id: the roster's ``lms_user_id``, or what ``course collect`` recorded) or ``SIS User ID`` (the
  course's student id).
- Moodle (Grades > Import > CSV file): ``First name, Last name, ID number, Email address``, then a
  column per assignment; map "Email address" (or "ID number") to the user when importing.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import AssignLatePenalties
from traitlets import Enum

from grader.gradebook import sqlite_file
from grader.paths import CourseError, db_url, load_config


class LmsExport(ExportPlugin):
    """A row per roster student, a column per assignment (see the module)."""

    missing = Enum(["zero", "empty"], "zero", help="what a student who submitted nothing gets").tag(
        config=True
    )
    default_file = "grades-lms.csv"

    def header(self, assignments: list) -> list[list[str]]:
        """The header row(s) of the CSV."""
        raise NotImplementedError

    def identity(self, student: object) -> list[str]:
        """The cells that name a student, before the scores."""
        raise NotImplementedError

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to ``self.to`` (nbgrader's ``--to``)."""
        assignments = sorted(
            (a for a in gradebook.assignments if not self.assignment or a.name in self.assignment),
            key=lambda a: a.name,
        )
        students = [s for s in gradebook.students if not self.student or s.id in self.student]
        with open(self.to or self.default_file, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerows(self.header(assignments))
            for student in sorted(students, key=lambda s: s.id):
                cells = [self.score(gradebook, a.name, student.id) for a in assignments]
                writer.writerow(self.identity(student) + cells)

    def score(self, gradebook: Gradebook, assignment: str, student: str) -> str:
        """The student's score, late penalty applied ('' or '0' for no submission)."""
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return "" if self.missing == "empty" else "0"
        if submission.needs_manual_grade:
            self.log.warning("%s/%s: written answers not graded yet", student, assignment)
        return f"{max(0.0, submission.score - self.penalty(submission)):g}"

    def penalty(self, submission: object) -> float:
        """The late penalty of a submission: the course's ``LateSubmissionPlugin`` on each
        notebook's current score (as ``AssignLatePenalties``), or what grading recorded."""
        late = submission.total_seconds_late
        if not late:
            return 0.0
        plugin = AssignLatePenalties(parent=self).plugin_class(parent=self)
        total = 0.0
        for notebook in submission.notebooks:
            penalty = plugin.late_submission_penalty(submission.student.id, notebook.score, late)
            if penalty is None:
                penalty = notebook.late_submission_penalty or 0.0
            total += min(max(penalty, 0.0), notebook.score)
        return total


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


class MoodleExport(LmsExport):
    """Moodle's grade import CSV."""

    default_file = "grades-moodle.csv"

    def header(self, assignments: list) -> list[list[str]]:
        names = ["First name", "Last name", "ID number", "Email address"]
        return [names + [a.name for a in assignments]]

    def identity(self, student: object) -> list[str]:
        return [student.first_name or "", student.last_name or "", student.id, student.email or ""]


EXPORTERS = {"canvas": CanvasExport, "moodle": MoodleExport}


def export(root: Path, lms: str, out: Path, missing: str = "zero") -> Path:
    """Write the course's grades to ``out`` as ``lms`` imports them; return ``out``."""
    url = db_url(root)
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise CourseError(f"no gradebook at {file}: release and autograde something first.")
    plugin = EXPORTERS[lms](to=str(out), missing=missing, config=load_config(root))
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        if not gb.students:
            raise CourseError(
                "the gradebook has no students: import the roster (nbgrader db student import "
                "ROSTER.csv) or collect submissions first."
            )
        plugin.export(gb)
    return out
