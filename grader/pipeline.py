"""The grading pipeline: nbgrader's own steps, plus what instructors ask of it and do not get.

- :func:`release` runs ``nbgrader generate_assignment`` (source/ -> release/, gradebook updated).
- :func:`autograde` grades N students at once. Each student is graded by a separate
  ``nbgrader autograde`` process on its own copy of the gradebook; the scores are then copied
  into the course gradebook one student at a time, so parallel grading gives exactly the scores
  of a sequential run and never loses one.
- :func:`feedback` runs ``nbgrader generate_feedback`` with the hidden tests removed from the
  cells and from the tracebacks (see :mod:`grader.feedback`).
- :func:`grade_rows` reads the gradebook into a table (student x notebook).
"""

from __future__ import annotations

import csv
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from grader import gradebook, reference_run, report, sandbox, verification
from grader.paths import CourseError, load_config, require_assignment, use_this_python


def nbgrader_api(root: Path, extra: Config | None = None) -> NbGraderAPI:
    """nbgrader's Python API for the course at ``root`` (optionally with extra configuration)."""
    use_this_python()
    config = load_config(root)
    if extra is not None:
        config.merge(extra)
    Path(config.Exchange.root).mkdir(parents=True, exist_ok=True)
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def db_url(root: Path) -> str:
    """The gradebook's database URL from the course configuration."""
    return load_config(root).CourseDirectory.db_url


def _check_result(result: dict, what: str) -> None:
    if not result.get("success"):
        detail = (result.get("error") or result.get("log") or "").strip().splitlines()
        last = detail[-1] if detail else "no details"
        raise CourseError(f"{what} failed: {last}")


# ----------------------------------------------------------------------------- release
def release(root: Path, assignment: str) -> Path:
    """Generate ``release/ASSIGNMENT`` from ``source/ASSIGNMENT``; record it in the gradebook."""
    require_assignment(root, assignment)
    result = nbgrader_api(root).generate_assignment(assignment, force=True, create=True)
    _check_result(result, f"generating the release of '{assignment}'")
    if reference_run.current(root, assignment) is None:
        reference_run.record(root, assignment)  # the time limits of grading come from it
    return root / "release" / assignment


# ----------------------------------------------------------------------------- autograde
@dataclass
class Event:
    """One line of the grading report: what happened to one notebook of one student."""

    assignment: str
    student: str
    notebook: str
    status: str  # graded, flagged, not graded, missing notebook
    points: float | None
    max_points: float | None
    detail: str = ""


@dataclass
class Graded:
    """The outcome of grading one student's submission."""

    student: str
    ok: bool
    seconds: float
    message: str = ""
    events: list[Event] = field(default_factory=list)


def submitted_students(root: Path, assignment: str) -> list[str]:
    """Students with a folder ``submitted/STUDENT/ASSIGNMENT``."""
    submitted = root / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())


def _require_in_gradebook(url: str, assignment: str) -> None:
    from sqlalchemy.exc import OperationalError

    try:
        gradebook_of = Gradebook(url)
    except OperationalError as error:
        where = url.split("@")[-1]  # never print a password
        reason = str(error.orig).strip().splitlines()[0] if error.orig else "no details"
        raise CourseError(f"cannot open the gradebook database at {where}: {reason}") from None
    with gradebook_of as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(
                f"assignment '{assignment}' is not in the gradebook: run `course release "
                f"{assignment}` first."
            ) from None


