"""Grades go out only when they are final, and never with a demo student among them.

``course grades --lms`` calls :func:`require_final` before it writes the LMS's file: it refuses
(exit 2, naming them) while written answers of the exported assignments are not graded by hand,
unless ``--allow-ungraded``; and while the gradebook holds a demo student (``reference``,
``blank`` or a ``demo/`` name: a demo graded in the course folder by an older ``make demo``),
except in the demo's own folder.
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


def require_final(root: Path, assignments: list[str], allow_ungraded: bool) -> list[str]:
    """Refuse (:class:`CourseError`) to export while demo students are in the gradebook, or while
    written answers wait and ``allow_ungraded`` is not given; return the lines to print."""
    present = demo_students(root)
    if present:
        raise CourseError(
            f"the gradebook holds {len(present)} demo students ({_names(present)}): a demo was "
            "graded in this course folder. Remove each with `course forget STUDENT --yes` "
            "(`make demo` now grades in demo-course/), then export again"
        )
    waiting = ungraded(root, assignments)
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
    return [f"exported anyway (--allow-ungraded): {line}" for line in lines]


def _names(students: list[str], shown: int = 10) -> str:
    more = f" and {len(students) - shown} more" if len(students) > shown else ""
    return ", ".join(students[:shown]) + more
