"""Grades go out only when they are final, and never with a demo student among them.

``course grades --lms`` calls :func:`require_final` before it writes the LMS's file: it refuses
(exit 2, naming them) while written answers of the exported assignments are not graded by hand,
unless ``--allow-ungraded`` (counting only the students that LMS's file takes: an assignment
collected from several LMSs leaves the others to their own LMS's file; :func:`exported_anyway`
names, after the export, those whose score was written); and while the gradebook holds a demo
student (``reference``, ``blank`` or a ``demo/`` name: a demo graded in the course folder by an
older ``make demo``), except in the demo's own folder.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from nbgrader.api import Gradebook

from grader.coordinator import demo
from grader.shared.paths import CourseError, db_url


def ungraded(root: Path, assignments: list[str] | None = None) -> dict[str, list[str]]:
    """By assignment, the students whose written answers still wait for a hand grade."""
    found: dict[str, list[str]] = {}
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for assignment in gb.assignments:
            if assignments and assignment.name not in assignments:
                continue
            waiting = sorted(s.student.id for s in assignment.submissions if s.needs_manual_grade)
            if waiting:
                found[assignment.name] = waiting
    return found


def demo_students(root: Path) -> list[str]:
    """The demo students in the gradebook ([] in the demo's own folder, where they belong)."""
    if demo.is_demo_course(root):
        return []
    known = demo.student_ids(root)
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        return sorted(s.id for s in gb.students if s.id in known)


def require_final(
    root: Path, assignments: list[str], allow_ungraded: bool, lms: str = ""
) -> dict[str, list[str]]:
    """Refuse (:class:`CourseError`) to export while demo students are in the gradebook, or while
    written answers wait and ``allow_ungraded`` is not given; return those that wait (by
    assignment), of ``lms``'s students only (those collected from another LMS left out)."""
    present = demo_students(root)
    if present:
        raise CourseError(
            f"the gradebook holds {len(present)} demo students ({_names(present)}): a demo was "
            "graded in this course folder. Remove each with `course forget STUDENT --yes` "
            "(`make demo` now grades in demo-course/), then export again"
        )
    waiting = ungraded(root, assignments)
    if lms:
        from grader.lms.collect import elsewhere  # loads nbgrader: an LMS command's

        for assignment, students in list(waiting.items()):
            others = elsewhere(root, assignment, lms)
            waiting[assignment] = [s for s in students if s not in others]
        waiting = {a: w for a, w in waiting.items() if w}
    lines = [
        f"{a}: written answers not graded yet for {len(s)} students: {_names(s)}"
        for a, s in sorted(waiting.items())
    ]
    if lines and not allow_ungraded:
        raise CourseError(
            "; ".join(lines) + ". Grade them in formgrader (`course lab`, Nbgrader > Formgrader "
            "> Manual Grading), or export anyway with --allow-ungraded (their written answers "
            "count 0)"
        )
    return waiting


def exported_anyway(waiting: dict[str, list[str]], written: set[tuple[str, str]]) -> list[str]:
    """A line per assignment whose file got a score with written answers not graded yet
    (``--allow-ungraded``), naming those students."""
    lines = []
    for assignment, students in sorted(waiting.items()):
        sent = [s for s in students if (assignment, s) in written]
        if sent:
            lines.append(
                f"exported anyway (--allow-ungraded): {assignment}: written answers not graded "
                f"yet for {len(sent)} students, sent with 0 for them: {_names(sent)}"
            )
    return lines


def _names(students: list[str], shown: int = 10) -> str:
    more = f" and {len(students) - shown} more" if len(students) > shown else ""
    return ", ".join(students[:shown]) + more