def worker_env(jobs: int) -> dict[str, str]:
    """The environment of a grading process when ``jobs`` of them share this machine."""
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    return {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def release_notebooks(root: Path, assignment: str) -> list[str]:
    """The notebook names (without .ipynb) of an assignment."""
    return sorted(p.stem for p in (root / "source" / assignment).glob("*.ipynb"))


def _examine(
    root: Path,
    assignment: str,
    student: str,
    url: str,
    verifications: dict[str, verification.Verification],
) -> list[Event]:
    """Report every notebook of a graded submission; flag tampering and zero its points.

    Tampering is what :mod:`grader.tampering` reads in the code (the notebook earns nothing).
    A test cell that earned points in the student's kernel but fails the trusted judge earns
    nothing and flags the notebook (:mod:`grader.verification`).
    """
    events = _notebook_events(root, assignment, student)
    missing = {e.notebook for e in events}
    with Gradebook(url) as gb:
        for name in release_notebooks(root, assignment):
            if name in missing:
                continue
            row = gb.find_submission_notebook(name, assignment, student)
            reasons = _tampering(root, assignment, student, name)
            if reasons:
                _zero(row)
            elif name in verifications:
                scores = {g.name: g.auto_score for g in row.grades}
                overruled = verification.disagreements(verifications[name], scores)
                _overrule(row, overruled)
                reasons = [f"{cell} {reason}" for cell, reason in overruled.items()]
            if reasons:
                gb.db.commit()
            status = "flagged" if reasons else "graded"
            detail = "; ".join(reasons)
            events.append(
                Event(assignment, student, name, status, row.score, row.max_score, detail)
            )
    return sorted(events, key=lambda e: e.notebook)


def _tampering(root: Path, assignment: str, student: str, name: str) -> list[str]:
    from grader import tampering
    from grader.paths import assignments
    from grader.submission import read_notebook

    graded_path = root / "autograded" / student / assignment / f"{name}.ipynb"
    if not graded_path.is_file():
        return []
    return tampering.scan_notebook(
        read_notebook(graded_path),
        read_notebook(root / "source" / assignment / f"{name}.ipynb"),
        assignment,
        assignments(root),
    )


def _overrule(row: object, cells: dict[str, str]) -> None:
    """The judge's verdict stands: the given test cells earn nothing; the notebook is flagged."""
    if not cells:
        return
    row.flagged = True
    for grade in row.grades:
        if grade.name in cells:
            grade.auto_score = 0.0


def _zero(row: object) -> None:
    """A flagged notebook earns no points: every grade is set to 0 and marked as graded."""
    row.flagged = True
    for grade in row.grades:
        if grade.auto_score is not None:
            grade.auto_score = 0.0
        if grade.needs_manual_grade or grade.manual_score is not None:
            grade.manual_score = 0.0
            grade.needs_manual_grade = False


UNSAFE = "graded WITHOUT the sandbox (--unsafe-no-sandbox): its code could reach the grader"


def grade_one(
    root: Path,
    assignment: str,
    student: str,
    main_db: Path,
    env: dict[str, str],
    limits: object,
    sandboxed: bool,
    judge: verification.Judge,
    times: reference_run.TimeLimits,
) -> tuple[Graded, str | None, Path | None]:
    submitted = root / "submitted" / student / assignment
    expected = release_notebooks(root, assignment)
    if not any((submitted / f"{name}.ipynb").is_file() for name in expected):
        message = "no notebook of the assignment in the submission"
        return (
            Graded(student, False, 0.0, message, _notebook_events(root, assignment, student)),
            None,
            None,
        )
    outcome, scratch = sandbox.grade(
        root, assignment, student, main_db, env, limits, sandboxed, judge, times
    )
    graded = Graded(student, outcome.ok, outcome.seconds, outcome.message)
    if outcome.ok:
        graded.events = _examine(root, assignment, student, outcome.db_url, outcome.verifications)
        notes = [n for n in (outcome.message, "" if sandboxed else UNSAFE) if n]
        for event in graded.events:
            if notes and event.status in ("graded", "flagged"):
                event.detail = "; ".join([event.detail, *notes] if event.detail else notes)
    else:
        graded.events = [
            Event(assignment, student, name, "not graded", None, None, outcome.message)
            for name in expected
        ]
    return graded, outcome.db_url, scratch


def _notebook_events(root: Path, assignment: str, student: str) -> list[Event]:
    """Missing and unexpected notebooks of a submission."""
    submitted = root / "submitted" / student / assignment
    known = release_notebooks(root, assignment)
    events = [
        Event(assignment, student, name, "missing notebook", 0.0, None,
              f"no {name}.ipynb in the submission (renamed or deleted?)")
        for name in known
        if not (submitted / f"{name}.ipynb").is_file()
    ]  # fmt: skip
    for extra in sorted(p.name for p in submitted.glob("*.ipynb") if p.stem not in known):
        detail = f"{extra} is not a notebook of this assignment: not graded"
        events.append(Event(assignment, student, extra, "ignored", None, None, detail))
    return events


def _record_empty(url: str, assignment: str, student: str) -> None:
    """A submission with nothing to grade appears in the gradebook with 0 points (once)."""
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.update_or_create_student(student)
            gb.add_submission(assignment, student)


def copy_submission(source_url: str, target_url: str, assignment: str, student: str) -> None:
    """Copy one graded submission (scores, comments, flags) from one gradebook to another."""
    with warnings.catch_warnings():
        # nbgrader's update_or_create_submission triggers harmless SQLAlchemy autoflush warnings.
        warnings.simplefilter("ignore")
        _copy_submission(source_url, target_url, assignment, student)


def _copy_submission(source_url: str, target_url: str, assignment: str, student: str) -> None:
    with Gradebook(source_url) as src, Gradebook(target_url) as dst:
        try:
            submission = src.find_submission(assignment, student)
        except MissingEntry:
            return
        person = src.find_student(student)
        dst.update_or_create_student(
            student,
            first_name=person.first_name,
            last_name=person.last_name,
            email=person.email,
            lms_user_id=person.lms_user_id,
        )
        dst.update_or_create_submission(
            assignment, student, timestamp=submission.timestamp, extension=submission.extension
        )
        for notebook in submission.notebooks:
            target = dst.find_submission_notebook(notebook.name, assignment, student)
            target.flagged = notebook.flagged
            target.late_submission_penalty = notebook.late_submission_penalty
            for grade in notebook.grades:
                row = dst.find_grade(grade.name, notebook.name, assignment, student)
                row.auto_score = grade.auto_score
                row.manual_score = grade.manual_score
                row.extra_credit = grade.extra_credit
                row.needs_manual_grade = grade.needs_manual_grade
            for comment in notebook.comments:
                row = dst.find_comment(comment.name, notebook.name, assignment, student)
                row.auto_comment = comment.auto_comment
                row.manual_comment = comment.manual_comment
        dst.db.commit()


def autograde(
    root: Path,
    assignment: str,
    jobs: int = 1,
    students: Iterable[str] | None = None,
    progress: Callable[[Graded], None] | None = None,
    unsafe_no_sandbox: bool = False,
    cluster: str | None = None,
) -> list[Graded]:
    """Autograde every submission of ``assignment`` (or the given students), ``jobs`` at a time.

    Each student runs in its own ``nbgrader autograde`` process, in a scratch course with a
    private copy of the gradebook and within the course's limits (:mod:`grader.sandbox`); the
    notebook's kernel runs in a bubblewrap sandbox (:mod:`grader.kernels`). Without bubblewrap
    grading refuses to start, unless ``unsafe_no_sandbox``: then every notebook's report line
    says it was graded without the sandbox. Its
    scores are checked for tampering (:mod:`grader.tampering`) and copied into the course
    gradebook as soon as it finishes, one student at a time, so that an interrupted run keeps
    every student graded so far and a failed submission keeps its earlier scores. The report
    lines go to ``grading_report.csv``. Returns one :class:`Graded` per student.

    With ``cluster`` (a Dask scheduler's address, or ``local:N``) the submissions are graded
    on Dask workers instead, in the same sandbox, and merged here (:mod:`grader.cluster`).
    """
    require_assignment(root, assignment)
    url = db_url(root)
    main_db = gradebook.sqlite_file(url)
    if main_db is not None and not main_db.exists():
        raise CourseError(f"no gradebook at {main_db}: run `course release {assignment}` first.")
    _require_in_gradebook(url, assignment)
    chosen = sorted(students) if students is not None else submitted_students(root, assignment)
    if not chosen:
        raise CourseError(
            f"no submissions of '{assignment}' in {root / 'submitted'}: expected folders "
            f"submitted/STUDENT/{assignment}/ (nbgrader collect puts them there)."
        )
    missing = [s for s in chosen if not (root / "submitted" / s / assignment).is_dir()]
    if missing:
        raise CourseError(f"no submission of '{assignment}' for {', '.join(missing)}")
    if not unsafe_no_sandbox:
        sandbox.check_sandbox()
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="course-snapshot-") as folder:
        if main_db is None or cluster is not None:
            # The workers copy a snapshot of the one assignment (grader.gradebook).
            main_db = gradebook.snapshot(url, assignment, Path(folder) / "gradebook.db")
        if cluster is not None:
            return _autograde_on_cluster(
                root, assignment, chosen, cluster, url, main_db, progress, unsafe_no_sandbox
            )
        return _autograde(root, assignment, chosen, jobs, url, main_db, progress, unsafe_no_sandbox)


