"""Grades out, in the CSV each LMS imports: nbgrader export plugins of the course.

``course grades --lms NAME --out FILE`` runs the LMS's plugin (its class's
:attr:`~grader.lms.base.LmsSystem.exporter`) on the course gradebook; so does nbgrader's own
command, ``nbgrader export --exporter=grader.lms.export.CanvasExport --to FILE`` (any LMS:
``TitleExport``). Each writes one row per student of the roster (the gradebook's students) and
one column per chosen assignment (``--assignment``; by default each assignment that someone
submitted); the LMS's plugin says the header and the cells that name a student. A score is
nbgrader's, less the late penalty that autograding recorded (``AssignLatePenalties`` with the
course's ``LateSubmissionPlugin``), computed again here on the notebook's current score:
nbgrader computes it when autograding, before the written answers are graded by hand, so a
penalty that depends on the score (``penalty_method = "zero"``) would leave the manual points
in. A student who submitted nothing (``missing``): ``skip`` (the default) leaves the cell as it
is (empty in a new file), ``blank`` empties it, ``zero`` writes 0.

An assignment collected from several LMSs: each LMS's file takes the grades of the students
collected from it (``elsewhere``: the others, whose cells are left as they are and who are never
"not written").

A new file has only nbgrader's names; the LMS's own gradebook export, filled in
(``--gradebook``, :mod:`grader.lms.fill`), has the LMS's ids and columns as well.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import AssignLatePenalties
from traitlets import Enum

from grader.books.gradebook import sqlite_file
from grader.lms import LMS_NAMES, system
from grader.shared.paths import CourseError, db_url, load_config

MISSING = ("skip", "blank", "zero")


class LmsExport(ExportPlugin):
    """A row per roster student, a column per assignment (see the module)."""

    missing = Enum(
        [*MISSING, "empty"],
        "skip",
        help="a student who submitted nothing: skip (cell left as it is; empty in a new file), "
        "blank (cell emptied), zero ('empty' is 'blank')",
    ).tag(config=True)
    default_file = "grades-lms.csv"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.elsewhere: dict[str, set[str]] = {}  # assignment -> students of another LMS
        self.written: set[tuple[str, str]] = set()  # (assignment, student) given a score

    def header(self, assignments: list) -> list[list[str]]:
        """The header row(s) of the CSV."""
        raise NotImplementedError

    def identity(self, student: object) -> list[str]:
        """The cells that name a student, before the scores."""
        raise NotImplementedError

    def row_end(self) -> list[str]:
        """The cells after a student's scores (none by default)."""
        return []

    def chosen(self, gradebook: Gradebook) -> list:
        """The assignments to export: nbgrader's ``--assignment`` list, else each assignment
        with a submission (sorted by name)."""
        names = {a.name for a in gradebook.assignments}
        unknown = sorted(set(self.assignment) - names)
        if unknown:
            raise CourseError(
                f"no assignment {', '.join(unknown)} in the gradebook (it has: "
                f"{', '.join(sorted(names)) or 'none'}): check --assignment."
            )
        picked = [
            a
            for a in gradebook.assignments
            if ((a.name in self.assignment) if self.assignment else a.submissions)
        ]
        if not picked:
            raise CourseError(
                "no assignment has a submission yet: autograde one first, or name one with "
                "--assignment."
            )
        return sorted(picked, key=lambda a: a.name)

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to ``self.to`` (nbgrader's ``--to``)."""
        assignments = self.chosen(gradebook)
        students = [s for s in gradebook.students if not self.student or s.id in self.student]
        with open(self.to or self.default_file, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerows(self.header(assignments))
            for student in sorted(students, key=lambda s: s.id):
                cells = [self.cell(gradebook, a.name, student.id) for a in assignments]
                writer.writerow(self.identity(student) + [c or "" for c in cells] + self.row_end())

    def cell(self, gradebook: Gradebook, assignment: str, student: str) -> str | None:
        """What to write for a student: the score, or for no submission '0', '' or None
        (``skip``: leave the cell as it is)."""
        if student in self.elsewhere.get(assignment, ()):
            return None  # another LMS's student: that LMS's file takes the grade
        points = self.points(gradebook, assignment, student)
        if points is not None:
            self.written.add((assignment, student))
            return f"{round(points, 2):g}"
        return {"zero": "0", "skip": None}.get(self.missing, "")

    def points(self, gradebook: Gradebook, assignment: str, student: str) -> float | None:
        """The student's score, late penalty applied; None when nothing was submitted."""
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return None
        if submission.needs_manual_grade:
            self.log.warning("%s/%s: written answers not graded yet", student, assignment)
        return max(0.0, submission.score - self.penalty(submission))

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


def __getattr__(attribute: str) -> type:
    """``grader.lms.export.CanvasExport`` and the like: each LMS's export plugin under the
    name that nbgrader's ``--exporter`` is given (``TitleExport``), from its LMS class."""
    for lms in LMS_NAMES:
        if attribute == f"{lms.title()}Export":
            return system(lms).exporter
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def plugin(root: Path, lms: str, out: Path, missing: str, assignments: list[str]) -> LmsExport:
    """The course's export plugin for ``lms``, configured as ``course grades`` asks."""
    return system(lms).exporter(
        to=str(out), missing=missing, assignment=list(assignments), config=load_config(root)
    )


def export(
    root: Path,
    lms: str,
    out: Path,
    missing: str = "skip",
    assignments: list[str] | None = None,
    gradebook_csv: Path | None = None,
    written: set[tuple[str, str]] | None = None,
) -> tuple[Path, list[str]]:
    """Write the course's grades to ``out`` as ``lms`` imports them: a new file, or the LMS's
    own gradebook export ``gradebook_csv`` filled in (:mod:`grader.lms.fill`); the students of
    an assignment collected from another LMS are left to that LMS's file. Return ``out`` and a
    line for each grade that could not be placed; ``written`` gets each (assignment, student)
    given a score."""
    from grader.lms.collect import elsewhere  # (nbgrader too)

    url = db_url(root)
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise CourseError(f"no gradebook at {file}: release and autograde something first.")
    columns = dict(split_choice(choice) for choice in assignments or [])
    chosen = plugin(root, lms, out, missing, list(columns))
    if written is not None:
        chosen.written = written
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        if not gb.students:
            raise CourseError(
                "the gradebook has no students: import the roster (nbgrader db student import "
                "ROSTER.csv) or collect submissions first."
            )
        chosen.elsewhere = {a.name: elsewhere(root, a.name, lms) for a in chosen.chosen(gb)}
        if gradebook_csv is None:
            chosen.export(gb)
            return out, []
        from grader.lms import fill  # the gradebook CSVs of the LMSs

        return out, fill.fill(root, lms, chosen, gb, gradebook_csv, out, columns)


def split_choice(choice: str) -> tuple[str, str]:
    """``--assignment NAME`` or ``NAME=COLUMN`` (the gradebook column that takes NAME's
    grades, e.g. ``a_masks=Masks and positions (4711)``): (NAME, COLUMN or '')."""
    name, _, column = choice.partition("=")
    if not name.strip():
        raise CourseError(f"--assignment {choice!r}: give NAME or NAME=COLUMN")
    return name.strip(), column.strip()
