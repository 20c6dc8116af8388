"""What an LMS is to the course: the abstract class each LMS module subclasses, and one file of
an LMS's download (:class:`LmsFile`).

An :class:`LmsSystem` answers every question the commands ask of an LMS, so that
``course collect``, ``course grades --lms``, ``course feedback --zip`` and their reports never
ask which LMS it is (as nbgrader's ``exchange/abc`` and jupyter_client's kernel provisioners
do for theirs):

- its download: what a file's path says (:meth:`~LmsSystem.parse`: the student's LMS id and
  name, the file's own name, a resubmission, lateness), what it holds beside the submissions
  (:meth:`~LmsSystem.prepare`, :meth:`~LmsSystem.skip_reason`), and when each was submitted
  (:meth:`~LmsSystem.submission_time`, with Moodle's worksheet :meth:`~LmsSystem.read_times`);
- its roster: how a download's student is found among the course's (:meth:`~LmsSystem.find_person`)
  and which id lasts from one download to the next (:meth:`~LmsSystem.lasting_id`);
- its gradebook: the CSV it imports (:attr:`~LmsSystem.exporter`, an nbgrader export plugin)
  and, in its own gradebook export, each assignment's column and each row's student
  (:meth:`~LmsSystem.gradebook`);
- its feedback upload: each file's name in the zip (:meth:`~LmsSystem.feedback_entry`) and
  what else the upload wants (:meth:`~LmsSystem.feedback_extras`).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import ClassVar

from nbgrader.api import Gradebook

from grader.lms.roster import Person, find, squeeze
from grader.lms.worksheet import WorksheetRow
from grader.shared.paths import CourseError

ANY_FOLDER = r"(?:.*/)?"  # a download may hold its files in a top folder


@dataclass
class LmsFile:
    """One file of a download, as its LMS named it."""

    path: str  # relative to the extracted download
    lms_id: str  # the student's id in the download (what groups a student's files)
    name: str  # the student's name as the LMS wrote it
    stem: str  # the file's own name, without extension or resubmission number
    ext: str
    attempt: int = 0  # the resubmission's order (the highest is the latest)
    submission_id: int = 0
    late: bool = False  # the LMS's own late mark
    prefix: str = ""  # what the LMS put before the file's own name (names the feedback)
    anonymous: bool = False  # graded anonymously: no user id, no name
    written: str = ""  # the submission time as the download wrote it ('' when it has none)


@dataclass
class Sheet:
    """A CSV as an LMS wrote it: its rows and how they were written."""

    rows: list[list[str]]
    delimiter: str = ","
    bom: bytes = b""  # the byte order mark it began with
    newline: str = "\n"
    encoding: str = "utf-8"
    quote_all: bool = False  # every cell in quotes (as Blackboard writes)


Titles = Callable[[str], tuple[str, ...] | None]


@dataclass
class GradebookFile:
    """An LMS's gradebook export being filled: the ``sheet`` read from ``source``, the course's
    assignments ``names`` to find columns for (``columns``: the header the user chose for each,
    or ''), the course's gradebook ``gb`` and folder ``root``."""

    sheet: Sheet
    names: list[str]
    columns: dict[str, str]
    gb: Gradebook
    root: Path
    source: Path

    @property
    def header(self) -> list[str]:
        return self.sheet.rows[0]

    def assignment_columns(self, titles: Titles) -> dict[str, int]:
        """The column of each assignment, by the header chosen or by the LMS's ``titles``."""
        return {
            n: find_column(self.header, n, self.columns.get(n, ""), self.source, titles)
            for n in self.names
        }


def find_column(header: list[str], name: str, wanted: str, source: Path, titles: Titles) -> int:
    """The column of assignment ``name``: ``wanted`` (a whole header, or any of the names that
    ``titles`` reads in a header: its title, its LMS id), else the one whose title (the first
    of ``titles``) is the assignment's name. ``titles`` returns None for a column that is no
    grade item's."""
    titled = [(i, h, t) for i, h in enumerate(header) if (t := titles(h))]
    if wanted:
        hits = [i for i, h, t in titled if wanted in (h, *(x for x in t if x))]
    else:
        hits = [i for i, _, t in titled if squeeze(t[0]) == squeeze(name)]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(repr(h) for _, h, _ in titled[:12] if h) or "none"
    what = f"column {wanted!r}" if wanted else f"column titled as the assignment {name}"
    raise CourseError(
        f"{source} has {'more than one' if hits else 'no'} {what} (its columns: {listed}): "
        f"say which column takes {name}'s grades, --assignment '{name}=COLUMN'."
    )


