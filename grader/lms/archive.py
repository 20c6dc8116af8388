"""An LMS download checked before anything is extracted, then extracted by nbgrader.

nbgrader's extractor (``ExtractorPlugin``, setuptools' unpacking) silently drops entries with
``..`` or an absolute path and writes a link as a plain file. Here such an archive is refused
with a message instead, before a single file is written.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from nbgrader.plugins import ExtractorPlugin

from grader.shared.paths import CourseError

MAX_BYTES = 4 * 1024**3  # the most an LMS download may hold once extracted


def check_archive(path: Path, steps: str = "") -> None:
    """Fail with a clear message unless ``path`` is a zip safe to extract (``steps``: where
    the LMS downloads its submissions, for the message)."""
    if not path.is_file():
        raise CourseError(f"no file at {path}: pass the zip that the LMS downloaded.")
    if not zipfile.is_zipfile(path):
        raise CourseError(
            f"{path} is not a zip archive: download the submissions from the LMS as one zip"
            + (f" ({steps})." if steps else ".")
        )
    with zipfile.ZipFile(path) as archive:
        entries = archive.infolist()
    total = 0
    for entry in entries:
        problem = entry_problem(entry)
        if problem:
            raise CourseError(
                f"{path} holds an unsafe entry {entry.filename!r} ({problem}): nothing was "
                "extracted. Download the submissions from the LMS again."
            )
        total += entry.file_size
    if total > MAX_BYTES:
        raise CourseError(
            f"{path} would extract to {total / 1024**3:.1f} GiB (more than "
            f"{MAX_BYTES / 1024**3:.0f}): not extracted. Is it the submissions' download?"
        )


def entry_problem(entry: zipfile.ZipInfo) -> str:
    """Why an archive entry is unsafe to extract ('' when it is not)."""
    name = entry.filename.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in parts:
        return "a path that leaves the folder"
    if stat.S_ISLNK(entry.external_attr >> 16):
        return "a symbolic link"
    return ""


def extract(path: Path, folder: Path, steps: str = "") -> Path:
    """Check ``path``, then extract it under ``folder`` with nbgrader's ``ExtractorPlugin``
    (nbgrader's zip_collect layout: ``folder/archive/`` holds the zip, ``folder/extracted/``
    its files); return the extracted folder."""
    check_archive(path, steps)
    archive, extracted = folder / "archive", folder / "extracted"
    for step in (archive, extracted):
        shutil.rmtree(step, ignore_errors=True)
        step.mkdir(parents=True)
    shutil.copy(path, archive / "submissions.zip")  # extracted whatever its own name
    ExtractorPlugin(zip_ext=[".zip"]).extract(str(archive), str(extracted))
    return extracted
