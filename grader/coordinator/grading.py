"""Grading one submission: the worker's half (:func:`grade_one`) and the coordinator's
(:func:`merge`).

:func:`grade_one` grades one student in a scratch course of its own
(:mod:`grader.coordinator.scratch`): one ``nbgrader autograde`` process within the limits
(:mod:`grader.coordinator.nbgrader_run`), the trusted judge's verdicts
(:mod:`grader.shared.verification`) and the disk quota (:mod:`grader.shared.quota`) for the
submission, then the rule after a run and one report line per notebook
(:func:`grader.shared.finish.finish_notebook`, the same as plain nbgrader's). It returns the
student's private gradebook as bytes, so that a local thread and a Dask worker hand back the same
thing. :func:`merge` copies those scores into the course gradebook and the report, one student at a
time.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from grader.books import deadlines, gradebook
from grader.coordinator import nbgrader_run, scratch
from grader.coordinator.job import GradingJob
from grader.shared import quota, records, report, verification
from grader.shared.finish import finish_notebook
from grader.shared.notebooks import read_notebook
from grader.shared.paths import release_notebooks
from grader.shared.report import Event

UNSAFE = "graded WITHOUT the sandbox (--unsafe-no-sandbox): its code could reach the grader"
# The warm worker (grader.warm.pool) ended while a submission's kernel ran: from outside (killed,
# out of memory), since a submission cannot reach it. Its kernel died with it, so the submission is
# graded once more by the worker's replacement; this is said if that one ends too.
ZYGOTE_ENDED = (
    "the warm worker ended twice while this submission was graded (from outside: the submission "
    "cannot reach it), so its scores would be wrong: grade it again (its earlier scores stay)"
)
ZYGOTE_TRIES = 2


@dataclass
class Graded:
    """The outcome of grading one student's submission."""

    student: str
    ok: bool
    seconds: float
    message: str = ""
    events: list[Event] = field(default_factory=list)
    record: dict = field(default_factory=dict)  # the judge's verdicts (grader.shared.records)


def grade_one(job: GradingJob, student: str) -> tuple[Graded, bytes | None]:
    """Grade ``student``'s submission; return the outcome and its private gradebook.

    The autograded notebooks are written to ``job.root/autograded/STUDENT/ASSIGNMENT``. The
    gradebook is None when there was nothing to grade, ``b""`` when grading failed (the earlier
    scores stay), else the sqlite file holding the new scores (see :func:`merge`). A submission
    whose warm worker ended while it was graded is graded once more (:data:`ZYGOTE_ENDED`).
    """
    root, assignment = job.root, job.assignment
    submitted = root / "submitted" / student / assignment
    if not any((submitted / f"{n}.ipynb").is_file() for n in release_notebooks(root, assignment)):
        message = "no notebook of the assignment in the submission"
        return Graded(student, False, 0.0, message, notebook_events(job, student)), None
    seconds = 0.0
    for _ in range(ZYGOTE_TRIES):
        outcome = _grade(job, student)
        if isinstance(outcome, tuple):
            return outcome
        seconds += outcome  # the warm worker ended: its replacement grades it again
    return not_graded(root, assignment, student, ZYGOTE_ENDED, seconds), b""


