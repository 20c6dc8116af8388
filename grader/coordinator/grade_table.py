"""``course grades``: the gradebook as a table (student x notebook) and as CSV."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook

from grader.books.gradebook import sqlite_file
from grader.shared.paths import CourseError, db_url


@dataclass
class GradeRow:
    """One student's score on one notebook of one assignment."""

    student: str
    assignment: str
    notebook: str
    score: float
    max_score: float
    auto_score: float
    needs_manual_grade: bool
    flagged: bool = False


def grade_rows(root: Path) -> list[GradeRow]:
    """Every graded (student, assignment, notebook) in the gradebook."""
    url = db_url(root)
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise CourseError(f"no gradebook at {file}: autograde something first.")
    rows = []
    with Gradebook(url) as gb:
        for assignment in gb.assignments:
            for notebook in assignment.notebooks:
                for sub in gb.notebook_submission_dicts(notebook.name, assignment.name):
                    rows.append(
                        GradeRow(
                            student=sub["student"],
                            assignment=assignment.name,
                            notebook=notebook.name,
                            score=float(sub["score"]),
                            max_score=float(sub["max_score"]),
                            auto_score=float(sub["code_score"]),
                            needs_manual_grade=bool(sub["needs_manual_grade"]),
                            flagged=bool(sub.get("flagged")),
                        )
                    )
    return sorted(rows, key=lambda r: (r.student, r.assignment, r.notebook))


def write_grades_csv(rows: list[GradeRow], path: Path) -> Path:
    """Write the grade rows to a CSV file (one line per student and notebook)."""
    fields = ["student", "assignment", "notebook", "score", "max_score", "auto_score"]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*fields, "needs_manual_grade", "flagged"])
        for r in rows:
            flags = [int(r.needs_manual_grade), int(r.flagged)]
            writer.writerow([getattr(r, f) for f in fields] + flags)
    return path


def format_grade_table(rows: list[GradeRow]) -> str:
    """A text table: one line per student, one column per notebook, 'points/max'.

    A star marks a notebook whose written answers are still to be graded by hand.
    """
    if not rows:
        return "(no graded submissions)"
    columns = sorted({(r.assignment, r.notebook) for r in rows})
    students = sorted({r.student for r in rows})
    cells = {(r.student, r.assignment, r.notebook): r for r in rows}
    header = ["student", *[f"{a}/{n}" for a, n in columns]]
    lines = [header]
    for student in students:
        line = [student]
        for a, n in columns:
            r = cells.get((student, a, n))
            line.append("-" if r is None else _points(r))
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    if any(r.needs_manual_grade for r in rows):
        text.append("* written answers not graded yet (formgrader); the score counts them as 0")
    return "\n".join(text)


def _points(row: GradeRow) -> str:
    star = "*" if row.needs_manual_grade else ""
    flag = " FLAGGED" if row.flagged else ""
    return f"{row.score:g}/{row.max_score:g}{star}{flag}"
