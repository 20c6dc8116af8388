"""``course forget STUDENT...``: remove everything the course keeps about a student.

What the course keeps about a student (docs/personal-data.md), each removed here:

- the gradebook (nbgrader's API, on whatever database the course uses): the student's row (id,
  names, email, LMS user id) with every submission, grade and comment; an sqlite gradebook is then
  vacuumed, so that the deleted rows leave no copy in the file's free pages;
- the folders ``submitted/STUDENT``, ``autograded/STUDENT`` and ``feedback/STUDENT``, and in
  nbgrader's exchange the submissions the student handed in (``inbound/STUDENT+...``) and the
  feedback released to them (``feedback/HASH.html``);
- what grading recorded: ``grading_records/*/STUDENT.json`` and the student's lines of
  ``grading_report.csv``; the student's lines of the grade table ``grades.csv`` and of the LMS
  files ``course grades --lms`` wrote in the course folder (``grades-*.csv``);
- the class reports (``class-report-*.html``) that name the student, which hold the similarity
  pairs: removed whole (``course report ASSIGNMENT`` writes them again without the student);
- what ``course collect`` kept of the LMS downloads (``downloaded/ASSIGNMENT/``, a folder per
  download): the student's files in every download's extracted copy and copy of the zip, found by
  every LMS id the student was collected under, the student's entry of ``lms.json`` (the map from
  the course's id to the LMS's ids and name), and the student's files in the feedback zips for
  upload (``feedback-ASSIGNMENT-LMS.zip``, one per LMS).

Without ``--yes`` nothing is removed: the command lists what it would remove. The files the
instructor downloaded or exported (the LMS's zip, the roster, the LMS's gradebook exports and
worksheets) are the instructor's: those of ``private/`` and of the course folder's top that still
name the student are listed at the end, to delete or download again.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import sqlite3
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.utils import notebook_hash
from sqlalchemy.exc import OperationalError

from grader.books import deadlines
from grader.books.gradebook import sqlite_file
from grader.lms import LMS_NAMES, roster, system
from grader.lms.collect import RECORD, download_folder, read_record
from grader.lms.systems.canvas import ANONYMOUS
from grader.shared import records, report
from grader.shared.paths import CourseError, db_url, load_config

PRIVATE = "private"  # the folder the docs name for the instructor's LMS files (ignored by git)
FOLDERS = ("submitted", "autograded", "feedback")
# The columns of a grade file that identify a student (the course's CSVs, Canvas's and Moodle's).
ID_COLUMNS = {"student", "id", "sis user id", "sis login id", "id number", "email address", "email"}
SAFE_ID = re.compile(r"[^/\\\x00]+")


@dataclass
class Step:
    """One thing removed: what it is, in a line, and how it is removed."""

    what: str
    run: Callable[[], None]


@dataclass
class Plan:
    """Everything the course keeps about one student, and the instructor's files naming them."""

    root: Path
    student: str
    steps: list[Step] = field(default_factory=list)
    yours: list[Path] = field(default_factory=list)


@dataclass
class Identity:
    """How the student is named: the course's id and what the LMSs and the gradebook know."""

    student: str
    in_gradebook: bool = False
    email: str = ""
    lms_user_id: str = ""
    downloads: dict[str, dict] = field(default_factory=dict)  # assignment -> lms.json's entry

    def cells(self) -> set[str]:
        """The values of a grade file's id columns that mean this student (the Canvas user id
        too: Moodle's participant id is the assignment's, not the student's)."""
        canvas = {i for lms, i in self.lms_ids() if lms == "canvas"}
        ids = {self.student, self.email, self.lms_user_id}
        return {v for v in ids | {i for i in canvas if not i.startswith(ANONYMOUS)} if v}

    def lms_ids(self) -> set[tuple[str, str]]:
        """Every (LMS, LMS id) the student was collected under, in any download."""
        return {(lms, i) for e in self.downloads.values() for lms, i in e.get("ids", [])}


def command(root: Path, students: list[str], yes: bool) -> int:
    """``course forget``: print what is (or would be) removed; 0 when done or listed."""
    plans = [plan(root, student) for student in students]
    for one in plans:
        if yes:
            carry_out(one)
        print(format_plan(one, done=yes))
    if not yes:
        print("\nNothing was removed: run the same command with --yes to remove all of this.")
    return 0


