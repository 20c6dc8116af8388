"""What Canvas and Moodle write in the file names of a submissions download.

Each LMS is an nbgrader ``FileNameCollectorPlugin`` whose ``named_regexp`` reads the student's
LMS id and the file's own name from a path; :func:`parse` turns a match into a :class:`LmsFile`.

- Canvas ("Download Submissions"): one flat folder of
  ``lastfirst_[LATE_]USERID_SUBMISSIONID_FILENAME``; a file uploaded again under the same name
  is ``NAME-1.ipynb``, ``NAME-2.ipynb``, ... (the highest number is the latest). Canvas marks a
  late submission (``LATE_``) but gives no time.
- Moodle ("Download all submissions"): a folder per participant,
  ``Full Name_ID_assignsubmission_file_/FILENAME`` (or, without folders, that prefix on each
  file name). The ID is Moodle's participant id for the assignment; the download holds only
  the latest submission and no times (they are in Moodle's grading worksheet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

ANY_FOLDER = r"(?:.*/)?"


class CanvasFileNames(FileNameCollectorPlugin):
    """Canvas's ``lastfirst_[LATE_]userid_submissionid_file[-N].ext``."""

    named_regexp = Unicode(
        ANY_FOLDER + r"(?P<name>[^/_]+)_(?:(?P<late>[Ll][Aa][Tt][Ee])_)?(?P<student_id>\d+)_"
        r"(?P<submission_id>\d+)_(?P<file_id>[^/]+?)(?:-(?P<attempt>\d+))?(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


class MoodleFileNames(FileNameCollectorPlugin):
    """Moodle's ``Full Name_id_assignsubmission_file_/file.ext`` (in folders or flat)."""

    named_regexp = Unicode(
        ANY_FOLDER + r"(?P<name>[^/_]+)_(?P<student_id>\d+)_assignsubmission_file_/?"
        r"(?:.*/)?(?P<file_id>[^/]+?)(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


COLLECTORS = {"canvas": CanvasFileNames, "moodle": MoodleFileNames}


@dataclass
class LmsFile:
    """One file of a download, as its LMS named it."""

    path: str
    lms_id: str  # the student's id in the LMS (Canvas user id, Moodle participant id)
    name: str  # the student's name as the LMS wrote it
    stem: str  # the file's own name, without extension or resubmission number
    ext: str
    attempt: int = 0  # Canvas's resubmission number (0: the first upload)
    submission_id: int = 0
    late: bool = False
    prefix: str = ""  # what the LMS put before the file's own name (names the feedback)


def parse(lms: str, relative: str) -> LmsFile | None:
    """The LMS's reading of a file's path (relative to the extracted download), or None when
    the path is not one of its submission files."""
    found = re.match(COLLECTORS[lms]().named_regexp, relative)
    if found is None:
        return None
    match = found.groupdict()
    own = match["file_id"] + (f"-{match['attempt']}" if match.get("attempt") else "")
    full = relative.rsplit("/", 1)[-1] if lms == "canvas" else relative
    prefix = _prefix(lms, match, relative, own + (match["ext"] or ""), full)
    return LmsFile(
        path=relative,
        lms_id=match["student_id"],
        name=match["name"],
        stem=match["file_id"],
        ext=(match["ext"] or "").lower(),
        attempt=int(match.get("attempt") or 0),
        submission_id=int(match.get("submission_id") or 0),
        late=bool(match.get("late")),
        prefix=prefix,
    )


def _prefix(lms: str, match: dict, relative: str, own: str, full: str) -> str:
    if lms == "canvas":
        return full[: len(full) - len(own)]
    return f"{match['name']}_{match['student_id']}_assignsubmission_file_"
