"""Realistic LMS downloads built by the tests: Canvas's flat zip, Moodle's folders,
Brightspace's folders or flat names, Blackboard's attempts with their records, each named as
the LMS's own code, help or the open-source tools that read them name them (the file and
version each helper follows is in its docstring)."""

from __future__ import annotations

import io
import stat
import zipfile
from datetime import datetime
from pathlib import Path

import nbformat
from nbformat import NotebookNode

NOTEBOOK = "masks_and_positions"  # assignment A's notebook


def notebook(marker: str) -> NotebookNode:
    """A small notebook whose first cell says who wrote it (``marker``)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"# {marker}")]
    return nb


def notebook_bytes(marker: str) -> bytes:
    return nbformat.writes(notebook(marker)).encode()


def write_zip(path: Path, files: dict[str, bytes]) -> Path:
    """A zip holding ``files`` (name -> content)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def with_link(path: Path, name: str, target: str) -> Path:
    """A zip whose one entry ``name`` is a symbolic link to ``target``."""
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(info, target)
    return path


def read_names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return sorted(archive.namelist())


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def canvas_name(last_first: str, user: int, attachment: int, file: str, late: bool = False) -> str:
    """Canvas's name for a submitted file (instructure/canvas-lms ``lib/content_zipper.rb`` at
    05e9653c12, ``get_filename`` and ``add_upload_submission``: ``[name, "LATE", user_id]``
    joined with ``_`` and stripped of non-word characters, then ``_ATTACHMENTID_DISPLAYNAME``;
    the name is the sortable name lower-cased, its underscores kept)."""
    return f"{last_first}_{'LATE_' if late else ''}{user}_{attachment}_{file}"


def canvas_anonymous_name(anonymous_id: str, attachment: int, file: str, late: bool = False) -> str:
    """The same with anonymous grading: no name, and ``anon_`` with the submission's anonymous
    id in place of the user id (``get_filename``: ``[nil, "LATE", "anon_#{anonymous_id}"]``)."""
    return f"{'LATE_' if late else ''}anon_{anonymous_id}_{attachment}_{file}"


def moodle_folder(full_name: str, participant: int, before_41: bool = False) -> str:
    """Moodle's folder of a participant's files: ``Full Name_ID_assignsubmission_file/`` since
    Moodle 4.1, with a trailing underscore before (moodle/moodle
    ``mod/assign/feedback/file/importziplib.php`` at 0203d8f260, which reads both back;
    ``mod/assign/locallib.php`` ``download_submissions`` writes them)."""
    return f"{full_name}_{participant}_assignsubmission_file{'_' if before_41 else ''}/"


def moodle_flat(full_name: str, participant: int, file: str) -> str:
    """Moodle's name of a file downloaded without folders (the "Download submissions in
    folders" preference off): ``Full Name_ID_assignsubmission_file_FILE``."""
    return f"{full_name}_{participant}_assignsubmission_file_{file}"


def brightspace_prefix(key: str, name: str, when: datetime) -> str:
    """D2L Brightspace's name of one submission in its folder download, ``KEY - First Last -
    Mon D, YYYY HMM AM`` (the time without a colon), as kodiak's ``parse_submission_file_name``
    tests (``13394-80551 - Eric Gillotti - Mar 29, 2018 1205 PM - ...``) and the D2L scripts
    cited in grader/lms/systems/brightspace.py show it."""
    hour = when.hour % 12 or 12
    return f"{key} - {name} - {MONTHS[when.month - 1]} {when.day}, {when.year} {hour}{when:%M} " + (
        "PM" if when.hour >= 12 else "AM"
    )


def brightspace_folder(key: str, name: str, when: datetime, file: str) -> str:
    """A file of a submission in its own folder (``rename_and_move.sh``'s "Original folder
    structure": ``397063-2557369 - Mary-Ann Smith - Sep 24, 2024 926 PM/document.pdf``)."""
    return f"{brightspace_prefix(key, name, when)}/{file}"


def brightspace_flat(key: str, name: str, when: datetime, file: str) -> str:
    """A file of a submission named by its prefix, without folders (kodiak's tests; a grading
    script's ``271836-442356 - Blake Payne - Dec 5, 2024 1149 AM - CatacombCrawler.zip``)."""
    return f"{brightspace_prefix(key, name, when)} - {file}"


MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def blackboard_name(assignment: str, username: str, when: datetime, file: str = "") -> str:
    """Blackboard's name of an attempt's file in its "Assignment File Download"
    (``ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS_FILE``), or of the attempt's ``.txt``
    without FILE: codepost-io/integration-blackboard's ``sample_submissions/``
    (``Assignment_student1_attempt_2019-08-17-12-51-51_BFS.cpp`` and ``..._12-51-51.txt``)."""
    attempt = f"{assignment}_{username}_attempt_{when:%Y-%m-%d-%H-%M-%S}"
    return f"{attempt}_{file}" if file else f"{attempt}.txt"


def blackboard_record(
    assignment: str, full_name: str, username: str, when: datetime, files: dict[str, str]
) -> bytes:
    """An attempt's ``.txt`` as codepost-io/integration-blackboard's sample
    (``Assignment_student1_attempt_2019-08-17-12-51-51.txt``) has it: name and username, the
    assignment, the time with its zone, the grade, the text, the comments, and for each file
    its original name and its name in the zip (``files``: name in the zip -> original)."""
    hour = when.hour % 12 or 12
    lines = [
        f"Name: {full_name} ({username})",
        f"Assignment: {assignment}",
        f"Date Submitted: {when:%A, %B} {when.day}, {when.year} {hour}:{when:%M:%S} "
        f"{'PM' if when.hour >= 12 else 'AM'} EDT",
        "Current Grade: Needs Grading",
        "",
        "Submission Field:",
        "There is no student submission text data for this assignment.",
        "",
        "Comments:",
        "There are no student comments for this assignment.",
        "",
        "Files:",
    ]
    for given, original in files.items():
        lines += [f"\tOriginal filename: {original}", f"\tFilename: {given}", ""]
    return ("\n".join(lines) + "\n").encode()