def plan(root: Path, student: str) -> Plan:
    """What ``course forget student`` removes (see the module); fails clearly for an unknown id."""
    if not SAFE_ID.fullmatch(student) or student in (".", ".."):
        raise CourseError(f"{student!r} is not a student id (an id has no slash).")
    who = identify(root, student)
    found = Plan(root, student)
    if who.in_gradebook:
        found.steps.append(_gradebook_step(root, who))
    found.steps += _folder_steps(root, student)
    found.steps += _record_steps(root, who)
    found.steps += _download_steps(root, who)
    if not found.steps:
        raise CourseError(_unknown(root, student))
    found.yours = _yours(root, who)
    return found


def carry_out(one: Plan) -> None:
    """Remove everything ``one`` lists."""
    for step in one.steps:
        step.run()


def format_plan(one: Plan, done: bool) -> str:
    """The plan as text: removed (or to remove), then the instructor's own files."""
    head = "removed" if done else "would remove"
    lines = [f"{one.student}: {head}:"] + [f"  {step.what}" for step in one.steps]
    if one.yours:
        lines.append(
            f"  still naming {one.student}, your own files (delete them, or download them again "
            "from the LMS once the student is gone there):"
        )
        lines += [f"    {_show(one.root, path)}" for path in one.yours]
    return "\n".join(lines)


def identify(root: Path, student: str) -> Identity:
    """What the gradebook and the collected LMS downloads know of ``student``."""
    who = Identity(student)
    url = db_url(root)
    file = sqlite_file(url)
    if file is None or file.is_file():  # never create an empty gradebook to look in it
        require_gradebook(url)
        with warnings.catch_warnings(), Gradebook(url) as gb:
            warnings.simplefilter("ignore")
            try:
                row = gb.find_student(student)
            except MissingEntry:
                row = None
            if row is not None:
                who.in_gradebook = True
                who.email, who.lms_user_id = row.email or "", row.lms_user_id or ""
    for path in sorted((root / "downloaded").glob(f"*/{RECORD}")):
        try:
            entry = read_record(root, path.parent.name)["students"].get(student)
        except (OSError, ValueError, AttributeError):
            continue  # not a record the course wrote
        if entry:
            who.downloads[path.parent.name] = entry
    return who


def require_gradebook(url: str) -> None:
    """Fail with a clear message unless the gradebook at ``url`` opens."""
    try:
        Gradebook(url).close()
    except OperationalError as error:
        where = url.split("@")[-1]  # never print a password
        reason = str(error.orig).strip().splitlines()[0] if error.orig else "no details"
        raise CourseError(f"cannot open the gradebook database at {where}: {reason}") from None


def _gradebook_step(root: Path, who: Identity) -> Step:
    url = db_url(root)
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        row = gb.find_student(who.student)
        count = len(row.submissions)
        name = " ".join(n for n in (row.first_name, row.last_name) if n)
    details = ", ".join(d for d in (name, who.email) if d)
    what = (
        f"the gradebook's student {who.student}{f' ({details})' if details else ''} and "
        f"{count} submission(s) with their grades and comments"
    )

    def run() -> None:
        with warnings.catch_warnings(), Gradebook(url) as gb:
            warnings.simplefilter("ignore")
            gb.remove_student(who.student)
        file = sqlite_file(url)
        if file is not None:  # the deleted rows would stay in the file's free pages
            with sqlite3.connect(file) as connection:
                connection.execute("VACUUM")
            connection.close()

    return Step(what, run)


def _folder_steps(root: Path, student: str) -> list[Step]:
    """The student's folders of submissions, graded copies and feedback, and the exchange's."""
    folders = [root / name / student for name in FOLDERS]
    exchange = load_config(root).Exchange.get("root")
    pages: list[Path] = []
    if isinstance(exchange, str) and exchange and Path(exchange).is_dir():
        folders += sorted(Path(exchange).glob(f"*/inbound/{glob_escape(student)}+*"))
        pages = _released_feedback(root, Path(exchange), student)
    steps = []
    for folder in folders:
        if folder.is_dir() or folder.is_symlink():
            count = sum(1 for p in folder.rglob("*") if p.is_file())
            steps.append(Step(f"{_show(root, folder)}/ ({count} file(s))", _remover(folder)))
    if pages:
        what = f"{len(pages)} feedback page(s) released to them in the exchange"
        steps.append(Step(what, _remover(*pages)))
    return steps


def _released_feedback(root: Path, exchange: Path, student: str) -> list[Path]:
    """The pages ``nbgrader release_feedback`` put in the exchange for ``student``: named by
    the hash of the submission's secret and the notebook's name (nbgrader's own naming)."""
    found = []
    for secret in sorted((root / "feedback" / student).glob("*/submission_secret.txt")):
        for page in sorted(secret.parent.glob("*.html")):
            checksum = notebook_hash(secret=secret.read_text(), notebook_id=page.stem)
            found += [p for p in exchange.glob(f"*/feedback/{checksum}.html") if p.is_file()]
    return found


