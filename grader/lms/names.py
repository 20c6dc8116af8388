"""What Canvas and Moodle write in the file names of a submissions download.

Each LMS is an nbgrader ``FileNameCollectorPlugin`` whose ``named_regexp`` reads the student's
LMS id and the file's own name from a path; :func:`parse` turns a match into a :class:`LmsFile`.

- Canvas ("Download Submissions", ``lib/content_zipper.rb`` of instructure/canvas-lms at
  05e9653c12: ``get_filename``, ``add_upload_submission``, ``sanitize_user_name``): one flat
  folder of ``NAME_[LATE_]USERID_ATTACHMENTID_FILENAME``. NAME is the student's sortable name
  lower-cased with every non-word character removed (``smithjane``); an underscore is a word
  character, so NAME may keep one (``o_brienmary``; Canvas only removes a ``_digits_`` run from
  it). With anonymous grading there is no NAME and the id is ``anon_`` and the submission's
  anonymous id: ``[LATE_]anon_x7k2P_ATTACHMENTID_FILENAME`` (older Canvas wrote the user id
  without the name, and lower-cased the whole prefix: ``late`` is read as well). A file
  uploaded again under the same name is ``NAME-1.ipynb``, ``NAME-2.ipynb``, ... (the highest
  number is the latest). Canvas marks a late submission but gives no time.
- Moodle ("Download all submissions", ``mod/assign/locallib.php`` ``download_submissions``): a
  folder per participant, ``Full Name_ID_assignsubmission_file/FILENAME`` since Moodle 4.1 and
  ``Full Name_ID_assignsubmission_file_/FILENAME`` before (Moodle's own feedback import,
  ``mod/assign/feedback/file/importziplib.php`` ``is_valid_filename_for_import``, reads both); or,
  without folders, ``Full Name_ID_assignsubmission_file_FILENAME``. Moodle writes the full name
  with its underscores turned into spaces, so the name holds none; with blind marking it is
  ``Participant``. The ID is Moodle's participant id for the assignment; the download holds only
  the latest submission and no times (they are in Moodle's grading worksheet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Unicode

ANY_FOLDER = r"(?:.*/)?"
LATE = r"[Ll][Aa][Tt][Ee]"
ANONYMOUS = "anon_"  # Canvas's id of a student of an anonymously graded assignment


class CanvasFileNames(FileNameCollectorPlugin):
    """Canvas's ``name_[LATE_]userid_attachmentid_file[-N].ext`` and, graded anonymously,
    ``[LATE_]anon_ID_attachmentid_file[-N].ext``."""

    named_regexp = Unicode(
        ANY_FOLDER + rf"(?:(?P<anon_late>{LATE})_(?=anon_))?(?:(?!anon_|\d+_)(?P<name>[^/]+?)_)?"
        rf"(?:(?P<late>{LATE})_)?(?P<student_id>\d+|anon_[A-Za-z0-9]+)_(?P<submission_id>\d+)_"
        r"(?P<file_id>[^/]+?)(?:-(?P<attempt>\d+))?(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


class MoodleFileNames(FileNameCollectorPlugin):
    """Moodle's ``Full Name_id_assignsubmission_file[_]/file.ext`` (in folders) or
    ``Full Name_id_assignsubmission_file_file.ext`` (flat)."""

    named_regexp = Unicode(
        ANY_FOLDER + r"(?P<folder>(?P<name>[^/_]+)_(?P<student_id>\d+)_assignsubmission_file"
        r"(?:_?/(?:.*/)?|_))(?P<file_id>[^/]+?)(?P<ext>\.[^./]+)?$"
    ).tag(config=True)


COLLECTORS = {"canvas": CanvasFileNames, "moodle": MoodleFileNames}


@dataclass
class LmsFile:
    """One file of a download, as its LMS named it."""

    path: str
    lms_id: str  # the student's id in the LMS (Canvas user id or anon_ID, Moodle participant id)
    name: str  # the student's name as the LMS wrote it
    stem: str  # the file's own name, without extension or resubmission number
    ext: str
    attempt: int = 0  # Canvas's resubmission number (0: the first upload)
    submission_id: int = 0
    late: bool = False
    prefix: str = ""  # what the LMS put before the file's own name (names the feedback)
    anonymous: bool = False  # Canvas's anonymous grading: no user id, no name


def parse(lms: str, relative: str) -> LmsFile | None:
    """The LMS's reading of a file's path (relative to the extracted download), or None when
    the path is not one of its submission files."""
    found = re.match(COLLECTORS[lms]().named_regexp, relative)
    if found is None:
        return None
    match = found.groupdict()
    own = match["file_id"] + (f"-{match['attempt']}" if match.get("attempt") else "")
    full = relative.rsplit("/", 1)[-1]
    name = match["name"] or ""
    late = bool(match.get("late") or match.get("anon_late"))
    if lms == "canvas" and name.lower() == "late" and not late:  # [LATE_]userid_..., no name
        name, late = "", True
    return LmsFile(
        path=relative,
        lms_id=match["student_id"],
        name=name,
        stem=match["file_id"],
        ext=(match["ext"] or "").lower(),
        attempt=int(match.get("attempt") or 0),
        submission_id=int(match.get("submission_id") or 0),
        late=late,
        prefix=_prefix(lms, match, own + (match["ext"] or ""), full),
        anonymous=match["student_id"].startswith(ANONYMOUS),
    )


def _prefix(lms: str, match: dict, own: str, full: str) -> str:
    """Canvas: the file name before the file's own name. Moodle: the participant's folder as
    the download named it (without its slash), or the flat prefix ``..._assignsubmission_file_``
    (the feedback zip puts its files in a folder of that name, Moodle's form before 4.1)."""
    if lms == "canvas":
        return full[: len(full) - len(own)]
    return match["folder"].split("/", 1)[0]