def _limits(root: Path, assignment: str) -> tuple[sandbox.Limits, reference_run.TimeLimits]:
    """The configured limits of one submission, and the time limits from the reference run."""
    limits = sandbox.limits_of(root)
    cell_ceiling = int(load_config(root).Execute.timeout or 0) or 120
    times = reference_run.limits_for(root, assignment, cell_ceiling, limits.submission_seconds)
    return limits, times


def _autograde(
    root: Path,
    assignment: str,
    chosen: list[str],
    jobs: int,
    url: str,
    main_db: Path,
    progress: Callable[[Graded], None] | None,
    unsafe_no_sandbox: bool,
) -> list[Graded]:
    """Grade ``chosen``, ``jobs`` at a time, each from a copy of ``main_db``; merge into ``url``."""
    env, (limits, times) = worker_env(jobs), _limits(root, assignment)
    results: list[Graded] = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    sandboxed = not unsafe_no_sandbox
    judge = verification.Judge()
    futures = [
        pool.submit(grade_one, root, assignment, s, main_db, env, limits, sandboxed, judge, times)
        for s in chosen
    ]
    try:
        for future in as_completed(futures):
            graded, own_url, scratch = future.result()
            merge(root, url, assignment, graded, own_url)
            if scratch is not None:
                sandbox.remove(scratch)
            results.append(graded)
            if progress:
                progress(graded)
    except BaseException:
        # Interrupted: stop the students still running; those saved so far stay saved.
        pool.shutdown(wait=False, cancel_futures=True)
        sandbox.stop_all()
        judge.close()
        raise
    pool.shutdown()
    judge.close()
    return sorted(results, key=lambda g: g.student)