def _record_steps(root: Path, who: Identity) -> list[Step]:
    """The grading records, the grading report's lines, the grade files' rows, the reports."""
    steps = []
    for assignment in sorted(p.name for p in (root / records.FOLDER).glob("*") if p.is_dir()):
        path = records.path(root, assignment, who.student)
        if path.is_file():
            steps.append(Step(_show(root, path), _remover(path)))
    for path in [root / report.FILE, root / "grades.csv", *sorted(root.glob("grades-*.csv"))]:
        kept, dropped = _csv_without(path, who.cells())
        if dropped:
            steps.append(Step(f"{dropped} line(s) of {_show(root, path)}", _writer(path, kept)))
    pending = root / deadlines.PENDING  # extensions given before grading
    waiting = {k: v for k, v in _read_json(pending).items() if k.split("/")[-1] != who.student}
    if len(waiting) < len(_read_json(pending)):
        text = json.dumps(waiting, indent=1, sort_keys=True) + "\n"
        steps.append(Step(f"their extensions in {_show(root, pending)}", _writer(pending, text)))
    for page in sorted(root.glob("class-report-*.html")):
        if _page_names(page, who.student):
            assignment = page.stem.removeprefix("class-report-")
            again = f"`course report {assignment}` writes it again without the student"
            steps.append(Step(f"{_show(root, page)} (names them; {again})", _remover(page)))
    return steps


def _download_steps(root: Path, who: Identity) -> list[Step]:
    """The student's files in every collected LMS download (by each LMS id they were collected
    under), their lms.json entries, the feedback zips for upload."""
    steps = []
    for assignment, entry in sorted(who.downloads.items()):
        ids = {(lms, lms_id) for lms, lms_id in entry["ids"]}
        for download, about in sorted(read_record(root, assignment)["downloads"].items()):
            mine = {(lms, i) for lms, i in ids if lms == about.get("lms")}
            if mine:
                steps += _one_download(root, download_folder(root, assignment, download), mine)
        record = root / "downloaded" / assignment / RECORD
        what = f"their entry of {_show(root, record)} ({', '.join(sorted(i for _, i in ids))})"
        steps.append(Step(what, _unrecord(record, who)))
        prefix = entry.get("prefix", "")

        def theirs(name: str, p: str = prefix, ids: set = ids) -> bool:
            return (bool(p) and name.startswith(p)) or _named_for(name, ids)

        for pack in sorted(root.glob(f"feedback-{glob_escape(assignment)}-*.zip")):
            steps += _zip_step(root, pack, theirs)
    return steps


def _one_download(root: Path, folder: Path, ids: set[tuple[str, str]]) -> list[Step]:
    """The student's files in one download's extracted copy and its copy of the zip."""

    def theirs(name: str) -> bool:
        return _named_for(name, ids)

    steps = []
    extracted = folder / "extracted" / "submissions"
    picked: list[Path] = []
    for path in sorted(extracted.rglob("*")):  # a folder before what it holds
        relative = path.relative_to(extracted).as_posix() + ("/" if path.is_dir() else "")
        if theirs(relative) and not any(p in path.parents for p in picked):
            picked.append(path)
    if picked:
        count = sum(1 for p in picked for f in [p, *p.rglob("*")] if f.is_file())
        what = f"{count} file(s) of theirs in {_show(root, extracted)}/"
        steps.append(Step(what, _remover(*picked)))
    for copy in sorted((folder / "archive").glob("*.zip")):
        steps += _zip_step(root, copy, theirs)
    return steps


def _zip_step(root: Path, path: Path, theirs: Callable[[str], bool]) -> list[Step]:
    """A step that writes the zip ``path`` again without the entries ``theirs`` picks."""
    with zipfile.ZipFile(path) as archive:
        picked = [info.filename for info in archive.infolist() if theirs(info.filename)]
    if not picked:
        return []

    def run() -> None:
        buffer = io.BytesIO()
        with (
            zipfile.ZipFile(path) as old,
            zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as new,
        ):
            for info in old.infolist():
                if info.filename not in picked:
                    new.writestr(info, old.read(info))
        path.write_bytes(buffer.getvalue())

    return [Step(f"{len(picked)} file(s) of theirs in {_show(root, path)}", run)]


