"""The grading report: one line per student and notebook saying what happened.

``grading_report.csv`` in the course folder keeps the latest line of every (assignment, student,
notebook): graded, flagged (tampering; no points), for review (the kernel's check and the judge's
disagree on random draws only: points kept, each such cell needing a manual grade), timed out (a
cell ran past the time limit and ignored the interrupt, or the submission's time was spent:
graded with the points of the cells before it), over quota (graded; files over the disk quota
removed), not graded (the run failed or passed a limit; earlier scores are kept), missing
notebook, or ignored (a notebook that is not part of the assignment). ``course grades`` prints
the lines that are not plain "graded".
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FIELDS = ["assignment", "student", "notebook", "status", "points", "max_points", "detail"]
FILE = "grading_report.csv"


@dataclass
class Event:
    """One line of the grading report: what happened to one notebook of one student."""

    assignment: str
    student: str
    notebook: str
    # graded, flagged, for review, timed out, over quota, not graded, missing notebook, ignored
    status: str
    points: float | None
    max_points: float | None
    detail: str = ""


def read(root: Path) -> list[dict[str, str]]:
    """Every line of the report (empty when nothing was graded yet)."""
    path = root / FILE
    if not path.is_file():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def update(root: Path, events: Iterable[Event]) -> None:
    """Replace the lines of the (assignment, student) pairs in ``events`` by ``events``."""
    events = list(events)
    if not events:
        return
    replaced = {(e.assignment, e.student) for e in events}
    rows = [r for r in read(root) if (r["assignment"], r["student"]) not in replaced]
    rows += [{f: _text(getattr(e, f)) for f in FIELDS} for e in events]
    rows.sort(key=lambda r: (r["assignment"], r["student"], r["notebook"]))
    with (root / FILE).open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def problems(root: Path) -> list[dict[str, str]]:
    """The lines that need the instructor's attention."""
    return [r for r in read(root) if r["status"] != "graded"]


def format_line(row: dict[str, str]) -> str:
    """One report line as text: student, notebook, what happened, points."""
    points = f"{row['points'] or 0}/{row['max_points']}" if row["max_points"] else "0 points"
    detail = f": {row['detail']}" if row["detail"] else ""
    where = f"{row['assignment']}/{row['notebook']}"
    return f"{row['student']}  {where}  {row['status'].upper()} ({points}){detail}"
