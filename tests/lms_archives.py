"""Realistic LMS downloads built by the tests: Canvas's flat zip and Moodle's folders, each
named as the LMS's own code names them (the file and version each helper follows is in its
docstring)."""

from __future__ import annotations

import io
import stat
import zipfile
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
