"""``course feedback ASSIGNMENT --zip``: each student's feedback in one zip, named for the LMS.

The names come from what ``course collect`` recorded of the student's files
(``downloaded/ASSIGNMENT/lms.json``):

- Canvas ("Upload Submissions" of the assignment's page, the same zip form as its download):
  flat, ``lastfirst_userid_submissionid_NOTEBOOK_feedback.html``; Canvas attaches each file to the
  submission of the user id in its name, as a comment.
- Moodle ("Upload multiple feedback files in a zip"): a folder per participant named as in its
  download, ``Full Name_id_assignsubmission_file/NOTEBOOK_feedback.html`` (Moodle 4.1 and later;
  ``..._file_/`` before, or for a flat download): Moodle's import
  (``mod/assign/feedback/file/importziplib.php``) reads the participant id of either.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

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
    path = root / f"feedback-{assignment}-{lms}.zip"
    packed, left = [], []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder in sorted((root / "feedback").glob(f"*/{assignment}")):
            student = folder.parent.name
            pages = sorted(folder.glob("*.html"))
            if student not in students:
                left.append(f"{student} (not in the {lms.title()} download)")
                continue
            for page in pages:
                archive.write(page, entry_name(lms, students[student]["prefix"], page.stem))
            packed.append(student)
    return path, packed, left


def entry_name(lms: str, prefix: str, notebook: str) -> str:
    """A feedback file's name in the zip, as ``lms`` expects it on upload."""
    if lms == "moodle":
        return f"{prefix}/{notebook}_feedback.html"
    return f"{prefix}{notebook}_feedback.html"  # the download's own name: Canvas matches it