def merge(root: Path, url: str, assignment: str, graded: Graded, own_url: str | None) -> None:
    """Merge one graded submission into the course gradebook at ``url`` and the report.

    ``own_url`` is the submission's private gradebook (None: nothing was graded, and the
    student appears with 0 points unless already in the gradebook)."""
    if graded.ok and own_url is not None:
        copy_submission(own_url, url, assignment, graded.student)
    elif own_url is None:
        _record_empty(url, assignment, graded.student)
    report.update(root, graded.events)


def _autograde_on_cluster(
    root: Path,
    assignment: str,
    chosen: list[str],
    spec: str,
    url: str,
    main_db: Path,
    progress: Callable[[Graded], None] | None,
    unsafe_no_sandbox: bool,
) -> list[Graded]:
    """Grade ``chosen`` on the Dask cluster ``spec``, one task each; merge into ``url``."""
    from grader import cluster

    limits, times = _limits(root, assignment)
    common = dict(
        assignment=assignment,
        source={p.name: p.read_bytes() for p in (root / "source" / assignment).glob("*.ipynb")},
        config=(root / "nbgrader_config.py").read_bytes(),
        gradebook=main_db.read_bytes(),
        limits={name: getattr(limits, name) for name in limits.trait_names(config=True)},
        times=times,
        sandboxed=not unsafe_no_sandbox,
        threads=cluster.local_threads(spec),
        expected=cluster.fingerprint(),
    )
    results: list[Graded] = []

    def done(graded: Graded, own_url: str | None) -> None:
        merge(root, url, assignment, graded, own_url)
        results.append(graded)
        if progress:
            progress(graded)

    def merged(result: cluster.TaskResult) -> None:
        graded = result.graded
        if result.gradebook:  # graded: its notebooks, then its scores
            cluster.write_autograded(root, result, assignment)
            with tempfile.TemporaryDirectory(prefix="course-merge-") as folder:
                private = Path(folder) / "gradebook.db"
                private.write_bytes(result.gradebook)
                done(graded, f"sqlite:///{private}")
        else:  # b"": grading failed (earlier scores kept); None: nothing to grade
            done(graded, None if result.gradebook is None else "")

    def failed(student: str, message: str) -> None:
        events = [
            Event(assignment, student, name, "not graded", None, None, message)
            for name in release_notebooks(root, assignment)
        ]
        done(Graded(student, False, 0.0, message, events), "")

    tasks = []
    for student in chosen:
        try:
            submission = cluster.read_submission(root / "submitted" / student / assignment)
        except CourseError as error:
            failed(student, str(error))
            continue
        tasks.append(cluster.Task(student=student, submission=submission, **common))
    cluster.grade_on_cluster(spec, tasks, merged, lambda task, why: failed(task.student, why))
    return sorted(results, key=lambda g: g.student)


