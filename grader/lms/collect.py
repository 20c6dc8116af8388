"""``course collect``: an LMS download (``--lms canvas``, or another LMS) into ``submitted/``.

The archive is checked and extracted with nbgrader's ``ExtractorPlugin`` into nbgrader's
zip_collect layout (``downloaded/ASSIGNMENT/archive`` and ``.../extracted``); each file's name
is read by the LMS's class (:meth:`grader.lms.base.LmsSystem.parse`). For each student:

- the id is the roster's (``nbgrader db student import``), found by LMS user id, email or name;
  a student not in the roster keeps the LMS's id;
- of a file uploaded several times the latest upload is kept (Canvas's ``-N``); where a
  resubmission replaces the whole submission (Brightspace, Blackboard), only the latest
  submission's files are read;
- the one notebook is written as the assignment's notebook, renamed back if the student renamed
  it; a student with two different notebooks is collected only if one of them has the
  assignment's name (otherwise the report asks the instructor to choose);
- lateness goes to nbgrader's ``timestamp.txt``, in UTC as nbgrader keeps its due dates: the
  LMS's submission time (in the download, or Moodle's worksheet), read in the time zone it was
  written in (``timezone``), or, where the LMS marks lateness without a time (Canvas), one
  second after the due date;
- a student graded anonymously is collected under the LMS's anonymous id and can be matched to
  a person only once the LMS reveals the names;
- what was taken and what was skipped (and why) is returned for the report, and what each
  student's files were called is kept in ``downloaded/ASSIGNMENT/lms.json`` to name the
  feedback for upload (:mod:`grader.lms.feedback_zip`).

One assignment may be collected from several LMSs, or from one LMS in several downloads (two
sections): each download is kept in its own folder, ``downloaded/ASSIGNMENT/LMS-ZIPNAME/``
(the same zip collected again replaces its folder; another zip of the same name gets
``LMS-ZIPNAME-2/``), and ``lms.json`` keeps every student's entry with the LMS and the
download it came from, and every LMS id it was known by (``ids``), so that each LMS's feedback
zip and grade file hold its own students and ``course forget`` finds a student in every
download. A record written before (one LMS, the
download in ``downloaded/ASSIGNMENT/`` itself) is read as one download named ''.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from grader.books import gradebook
from grader.lms import LMS_NAMES, archive, roster, system, worksheet
from grader.lms.base import LmsFile, LmsSystem
from grader.shared.paths import CourseError, db_url, release_notebooks, require_assignment

RECORD = "lms.json"


@dataclass
class Taken:
    """A notebook collected for a student."""

    student: str
    lms_id: str
    name: str
    source: str
    notebook: str
    prefix: str
    notes: list[str] = field(default_factory=list)
    late: bool = False


@dataclass
class Skipped:
    """A file of the download that was not collected, and why."""

    path: str
    reason: str


@dataclass
class Collected:
    """What ``course collect`` did with one download."""

    lms: str
    assignment: str
    taken: list[Taken] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def collect(
    root: Path,
    assignment: str,
    zip_path: Path,
    lms: str,
    sheet_path: Path | None = None,
    timezone: str | None = None,
) -> Collected:
    """Collect the download ``zip_path`` of ``lms`` for ``assignment`` (see the module);
    ``sheet_path``: Moodle's grading worksheet, its times in ``timezone`` (an IANA name; this
    machine's when None)."""
    require_assignment(root, assignment)
    lms_class = system(lms)
    zone = worksheet.find_timezone(timezone)
    times = lms_class.read_times(sheet_path, zone)
    wanted = release_notebooks(root, assignment)
    if not list((root / "release" / assignment).glob("*.ipynb")):
        raise CourseError(f"release/{assignment} has no notebooks: run `course release` first.")
    url = db_url(root)
    gradebook.require_assignment(url, assignment)
    download = download_name(root / "downloaded" / assignment, lms, zip_path)
    extracted = archive.extract(
        zip_path, download_folder(root, assignment, download), lms_class.download_steps
    )
    done = Collected(lms, assignment)
    lms_class.prepare(extracted / "submissions")
    by_student: dict[str, list[LmsFile]] = {}
    for path in sorted(p for p in extracted.rglob("*") if p.is_file()):
        relative = path.relative_to(extracted / "submissions").as_posix()
        found = lms_class.parse(relative)
        if found is None:
            done.skipped.append(Skipped(relative, lms_class.skip_reason(relative)))
        else:
            by_student.setdefault(found.lms_id, []).append(found)
    people, due = roster.read_roster(url), _due_date(url, assignment)
    for lms_id, files in by_student.items():
        chosen = _choose(_latest_attempt(lms_class, files, done.skipped), wanted, done.skipped)
        if chosen is None:
            continue
        row = times.get(lms_id)
        email = row.email if row else ""
        person = lms_class.find_person(people, chosen, email)
        taken = _place(root, assignment, extracted / "submissions", chosen, person, wanted, done)
        if taken is not None:
            folder = root / "submitted" / taken.student / assignment
            time = lms_class.submission_time(chosen, row, zone)
            _lateness(folder, lms_class, taken, chosen, due, time)
            _remember(url, lms_class, taken, chosen, person, email)
    if sheet_path is None and lms_class.times_missing and done.taken:
        done.notes.append(lms_class.times_missing)
    _write_record(root, done, download, zip_path.name)
    return done