class LmsSystem(ABC):
    """One LMS: its download, roster, gradebook and feedback upload (see the module).

    A subclass sets the class attributes and the abstract methods; the others have the
    behaviour most LMSs share and are overridden where an LMS differs."""

    name: ClassVar[str]  # its --lms name, the name of its module
    title: ClassVar[str]  # as people write it
    download_steps: ClassVar[str]  # what to click for an assignment's submissions
    whole_attempts: ClassVar[bool] = False  # a resubmission replaces all of the earlier files
    times_note: ClassVar[str] = ""  # where lateness is, said when --worksheet is given wrongly
    times_missing: ClassVar[str] = ""  # said when a download is collected without --worksheet

    @property
    @abstractmethod
    def exporter(self) -> type:
        """Its nbgrader export plugin (a :class:`grader.lms.export.LmsExport`)."""

    def prepare(self, extracted: Path) -> None:
        """Read what the download says beside the submitted files, before any is parsed (by
        default nothing)."""
        return None

    @abstractmethod
    def parse(self, relative: str) -> LmsFile | None:
        """What the LMS's name of a file (its path in the extracted download) says; None
        when the file is not one of the submitted files."""

    def skip_reason(self, relative: str) -> str:
        """Why a file that :meth:`parse` refused is skipped."""
        return f"not named as {self.title} names submissions"

    def read_times(self, path: Path | None, zone: tzinfo) -> dict[str, WorksheetRow]:
        """The submission times of a sheet given beside the download (``--worksheet``), by
        LMS id; most LMSs have none."""
        if path is not None:
            raise CourseError(f"--worksheet is Moodle's; {self.times_note}")
        return {}

    def local_time(self, written: str) -> datetime | None:
        """A submission time as the download writes it, read as a wall clock (naive); None
        when the LMS writes no time or this one cannot be read."""
        return None

    def submission_time(
        self, chosen: LmsFile, row: WorksheetRow | None, zone: tzinfo
    ) -> tuple[str, datetime | None]:
        """When ``chosen`` was submitted: the time as the LMS wrote it ('' for none) and in
        UTC (naive, as nbgrader keeps times; None when unreadable)."""
        local = self.local_time(chosen.written) if chosen.written else None
        utc = local.replace(tzinfo=zone).astimezone(UTC).replace(tzinfo=None) if local else None
        return chosen.written, utc

    def find_person(self, people: list[Person], chosen: LmsFile, email: str) -> Person | None:
        """The roster's student of a file (None: not found, or graded anonymously)."""
        if chosen.anonymous:
            return None
        return find(people, chosen.lms_id, chosen.name, email)

    def lasting_id(self, chosen: LmsFile) -> str:
        """The student's LMS id when it names the same person in every download and gradebook
        (kept as the roster's ``lms_user_id``); '' when the download's id does not last."""
        return ""

    def split_name(self, name: str) -> tuple[str, str]:
        """First and last name of a download's name (for a student new to the roster)."""
        first, _, last = name.rpartition(" ")
        return first, last

    @abstractmethod
    def gradebook(self, export: GradebookFile) -> tuple[dict[str, int], dict[int, str | None]]:
        """In the LMS's own gradebook export: the column of each assignment of ``export.names``
        and each student row's course student (None: no one of the course); refuse a file that is
        not this LMS's export with a message saying what to export."""

    @abstractmethod
    def feedback_entry(self, prefix: str, notebook: str) -> str:
        """A feedback file's name in the upload zip, from the student's download prefix."""

    def feedback_extras(self, download: Path) -> dict[str, Path]:
        """Files of the download the feedback upload wants back (name in the zip -> file)."""
        return {}


def named(pattern: str, relative: str) -> dict[str, str] | None:
    """The named groups of ``pattern`` matched on a whole path, or None."""
    found = re.match(pattern, relative)
    return {k: v or "" for k, v in found.groupdict().items()} if found else None
