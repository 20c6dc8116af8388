"""The course gradebook on any database nbgrader supports, and the workers' private copies.

Each submission is graded by its own ``nbgrader autograde`` against a private sqlite gradebook
(:mod:`grader.coordinator.grading`); its scores are then copied into the course gradebook
(:func:`copy_submission`). With an sqlite course gradebook the private copy is a copy of its file.
With a database server (``COURSE_DB=postgresql+psycopg2://...``) the grader writes, once per run, a
snapshot of the one assignment being graded (its notebooks and cells, as ``course release`` recorded
them) into an sqlite file that each worker copies: workers never hold the database's credentials,
and only the coordinator writes to the server.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import OperationalError

from grader.shared.paths import CourseError


def sqlite_file(url: str) -> Path | None:
    """The file of an sqlite gradebook URL, or None for a database server."""
    prefix = "sqlite:///"
    return Path(url[len(prefix) :]) if url.startswith(prefix) else None


def snapshot(url: str, assignment: str, path: Path) -> Path:
    """Write to ``path`` an sqlite gradebook holding ``assignment`` as the gradebook at ``url`` has
    it (notebooks, grade, solution, task and source cells); return ``path``."""
    path.unlink(missing_ok=True)
    with warnings.catch_warnings(), Gradebook(url) as src, Gradebook(f"sqlite:///{path}") as dst:
        warnings.simplefilter("ignore")  # nbgrader's harmless SQLAlchemy autoflush warnings
        original = src.find_assignment(assignment)
        dst.update_or_create_assignment(assignment, duedate=original.duedate)
        for notebook in original.notebooks:
            dst.update_or_create_notebook(notebook.name, assignment)
            graded = [(notebook.grade_cells, dst.update_or_create_grade_cell)]
            graded += [(notebook.task_cells, dst.update_or_create_task_cell)]
            for cells, create in graded:
                for cell in cells:
                    create(
                        cell.name, notebook.name, assignment,
                        max_score=cell.max_score, cell_type=cell.cell_type,
                    )  # fmt: skip
            for cell in notebook.solution_cells:
                dst.update_or_create_solution_cell(cell.name, notebook.name, assignment)
            for cell in notebook.source_cells:
                dst.update_or_create_source_cell(
                    cell.name, notebook.name, assignment,
                    cell_type=cell.cell_type, locked=cell.locked,
                    source=cell.source, checksum=cell.checksum,
                )  # fmt: skip
    return path


def require_assignment(url: str, assignment: str) -> None:
    """Fail with a clear message unless the gradebook at ``url`` opens and has ``assignment``."""
    try:
        gradebook_of = Gradebook(url)
    except OperationalError as error:
        where = url.split("@")[-1]  # never print a password
        reason = str(error.orig).strip().splitlines()[0] if error.orig else "no details"
        raise CourseError(f"cannot open the gradebook database at {where}: {reason}") from None
    with gradebook_of as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(
                f"assignment '{assignment}' is not in the gradebook: run `course release "
                f"{assignment}` first."
            ) from None


def record_empty(url: str, assignment: str, student: str) -> None:
    """A submission with nothing to grade appears in the gradebook with 0 points (once)."""
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.update_or_create_student(student)
            gb.add_submission(assignment, student)


def copy_submission(source_url: str, target_url: str, assignment: str, student: str) -> None:
    """Copy one graded submission (scores, comments, flags) from one gradebook to another."""
    with warnings.catch_warnings():
        # nbgrader's update_or_create_submission triggers harmless SQLAlchemy autoflush warnings.
        warnings.simplefilter("ignore")
        _copy_submission(source_url, target_url, assignment, student)


def _copy_submission(source_url: str, target_url: str, assignment: str, student: str) -> None:
    with Gradebook(source_url) as src, Gradebook(target_url) as dst:
        try:
            submission = src.find_submission(assignment, student)
        except MissingEntry:
            return
        person = src.find_student(student)
        dst.update_or_create_student(
            student,
            first_name=person.first_name,
            last_name=person.last_name,
            email=person.email,
            lms_user_id=person.lms_user_id,
        )
        dst.update_or_create_submission(
            assignment, student, timestamp=submission.timestamp, extension=submission.extension
        )
        for notebook in submission.notebooks:
            _copy_notebook(
                notebook, dst.find_submission_notebook(notebook.name, assignment, student)
            )
            for grade in notebook.grades:
                _copy_grade(grade, dst.find_grade(grade.name, notebook.name, assignment, student))
            for comment in notebook.comments:
                row = dst.find_comment(comment.name, notebook.name, assignment, student)
                row.auto_comment = comment.auto_comment
                row.manual_comment = comment.manual_comment
        dst.db.commit()


def _copy_notebook(notebook: object, target: object) -> None:
    target.flagged = notebook.flagged
    target.late_submission_penalty = notebook.late_submission_penalty


def _copy_grade(grade: object, row: object) -> None:
    row.auto_score = grade.auto_score
    row.manual_score = grade.manual_score
    row.extra_credit = grade.extra_credit
    row.needs_manual_grade = grade.needs_manual_grade
