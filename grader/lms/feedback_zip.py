"""``course feedback ASSIGNMENT --zip``: each student's feedback in one zip, named for the LMS.

The names come from what ``course collect`` recorded of the student's files
(``downloaded/ASSIGNMENT/lms.json``): the LMS's class names each file from the student's
download prefix (:meth:`grader.lms.base.LmsSystem.feedback_entry`) and says what else of the
download its upload wants back (:meth:`grader.lms.base.LmsSystem.feedback_extras`).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.lms import system
from grader.lms.collect import read_record
from grader.shared.paths import CourseError


def pack(root: Path, assignment: str) -> tuple[Path, list[str], list[str]]:
    """Write ``feedback-ASSIGNMENT-LMS.zip``; return it, the students packed, and a line for
    each student with feedback that could not be named (not collected from the LMS)."""
    record = read_record(root, assignment)
    if not record:
        raise CourseError(
            f"nothing of {assignment} was collected from an LMS (no downloaded/{assignment}/"
            "lms.json): run `course collect` first, so the feedback can be named for upload."
        )
    lms, students = record["lms"], record["students"]
    lms_class = system(lms)
    path = root / f"feedback-{assignment}-{lms}.zip"
    packed, left = [], []
    download = root / "downloaded" / assignment / "extracted" / "submissions"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, file in lms_class.feedback_extras(download).items():
            archive.write(file, name)
        for folder in sorted((root / "feedback").glob(f"*/{assignment}")):
            student = folder.parent.name
            pages = sorted(folder.glob("*.html"))
            if student not in students:
                left.append(f"{student} (not in the {lms_class.title} download)")
                continue
            for page in pages:
                entry = lms_class.feedback_entry(students[student]["prefix"], page.stem)
                archive.write(page, entry)
            packed.append(student)
    return path, packed, left
