"""What grading the demo class produces, as plain data, and its recorded copy.

:func:`outcome` reads a graded course (the ``graded_class`` fixture of ``tests/conftest.py``):
for every demo student it graded, each autograded test cell's score, maximum and the message a
student sees, the lines of ``grading_report.csv`` and the grade table. ``tests/test_demo_class.py``
compares it with ``tests/graded_class.json``, recorded from a run of the pipeline, so that a
change to ``grader/`` that should not change behaviour is seen to change none of it.

Record it again (after a change to the course that changes what grading gives, never to make a
refactoring pass)::

    python -m tests.graded_class_record          # grades the class once, about 8 min on 2 cores

``COURSE_ASSIGNMENTS`` narrows both the run and the comparison.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from grader.coordinator import demo, pipeline
from grader.selfstudy.check import error_message
from grader.shared import report
from tests.conftest import ASSIGNMENTS, make_course_copy, pipeline_students

RECORD = Path(__file__).with_name("graded_class.json")


def autograded_cells(root: Path, assignment: str, student: str) -> dict[str, dict]:
    """grade_id -> {score, max, message} for every autograded test cell of a student."""
    cells = {}
    folder = root / "autograded" / student / assignment
    with Gradebook(pipeline.db_url(root)) as gb:
        for path in sorted(folder.glob("*.ipynb")):
            nb = nbformat.read(str(path), as_version=4)
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader", {})
                if not meta.get("grade") or cell.cell_type != "code":
                    continue
                grade = gb.find_grade(meta["grade_id"], path.stem, assignment, student)
                cells[meta["grade_id"]] = {
                    "score": grade.score,
                    "max": grade.max_score,
                    "message": error_message(cell) if grade.score < grade.max_score else "",
                }
    assert cells, f"no autograded notebooks for {student} in {folder}"
    return cells


def outcome(root: Path, assignments: list[str]) -> dict:
    """Cells, report lines and grade table of every assignment in ``assignments`` at ``root``."""
    cells = {
        f"{assignment}/{student}": autograded_cells(root, assignment, student)
        for assignment in assignments
        for student in pipeline_students(assignment)
    }
    lines = [r for r in report.read(root) if r["assignment"] in assignments]
    rows = [row for row in pipeline.grade_rows(root) if row.assignment in assignments]
    return {
        "cells": cells,
        "report": [{k: v for k, v in r.items()} for r in lines],
        "grade_table": pipeline.format_grade_table(rows).splitlines(),
    }


def recorded(assignments: list[str]) -> dict:
    """The recorded outcome, narrowed to ``assignments`` and to the students that
    :func:`tests.conftest.pipeline_students` grades now (the record may hold more: one made when
    more students were graded stays valid). The grade table is then compared by its rows of
    those students, blanks collapsed (:func:`table_rows`)."""
    data = json.loads(RECORD.read_text())
    graded = {(a, s) for a in assignments for s in pipeline_students(a)}
    data["cells"] = {k: v for k, v in data["cells"].items() if tuple(k.split("/", 1)) in graded}
    data["report"] = [r for r in data["report"] if (r["assignment"], r["student"]) in graded]
    if set(assignments) != {r["assignment"] for r in json.loads(RECORD.read_text())["report"]}:
        data["grade_table"] = None  # narrowed: the table's columns differ
    return data


def table_rows(lines: list[str], students: set[str]) -> list[str]:
    """The grade table's rows of ``students``, each with its blanks collapsed."""
    rows = [" ".join(line.split()) for line in lines]
    return [row for row in rows if row.split(" ", 1)[0] in students]


def main() -> int:
    """Grade the class as ``graded_class`` does and write :data:`RECORD`."""
    with tempfile.TemporaryDirectory(prefix="course-record-") as folder:
        root = make_course_copy(Path(folder) / "course")
        demo.run(root, ASSIGNMENTS, jobs=2, say=print, choose=pipeline_students)
        data = outcome(root, ASSIGNMENTS)
    RECORD.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