def _yours(root: Path, who: Identity) -> list[Path]:
    """The instructor's files (``private/``; CSV, zip and HTML files at the course folder's top)
    that still name the student: grade files by an id column, zips by an LMS's file name, pages
    (a class report written with ``--out``) by the id."""
    handled = {root / report.FILE, root / "grades.csv", *root.glob("grades-*.csv")}
    handled |= {*root.glob("feedback-*.zip"), *root.glob("class-report-*.html")}
    kinds = (".csv", ".zip", ".html")
    candidates = [p for p in root.glob("*") if p.suffix in kinds]
    if (root / PRIVATE).is_dir():
        candidates += [p for p in (root / PRIVATE).rglob("*") if p.suffix in kinds]
    lms_ids = who.lms_ids()
    found = []
    for path in sorted(set(candidates) - handled):
        if not path.is_file():
            continue
        if path.suffix == ".csv" and _csv_without(path, who.cells())[1]:
            found.append(path)
        elif path.suffix == ".zip" and _zip_names(path, lms_ids):
            found.append(path)
        elif path.suffix == ".html" and _page_names(path, who.student):
            found.append(path)
    return found


def _page_names(page: Path, student: str) -> bool:
    """Whether the HTML page ``page`` names ``student`` (as a whole id: s02 is not s020)."""
    needle = re.escape(html.escape(student))
    return re.search(rf"(?<![\w-]){needle}(?![\w-])", page.read_text(errors="replace")) is not None


def _zip_names(path: Path, lms_ids: set[tuple[str, str]]) -> bool:
    """Whether the zip holds a file an LMS named for one of ``lms_ids``."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return any(_named_for(name, lms_ids) for name in entries)


def _named_for(name: str, lms_ids: set[tuple[str, str]]) -> bool:
    """Whether an LMS named the path ``name`` (a folder's ends with ``/``: Moodle names a
    participant's folder) for one of ``lms_ids`` (LMS, LMS id)."""
    probe = name + "file.ipynb" if name.endswith("/") else name
    for lms, lms_id in lms_ids:
        found = system(lms).parse(probe) if lms in LMS_NAMES else None
        if found is not None and found.lms_id == lms_id:
            return True
    return False


def _csv_without(path: Path, cells: set[str]) -> tuple[str, int]:
    """The text of the CSV file without the lines whose id columns hold one of ``cells``, and
    how many lines that leaves out (0 for a file that is missing or not a grade file)."""
    if not path.is_file():
        return "", 0
    text = path.read_bytes().decode("utf-8", errors="replace")  # its line ends as they are
    lines = text.splitlines(keepends=True)
    if not lines:
        return text, 0
    delimiter = ";" if lines[0].count(";") > lines[0].count(",") else ","
    header = next(csv.reader([lines[0].lstrip("\ufeff")], delimiter=delimiter), [])
    columns = [i for i, name in enumerate(header) if name.strip().lower() in ID_COLUMNS]
    kept, dropped = [lines[0]], 0
    for line in lines[1:]:
        row = next(csv.reader([line], delimiter=delimiter), [])
        if any(i < len(row) and row[i].strip() in cells for i in columns):
            dropped += 1
        else:
            kept.append(line)
    return "".join(kept), dropped


def _unrecord(path: Path, who: Identity) -> Callable[[], None]:
    def run() -> None:
        record = _read_json(path)
        record.get("students", {}).pop(who.student, None)
        path.write_text(json.dumps(record, indent=1, sort_keys=True))

    return run


def _remover(*paths: Path) -> Callable[[], None]:
    def run() -> None:
        for path in paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    return run


def _writer(path: Path, text: str) -> Callable[[], None]:
    def run() -> None:
        path.write_bytes(text.encode("utf-8"))

    return run


def _unknown(root: Path, student: str) -> str:
    """The message for a student the course knows nothing of, with the ids it does know."""
    ids = {p.name for name in FOLDERS for p in (root / name).glob("*") if p.is_dir()}
    file = sqlite_file(db_url(root))
    if file is None or file.is_file():
        ids |= {person.id for person in roster.read_roster(db_url(root))}
    known = sorted(ids)
    listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
    has = f"; the course has {listed}" if known else ""
    return (
        f"unknown student {student!r}: not in the gradebook, nor in submitted/, autograded/, "
        f"feedback/, the grading records or the LMS downloads; nothing to remove. Check the id "
        f"(the course's id, as in submitted/STUDENT{has})."
    )


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _show(root: Path, path: Path) -> str:
    """``path`` relative to the course folder where it is inside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def glob_escape(text: str) -> str:
    """``text`` with glob's special characters taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", text)
