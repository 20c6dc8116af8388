"""``course feedback ASSIGNMENT --zip``: each student's feedback in one zip per LMS, named for it.

The names come from what ``course collect`` recorded of the student's files
(``downloaded/ASSIGNMENT/lms.json``): the LMS's class names each file from the student's
download prefix (:meth:`grader.lms.base.LmsSystem.feedback_entry`) and says what else of the
download its upload wants back (:meth:`grader.lms.base.LmsSystem.feedback_extras`). An
assignment collected from several LMSs gets a zip for each, ``feedback-ASSIGNMENT-LMS.zip``,
holding the students collected (last) from that LMS.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.lms import system
from grader.lms.collect import download_folder, read_record, students_of
from grader.shared.paths import CourseError


def pack(root: Path, assignment: str) -> tuple[list[tuple[Path, list[str]]], list[str]]:
    """Write ``feedback-ASSIGNMENT-LMS.zip`` for each LMS the assignment was collected from;
    return each zip with the students packed in it, and a line for each student with feedback
    that could not be named (collected from no LMS)."""
    record = read_record(root, assignment)
    if not record["students"]:
        raise CourseError(
            f"nothing of {assignment} was collected from an LMS (no downloaded/{assignment}/"
            "lms.json): run `course collect` first, so the feedback can be named for upload."
        )
    pages = {
        folder.parent.name: sorted(folder.glob("*.html"))
        for folder in sorted((root / "feedback").glob(f"*/{assignment}"))
    }
    written = []
    for lms in sorted({entry["lms"] for entry in record["students"].values()}):
        lms_class, students = system(lms), students_of(record, lms)
        path = root / f"feedback-{assignment}-{lms}.zip"
        packed, names = [], set()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for download, about in sorted(record["downloads"].items()):
                if about.get("lms") != lms:
                    continue
                extracted = download_folder(root, assignment, download) / "extracted"
                for name, file in lms_class.feedback_extras(extracted / "submissions").items():
                    if name not in names:
                        archive.write(file, name)
                        names.add(name)
            for student, files in pages.items():
                if student in students:
                    for page in files:
                        entry = lms_class.feedback_entry(students[student]["prefix"], page.stem)
                        archive.write(page, entry)
                    packed.append(student)
        written.append((path, packed))
    known = record["students"]
    left = [f"{s} (in no LMS download of {assignment})" for s in pages if s not in known]
    return written, left