def _latest_attempt(lms: LmsSystem, files: list[LmsFile], skipped: list[Skipped]) -> list[LmsFile]:
    """Where a resubmission replaces the whole submission, the files of the latest one (the
    others skipped); else every file."""
    if not lms.whole_attempts or not files:
        return files
    last = max(f.attempt for f in files)
    for old in (f for f in files if f.attempt != last):
        skipped.append(Skipped(old.path, "of an older submission (a later one replaces it)"))
    return [f for f in files if f.attempt == last]


def _due_date(url: str, assignment: str) -> datetime | None:
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        return gb.find_assignment(assignment).duedate


def _choose(files: list[LmsFile], wanted: list[str], skipped: list[Skipped]) -> LmsFile | None:
    """The one notebook to collect of a student's files (None: none), the rest skipped."""
    groups: dict[str, list[LmsFile]] = {}
    for f in files:
        if f.ext != ".ipynb":
            skipped.append(Skipped(f.path, "not a notebook (only .ipynb files are graded)"))
        else:
            groups.setdefault(f.stem, []).append(f)
    latest = []
    for uploads in groups.values():
        uploads.sort(key=lambda f: (f.attempt, f.submission_id))
        latest.append(uploads[-1])
        for old in uploads[:-1]:
            skipped.append(Skipped(old.path, f"an older upload ({uploads[-1].path} is later)"))
    if len(latest) <= 1 or len(wanted) > 1:
        return latest[0] if latest else None
    named = [f for f in latest if f.stem == wanted[0]]
    if len(named) == 1:
        for other in latest:
            if other is not named[0]:
                skipped.append(Skipped(other.path, f"a second notebook ({named[0].path} taken)"))
        return named[0]
    listed = ", ".join(f.path for f in latest)
    for f in latest:
        skipped.append(
            Skipped(
                f.path,
                f"this student uploaded {len(latest)} notebooks ({listed}) and none is named "
                f"{wanted[0]}.ipynb: nothing collected; ask which one to grade and copy it "
                f"to submitted/STUDENT/ASSIGNMENT/{wanted[0]}.ipynb",
            )
        )
    return None


def _place(
    root: Path,
    assignment: str,
    extracted: Path,
    chosen: LmsFile,
    person: roster.Person | None,
    wanted: list[str],
    done: Collected,
) -> Taken | None:
    """Write the chosen notebook to ``submitted/STUDENT/ASSIGNMENT/``; None if it is unusable."""
    source = extracted / chosen.path
    try:
        nbformat.read(str(source), as_version=4)
    except Exception as error:  # noqa: BLE001 - any unreadable file is reported, not raised
        reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else "unreadable"
        done.skipped.append(Skipped(chosen.path, f"not a readable notebook ({reason})"))
        return None
    student = person.id if person else chosen.lms_id
    if any(t.student == student for t in done.taken):
        done.skipped.append(Skipped(chosen.path, f"a second LMS account for student {student}"))
        return None
    notebook = chosen.stem if chosen.stem in wanted else wanted[0]
    if len(wanted) > 1 and chosen.stem not in wanted:
        done.skipped.append(Skipped(chosen.path, "not one of the assignment's notebooks"))
        return None
    taken = Taken(student, chosen.lms_id, chosen.name, chosen.path, notebook, chosen.prefix)
    if chosen.stem != notebook:
        taken.notes.append(f"renamed from {chosen.stem}{chosen.ext}")
    if person is None:
        taken.notes.append(f"not in the roster: collected under the {system(done.lms).title} id")
    target = root / "submitted" / student / assignment
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copyfile(source, target / f"{notebook}.ipynb")
    done.taken.append(taken)
    return taken


def _lateness(
    folder: Path,
    lms: LmsSystem,
    taken: Taken,
    chosen: LmsFile,
    due: datetime | None,
    time: tuple[str, datetime | None],
) -> None:
    """Write nbgrader's ``timestamp.txt`` (UTC) from the LMS's submission time, or from its
    late mark when it gives no time."""
    written, stamp = time
    if chosen.late and not written:
        taken.late = True
        if due is None:
            taken.notes.append(f"late ({lms.title}'s mark), but the assignment has no due date")
        else:
            stamp = due + timedelta(seconds=1)  # the LMS marks lateness without a time
            taken.notes.append(f"late ({lms.title}'s mark)")
    elif written:
        if stamp is None:
            taken.notes.append(f"submission time {written!r} unreadable: lateness unknown")
        taken.late = bool(stamp and due and stamp > due)
        if taken.late:
            taken.notes.append(f"late (submitted {stamp} UTC)")
    if stamp is not None:
        (folder / "timestamp.txt").write_text(stamp.isoformat(" "))