# ----------------------------------------------------------------------------- feedback
def feedback(root: Path, assignment: str) -> Path:
    """Write ``feedback/STUDENT/ASSIGNMENT/*.html`` without hidden tests (cells or tracebacks)."""
    from grader.feedback import feedback_config

    require_assignment(root, assignment)
    api = nbgrader_api(root, feedback_config())
    result = api.generate_feedback(assignment, force=True)
    _check_result(result, f"generating feedback for '{assignment}'")
    return root / "feedback"


# ----------------------------------------------------------------------------- grades
@dataclass
class GradeRow:
    """One student's score on one notebook of one assignment."""

    student: str
    assignment: str
    notebook: str
    score: float
    max_score: float
    auto_score: float
    needs_manual_grade: bool
    flagged: bool = False


def grade_rows(root: Path) -> list[GradeRow]:
    """Every graded (student, assignment, notebook) in the gradebook."""
    url = db_url(root)
    file = gradebook.sqlite_file(url)
    if file is not None and not file.exists():
        raise CourseError(f"no gradebook at {file}: autograde something first.")
    rows = []
    with Gradebook(url) as gb:
        for assignment in gb.assignments:
            for notebook in assignment.notebooks:
                for sub in gb.notebook_submission_dicts(notebook.name, assignment.name):
                    rows.append(
                        GradeRow(
                            student=sub["student"],
                            assignment=assignment.name,
                            notebook=notebook.name,
                            score=float(sub["score"]),
                            max_score=float(sub["max_score"]),
                            auto_score=float(sub["code_score"]),
                            needs_manual_grade=bool(sub["needs_manual_grade"]),
                            flagged=bool(sub.get("flagged")),
                        )
                    )
    return sorted(rows, key=lambda r: (r.student, r.assignment, r.notebook))


def write_grades_csv(rows: list[GradeRow], path: Path) -> Path:
    """Write the grade rows to a CSV file (one line per student and notebook)."""
    fields = ["student", "assignment", "notebook", "score", "max_score", "auto_score"]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*fields, "needs_manual_grade", "flagged"])
        for r in rows:
            flags = [int(r.needs_manual_grade), int(r.flagged)]
            writer.writerow([getattr(r, f) for f in fields] + flags)
    return path


def format_grade_table(rows: list[GradeRow]) -> str:
    """A text table: one line per student, one column per notebook, 'points/max'.

    A star marks a notebook whose written answers are still to be graded by hand.
    """
    if not rows:
        return "(no graded submissions)"
    columns = sorted({(r.assignment, r.notebook) for r in rows})
    students = sorted({r.student for r in rows})
    cells = {(r.student, r.assignment, r.notebook): r for r in rows}
    header = ["student", *[f"{a}/{n}" for a, n in columns]]
    lines = [header]
    for student in students:
        line = [student]
        for a, n in columns:
            r = cells.get((student, a, n))
            line.append("-" if r is None else _points(r))
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)) for line in lines
    ]
    text.insert(1, "  ".join("-" * w for w in widths))
    if any(r.needs_manual_grade for r in rows):
        text.append("* written answers not graded yet (formgrader); the score counts them as 0")
    return "\n".join(text)


def _points(row: GradeRow) -> str:
    star = "*" if row.needs_manual_grade else ""
    flag = " FLAGGED" if row.flagged else ""
    return f"{row.score:g}/{row.max_score:g}{star}{flag}"