def _grade(job: GradingJob, student: str) -> tuple[Graded, bytes | None] | float:
    """:func:`grade_one`'s work once, or the seconds it took if the warm worker ended."""
    root, assignment = job.root, job.assignment
    with ExitStack() as stack:
        # The warm worker's slot is given back once nbgrader is done: the next kernel starts while
        # this submission is judged (its scratch course stays until then, see WarmPool).
        worker = stack.enter_context(ExitStack())
        zygote = worker.enter_context(job.warm.worker()) if job.warm else None
        parent = zygote.root if zygote else None
        folder = stack.enter_context(
            scratch.scratch_course(root, assignment, student, job.gradebook, parent)
        )
        seed = verification.seed_for(assignment, job.judge)
        run = nbgrader_run.run(job, student, folder, seed, zygote.socket if zygote else None)
        if zygote and not zygote.alive():  # its kernel ended with it: not the submission's doing
            return run.seconds
        worker.close()
        if not run.ok:
            return not_graded(root, assignment, student, run.message, run.seconds), b""
        graded_folder = folder / "autograded" / student / assignment
        verdicts = verification.judge_notebooks(job.judge, assignment, seed, graded_folder)
        # The disk quota: the largest files over it never reach the course (grader.shared.quota).
        kept = [f"{name}.ipynb" for name in release_notebooks(root, assignment)]
        over = quota.enforce(graded_folder, job.limits.disk_mb, kept)
        target = root / "autograded" / student / assignment
        shutil.rmtree(target, ignore_errors=True)
        scratch.copy_without_links(graded_folder, target)
        url = f"sqlite:///{folder / 'gradebook.db'}"
        events = examine(job, student, url, verdicts, run, over)
        graded = Graded(student, True, run.seconds, run.message, events)
        graded.record = records.of(run.seconds, verdicts)
        return graded, (folder / "gradebook.db").read_bytes()


def not_graded(
    root: Path, assignment: str, student: str, message: str, seconds: float = 0.0
) -> Graded:
    """A submission whose grading failed: every notebook 'not graded', with ``message``."""
    events = [
        Event(assignment, student, name, "not graded", None, None, message)
        for name in release_notebooks(root, assignment)
    ]
    return Graded(student, False, seconds, message, events)


def examine(
    job: GradingJob,
    student: str,
    url: str,
    verdicts: dict[str, verification.Verification],
    run: nbgrader_run.Run,
    over: str,
) -> list[Event]:
    """Report every notebook of a graded submission (the gradebook at ``url``), each handed in
    notebook settled by :func:`grader.shared.finish.finish_notebook` (the rule plain nbgrader
    follows too), with ``run``'s notes and the quota's words ``over`` for the whole submission."""
    root, assignment = job.root, job.assignment
    events = notebook_events(job, student)
    missing = {e.notebook for e in events}
    notes = () if job.sandboxed else (UNSAFE,)
    folder = root / "autograded" / student / assignment
    for name in release_notebooks(root, assignment):
        if name in missing:
            continue
        path = folder / f"{name}.ipynb"
        graded = read_notebook(path) if path.is_file() else None
        events.append(
            finish_notebook(url, root, assignment, student, name, graded,
                            verdict=verdicts.get(name), over=over, stopped=name in run.stopped,
                            note=run.message, notes=notes)
        )  # fmt: skip
    return sorted(events, key=lambda e: e.notebook)


def notebook_events(job: GradingJob, student: str) -> list[Event]:
    """Missing and unexpected notebooks of a submission."""
    assignment = job.assignment
    submitted = job.root / "submitted" / student / assignment
    known = release_notebooks(job.root, assignment)
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


def merge(root: Path, url: str, assignment: str, graded: Graded, own: bytes | None) -> None:
    """Merge one graded submission into the course gradebook at ``url`` and the report.

    ``own`` is the submission's private gradebook from :func:`grade_one` (None: nothing was graded,
    and the student appears with 0 points unless already in the gradebook)."""
    if graded.ok and own:
        with tempfile.TemporaryDirectory(prefix="course-merge-") as folder:
            private = Path(folder) / "gradebook.db"
            private.write_bytes(own)
            gradebook.copy_submission(f"sqlite:///{private}", url, assignment, graded.student)
        deadlines.apply_pending(root, url, assignment, graded.student)  # given before grading
    elif own is None:
        gradebook.record_empty(url, assignment, graded.student)
    report.update(root, graded.events)
    if graded.ok or own is not None:  # graded, or tried: its time (and verdicts) for the report
        records.write(
            root, assignment, graded.student, graded.record or records.of(graded.seconds, {})
        )


def stop_all() -> None:
    """Stop every grading of this process and remove its scratch courses (interrupted)."""
    nbgrader_run.stop_all()
    scratch.remove_all()
