"""The grading pipeline, one function per step: the facade the command line, the demo and the tests
call (as nbgrader's ``apps/api.py`` is to its apps).

- :func:`release`: ``nbgrader generate_assignment``, source/ -> release/
(:mod:`grader.coordinator.release`);
- :func:`autograde`: every submission, N at a time or on a Dask cluster, each in its own
  sandboxed ``nbgrader autograde`` process, merged into the gradebook one student at a time
  (:mod:`grader.coordinator.autograde`, :mod:`grader.coordinator.grading`,
  :mod:`grader.coordinator.cluster`);
  :func:`autograde_classes` grades several assignments in one pool (`course demo`);
- :func:`feedback`: ``nbgrader generate_feedback`` without the hidden tests
  (:mod:`grader.coordinator.feedback`);
- :func:`grade_rows`, :func:`format_grade_table`, :func:`write_grades_csv`: the grade table
  (:mod:`grader.coordinator.grade_table`).

Each step lives in its own module; this one only gathers them.
"""

from __future__ import annotations

from grader.coordinator.autograde import autograde, autograde_classes
from grader.coordinator.feedback import feedback
from grader.coordinator.grade_table import (
    GradeRow,
    format_grade_table,
    grade_rows,
    write_grades_csv,
)
from grader.coordinator.grading import Graded
from grader.coordinator.release import release
from grader.shared.paths import db_url
from grader.shared.report import Event

__all__ = [
    "Event",
    "GradeRow",
    "Graded",
    "autograde",
    "autograde_classes",
    "db_url",
    "feedback",
    "format_grade_table",
    "grade_rows",
    "release",
    "write_grades_csv",
]
