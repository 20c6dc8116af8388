"""What grading records of each submission for the class report (``course report``).

One JSON file per (assignment, student), ``grading_records/ASSIGNMENT/STUDENT.json`` in the course
folder, written by the coordinator when it merges a graded submission
(:func:`grader.coordinator.grading.merge`), outside the student's folder (a submission cannot plant
one):

    {"seconds": 12.3, # the time the submission took to grade
     "notebooks": {NOTEBOOK: {
         "verdicts": {GRADE_ID: None | "why it fails"}, # the trusted judge's "mistakes": {GRADE_ID:
         {"key": KEY, "message": TEXT}}, "refused": ""}}}

``KEY`` is the stable key of the check that failed (:func:`course.testcells.mistake_key`), as the
judge recorded it where it made the verdict: the class report counts mistakes by key and never reads
the text of an output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader.shared.verification import Verification

FOLDER = "grading_records"


def of(seconds: float, verifications: dict[str, Verification]) -> dict:
    """The record of one graded submission: its grading time and each notebook's verdicts."""
    notebooks = {
        name: {"verdicts": v.verdicts, "mistakes": v.mistakes, "refused": v.refused}
        for name, v in sorted(verifications.items())
    }
    return {"seconds": round(float(seconds), 3), "notebooks": notebooks}


def path(root: Path, assignment: str, student: str) -> Path:
    """Where the record of ``student``'s submission of ``assignment`` is kept."""
    return Path(root) / FOLDER / assignment / f"{student}.json"


def write(root: Path, assignment: str, student: str, record: dict) -> None:
    """Keep ``record`` (replacing the earlier one, atomically)."""
    target = path(root, assignment, student)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(".json.new")
    temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(temporary, target)


def add_notebook(
    root: Path, assignment: str, student: str, notebook: str, verification: Verification
) -> None:
    """Keep one notebook's verdicts in the student's record (plain ``nbgrader autograde`` and
    formgrader's button, which judge notebook by notebook: no grading time is known there)."""
    try:
        record = json.loads(path(root, assignment, student).read_text())
    except (OSError, ValueError):
        record = {"seconds": 0.0, "notebooks": {}}
    record.setdefault("notebooks", {}).update(of(0.0, {notebook: verification})["notebooks"])
    write(root, assignment, student, record)


def read_all(root: Path, assignment: str) -> dict[str, dict]:
    """Every kept record of ``assignment``, by student (an unreadable file is skipped)."""
    records = {}
    for file in sorted((Path(root) / FOLDER / assignment).glob("*.json")):
        try:
            records[file.stem] = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
    return records