def _remember(
    url: str,
    lms: LmsSystem,
    taken: Taken,
    chosen: LmsFile,
    person: roster.Person | None,
    email: str,
) -> None:
    """Put the student in the gradebook, with the LMS's user id where the LMS gives one that
    lasts (:meth:`~grader.lms.base.LmsSystem.lasting_id`)."""
    lasting = lms.lasting_id(chosen)
    if person is not None and (person.lms_user_id or not lasting):
        return
    first, last = lms.split_name(taken.name)
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        if person is not None:
            gb.update_or_create_student(person.id, lms_user_id=lasting)
        else:
            gb.update_or_create_student(
                taken.student, first_name=first, last_name=last, email=email or None,
                lms_user_id=lasting or None,
            )  # fmt: skip


def download_name(folder: Path, lms: str, zip_path: Path) -> str:
    """The folder of one download under ``folder`` (``downloaded/ASSIGNMENT/``): the LMS and
    the zip's name, numbered when a different zip of that name was kept there before."""
    base = f"{lms}-" + (re.sub(r"[^\w.-]+", "_", zip_path.stem).strip("._") or "download")
    name, number = base, 1
    while True:
        kept = folder / name / "archive" / "submissions.zip"
        if not kept.is_file() or (
            zip_path.is_file() and kept.read_bytes() == zip_path.read_bytes()
        ):
            return name
        number += 1
        name = f"{base}-{number}"


def download_folder(root: Path, assignment: str, download: str) -> Path:
    """Where the download named ``download`` is kept ('' : a record of one LMS written before
    downloads had folders of their own)."""
    folder = root / "downloaded" / assignment
    return folder / download if download else folder


def _write_record(root: Path, done: Collected, download: str, zip_name: str) -> None:
    """Keep, per student, what the LMS called the files, with the download and every LMS id
    the student was known by (merged with earlier downloads, of any LMS)."""
    record = read_record(root, done.assignment)
    record["downloads"][download] = {"lms": done.lms, "zip": zip_name}
    for taken in done.taken:
        earlier = record["students"].get(taken.student, {})
        ids = {tuple(i) for i in earlier.get("ids", [])} | {(done.lms, taken.lms_id)}
        record["students"][taken.student] = {
            **asdict(taken), "lms": done.lms, "download": download, "ids": sorted(ids),
        }  # fmt: skip
    path = root / "downloaded" / done.assignment / RECORD
    path.write_text(json.dumps(record, indent=1, sort_keys=True))


def read_record(root: Path, assignment: str) -> dict:
    """What ``course collect`` recorded for ``assignment``: ``students`` (id -> entry, with its
    ``lms``, ``download`` and ``ids``) and ``downloads`` (folder -> its ``lms``); both empty
    when nothing was collected. A record of the older form (one ``lms`` for all) is read as
    one download named ''."""
    path = root / "downloaded" / assignment / RECORD
    record = json.loads(path.read_text()) if path.is_file() else {}
    students, downloads = record.get("students", {}), record.get("downloads", {})
    if "lms" in record:  # the older form
        downloads = {"": {"lms": record["lms"]}}
        for entry in students.values():
            entry.setdefault("lms", record["lms"])
            entry.setdefault("download", "")
    for entry in students.values():
        entry.setdefault("ids", [[entry.get("lms", ""), entry.get("lms_id", "")]])
    return {"students": students, "downloads": downloads}


def students_of(record: dict, lms: str) -> dict[str, dict]:
    """The record's students collected last from ``lms`` (id -> entry)."""
    return {s: e for s, e in record["students"].items() if e.get("lms") == lms}


def elsewhere(root: Path, assignment: str, lms: str) -> set[str]:
    """The students of ``assignment`` whose submission came from an LMS other than ``lms``:
    their grades belong in that LMS's file, never in this one's."""
    return {s for s, e in read_record(root, assignment)["students"].items() if e["lms"] != lms}


def format_report(done: Collected) -> str:
    """The collection as text: a line per student taken, a line per file skipped."""
    title = system(done.lms).title
    lines = [f"{title} download of {done.assignment}: {len(done.taken)} collected"]
    for t in sorted(done.taken, key=lambda t: t.student):
        notes = f" ({'; '.join(t.notes)})" if t.notes else ""
        lines.append(f"  {t.student}: {t.source} -> {t.notebook}.ipynb{notes}")
    lines += done.notes
    if done.skipped:
        lines.append(f"skipped {len(done.skipped)} file(s):")
        lines += [f"  {s.path}: {s.reason}" for s in done.skipped]
    if not done.taken:
        lines.append(f"nothing collected: is this the assignment's {title} download?")
        other = _reads_it(done)
        if other:
            lines[-1] += f" (a {system(other).title} download needs --lms {other})"
    return "\n".join(lines)


def _reads_it(done: Collected) -> str:
    """The LMS whose names fit most of the skipped files ('' when none fits one)."""
    fits = {
        name: sum(system(name).parse(s.path) is not None for s in done.skipped)
        for name in LMS_NAMES
        if name != done.lms
    }
    best = max(fits, key=lambda name: fits[name], default="")
    return best if best and fits[best] else ""
