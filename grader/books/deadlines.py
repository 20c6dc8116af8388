"""Due dates, extensions and lateness: kept where nbgrader keeps them.

- ``course due ASSIGNMENT "2026-10-05 17:00" [--timezone ZONE]``: the assignment's due date in the
  gradebook (nbgrader stores it in UTC).
- ``course extension ASSIGNMENT STUDENT --hours N``: the student's extension (nbgrader's
  ``SubmittedAssignment.extension``: the due date that student's lateness is counted from moves by
  N hours; ``--hours 0`` removes it). An extension given before the student's work is graded waits
  in ``extensions.json`` (git ignores it: it names students) and reaches the gradebook when the
  submission is merged (:func:`apply_pending`); regrading keeps it.
- Lateness is the submission's time (``timestamp.txt``: the LMS's time or mark, written by
  ``course collect``, or nbgrader's exchange) past the due date plus the extension; the penalty is
  nbgrader's ``LateSubmissionPlugin`` as ``nbgrader_config.py`` sets it, applied when the grades go
  out (:mod:`grader.lms.export`). ``course grades`` lists all of it (:func:`lateness_lines`).
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import parser as date_parser
from nbgrader.api import Gradebook, MissingEntry

from grader.shared.paths import CourseError, db_url

PENDING = "extensions.json"


def parse_due(text: str, zone: str | None = None) -> datetime:
    """A due date as nbgrader stores it (naive UTC) from ``text`` in ``zone`` (default: the
    offset ``text`` gives, else this machine's zone)."""
    try:
        when = date_parser.parse(text)
    except (ValueError, OverflowError):
        raise CourseError(f"{text!r} is not a date: write it like '2026-10-05 17:00'") from None
    if when.tzinfo is None:
        try:
            tz = ZoneInfo(zone) if zone else datetime.now().astimezone().tzinfo
        except (ZoneInfoNotFoundError, ValueError):
            raise CourseError(f"unknown time zone {zone!r} (e.g. Europe/Berlin, UTC)") from None
        when = when.replace(tzinfo=tz)
    return when.astimezone(UTC).replace(tzinfo=None)


def set_due(root: Path, assignment: str, due: datetime) -> str:
    """Set ``assignment``'s due date (naive UTC) in the gradebook; say what was set."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_assignment(assignment, duedate=due)
    return f"{assignment} is due {due:%Y-%m-%d %H:%M} UTC"


def _read_pending(root: Path) -> dict[str, float]:
    path = root / PENDING
    return json.loads(path.read_text()) if path.is_file() else {}


def _key(assignment: str, student: str) -> str:
    return f"{assignment}/{student}"


def set_extension(root: Path, assignment: str, student: str, hours: float) -> str:
    """Give ``student`` ``hours`` more on ``assignment`` (0: none); say what was done."""
    if hours < 0:
        raise CourseError("--hours is the extra time, 0 or more")
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"no assignment {assignment!r}: `course release` it first") from None
        pending = _read_pending(root)
        pending.pop(_key(assignment, student), None)
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            submission = None
            if hours:
                pending[_key(assignment, student)] = hours
        if submission is not None:
            submission.extension = timedelta(hours=hours) if hours else None
            gb.db.commit()
        due = found.duedate
    _write_pending(root, pending)
    if not hours:
        return f"{student} has no extension on {assignment}"
    until = f", until {due + timedelta(hours=hours):%Y-%m-%d %H:%M} UTC" if due else ""
    waits = "" if submission is not None else " (kept until the submission is graded)"
    return f"{student} has {hours:g} more hours on {assignment}{until}{waits}"


def _write_pending(root: Path, pending: dict[str, float]) -> None:
    path = root / PENDING
    if pending:
        path.write_text(json.dumps(pending, indent=1, sort_keys=True) + "\n")
    else:
        path.unlink(missing_ok=True)


def apply_pending(root: Path, url: str, assignment: str, student: str) -> None:
    """Move an extension waiting in extensions.json onto the student's merged submission."""
    pending = _read_pending(root)
    hours = pending.pop(_key(assignment, student), None)
    if hours is None:
        return
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        try:
            gb.find_submission(assignment, student).extension = timedelta(hours=hours)
        except MissingEntry:
            return
        gb.db.commit()
    _write_pending(root, pending)


def lateness_lines(root: Path) -> list[str]:
    """Due dates, extensions and late submissions, a line each, for ``course grades``."""
    lines = []
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for assignment in sorted(gb.assignments, key=lambda a: a.name):
            due = assignment.duedate
            lines.append(
                f"{assignment.name}: due {due:%Y-%m-%d %H:%M} UTC" if due
                else f"{assignment.name}: no due date (`course due {assignment.name} DATE`)"
            )  # fmt: skip
            for sub in sorted(assignment.submissions, key=lambda s: s.student.id):
                extra = f", extension {_hours(sub.extension)}" if sub.extension else ""
                late = sub.total_seconds_late
                if late:
                    lines.append(f"  {sub.student.id}: late by {_duration(late)}{extra}")
                elif extra:
                    lines.append(f"  {sub.student.id}: on time{extra}")
    for key, hours in sorted(_read_pending(root).items()):
        lines.append(f"  {key}: extension {hours:g} h, waiting for the submission to be graded")
    return lines


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:g} h"


def _duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{max(1, rest // 60)} min"
