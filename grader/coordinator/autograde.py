"""``course autograde``: every submission of an assignment, N at a time or on a Dask cluster.

Each student is graded by :func:`grader.coordinator.grading.grade_one` (its own ``nbgrader
autograde`` process, in a scratch course with a private copy of the gradebook, within the limits);
the scores are copied into the course gradebook as soon as the student is done, one student at a
time (:func:`grader.coordinator.grading.merge`), so parallel grading gives exactly the scores of a
sequential run, and an interrupted run keeps every student merged so far. With a database server for
a gradebook, or on a cluster, each private copy starts from an sqlite snapshot of the one assignment
(:func:`grader.books.gradebook.snapshot`).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from grader.books import gradebook
from grader.coordinator import grading, nbgrader_run
from grader.coordinator.cluster import grade_class
from grader.coordinator.grading import Graded
from grader.coordinator.job import GradingJob
from grader.sandbox import bubblewrap as sandbox
from grader.shared import limits
from grader.shared.limits import worker_env
from grader.shared.paths import (
    CourseError,
    db_url,
    require_assignment,
    submitted_students,
    use_this_python,
)
from grader.shared.verification import Judge

if TYPE_CHECKING:
    from grader.warm.pool import WarmPool
    from grader.warm.service import KeptWorkers


def autograde(
    root: Path,
    assignment: str,
    jobs: int = 1,
    students: Iterable[str] | None = None,
    progress: Callable[[Graded], None] | None = None,
    unsafe_no_sandbox: bool = False,
    cluster: str | None = None,
    warm: bool = True,
) -> list[Graded]:
    """Autograde every submission of ``assignment`` (or the given students), ``jobs`` at a time.

    The notebook's kernel runs in a bubblewrap sandbox (:mod:`grader.sandbox.bubblewrap`). Without
    bubblewrap grading refuses to start, unless ``unsafe_no_sandbox``: then every notebook's report
    line says it was graded without the sandbox. The scores are checked for tampering and against
    the trusted judge, then merged into the course gradebook as each student finishes; a failed
    submission keeps its earlier scores. The report lines go to ``grading_report.csv``. Returns one
    :class:`Graded` per student.

    With ``cluster`` (a Dask scheduler's address, or ``local:N``) the submissions are graded on Dask
    workers instead, in the same sandbox, and merged here (:mod:`grader.coordinator.cluster`).
    ``warm`` (the default): the workers' kernels are forked from a preloaded zygote in the sandbox
    (:mod:`grader.warm.pool`); not ``warm`` (``--cold``), without the sandbox, or on a cluster, each
    kernel starts afresh.
    """
    if cluster is None:
        each = (lambda _assignment, graded: progress(graded)) if progress else None
        classes = {assignment: students}
        return autograde_classes(root, classes, jobs, each, unsafe_no_sandbox, warm=warm)[
            assignment
        ]
    url = db_url(root)
    _check(root, assignment, url)
    chosen = _chosen(root, assignment, students)
    _prepare(unsafe_no_sandbox)
    with tempfile.TemporaryDirectory(prefix="course-snapshot-") as folder:
        # The workers copy a snapshot of the one assignment (grader.books.gradebook).
        job = _job(root, assignment, url, Path(folder), jobs, not unsafe_no_sandbox, None)
        return grade_class(job, chosen, cluster, url, progress)


def autograde_classes(
    root: Path,
    classes: Mapping[str, Iterable[str] | None],
    jobs: int = 1,
    progress: Callable[[str, Graded], None] | None = None,
    unsafe_no_sandbox: bool = False,
    finished: Callable[[str], None] | None = None,
    warm: bool = True,
) -> dict[str, list[Graded]]:
    """Autograde several assignments on this machine in one pool of ``jobs`` workers.

    ``classes`` maps each assignment to its students (None: every submission). The submissions are
    queued in that order and no assignment waits for the last student of the one before (`course
    demo` grades five students of each; by assignments, one worker of two idled at the end of each).
    ``progress(assignment, graded)`` is called as each student is merged and
    ``finished(assignment)`` when an assignment's last student is (`course demo` writes its feedback
    then, while the workers go on). With ``warm`` (and the sandbox), one zygote forks the kernels of
    every worker (:mod:`grader.warm.pool`). Returns the :class:`Graded` of each assignment.
    """
    warm = warm and not unsafe_no_sandbox  # a zygote forks kernels into the sandbox only
    url = db_url(root)
    main_dbs = {assignment: _check(root, assignment, url) for assignment in classes}
    chosen = {assignment: _chosen(root, assignment, s) for assignment, s in classes.items()}
    _prepare(unsafe_no_sandbox)
    kept = _kept_workers(root, jobs) if warm else None  # `course workers start`
    judge = Judge(kept.judge_socket if kept else None)
    judge.start()  # it imports torch while the warm workers do: the first verdict does not wait
    try:
        with (
            tempfile.TemporaryDirectory(prefix="course-snapshot-") as folder,
            _pool(warm, jobs, kept) as pool,
        ):
            job_of = {
                a: replace(
                    _job(root, a, url, Path(folder), jobs, not unsafe_no_sandbox, main_dbs[a]),
                    warm=pool,
                    judge=judge,
                )
                for a in classes
            }
            return grade_here(job_of, chosen, jobs, url, progress, finished)
    finally:
        judge.close()
        if kept is not None:
            kept.close()


def _kept_workers(root: Path, jobs: int) -> KeptWorkers | None:
    """The warm workers kept by `course workers start` for this course, if they fit the run."""
    from grader.warm import service as warm_service  # jupyter_client: only when warm

    return warm_service.attach(root, jobs)


@contextmanager
def _pool(
    warm: bool, jobs: int, kept: KeptWorkers | None = None
) -> Iterator[WarmPool | KeptWorkers | None]:
    """The warm zygote of ``jobs`` workers (``warm``): the kept ones if given, else the run's own,
    stopped when grading ends; else None (also when it cannot start here: grading then goes on cold,
    and says so)."""
    if kept is not None:
        yield kept
        return
    if not warm:
        yield None
        return
    from grader.warm.pool import WarmPool  # jupyter_client: only when asked for

    try:
        pool = WarmPool(jobs, worker_env(jobs))
        pool.ready()
    except CourseError as error:
        print(f"{error}; grading with kernels started afresh (--cold)", file=sys.stderr)
        yield None
        return
    try:
        yield pool
    finally:
        pool.close()


def _prepare(unsafe_no_sandbox: bool) -> None:
    """Refuse to grade without the sandbox (unless told); run nbgrader with this Python; a new run
    may start nbgrader processes (after an interrupted one too)."""
    nbgrader_run.allow_runs()
    sandbox.check_installed()  # its processes import the grader from the installation
    if not unsafe_no_sandbox:
        sandbox.check_sandbox()
    use_this_python()


def _job(
    root: Path,
    assignment: str,
    url: str,
    folder: Path,
    jobs: int,
    sandboxed: bool,
    main_db: Path | None,
) -> GradingJob:
    """How ``assignment`` is graded in this run. Without an sqlite gradebook to start from
    (``main_db`` None: a database server, or a cluster), each private copy starts from a snapshot of
    the one assignment, written into ``folder`` (:func:`grader.books.gradebook.snapshot`).
    """
    if main_db is None:
        main_db = gradebook.snapshot(url, assignment, folder / f"{assignment}.db")
    cell_limits, times = limits.of_assignment(root, assignment)
    return GradingJob(root, assignment, main_db, cell_limits, times, worker_env(jobs), sandboxed)


def _check(root: Path, assignment: str, url: str) -> Path | None:
    """Fail unless the assignment is released into a gradebook; return its sqlite file (None: a
    database server)."""
    require_assignment(root, assignment)
    main_db = gradebook.sqlite_file(url)
    if main_db is not None and not main_db.exists():
        raise CourseError(f"no gradebook at {main_db}: run `course release {assignment}` first.")
    gradebook.require_assignment(url, assignment)
    return main_db


def _chosen(root: Path, assignment: str, students: Iterable[str] | None) -> list[str]:
    """The students to grade: the given ones, or every submission; fail when there is none."""
    chosen = sorted(students) if students is not None else submitted_students(root, assignment)
    if not chosen:
        raise CourseError(
            f"no submissions of '{assignment}' in {root / 'submitted'}: expected folders "
            f"submitted/STUDENT/{assignment}/ (nbgrader collect puts them there)."
        )
    missing = [s for s in chosen if not (root / "submitted" / s / assignment).is_dir()]
    if missing:
        raise CourseError(f"no submission of '{assignment}' for {', '.join(missing)}")
    return chosen


def grade_here(
    job_of: Mapping[str, GradingJob],
    students: Mapping[str, list[str]],
    jobs: int,
    url: str,
    progress: Callable[[str, Graded], None] | None = None,
    finished: Callable[[str], None] | None = None,
) -> dict[str, list[Graded]]:
    """Grade the ``students`` of each assignment on this machine, ``jobs`` at a time (with the jobs'
    judge); merge each into ``url`` as it is done."""
    results: dict[str, list[Graded]] = {a: [] for a in job_of}
    # Warm, a worker's slot is the unit of work: one thread more than workers, so that one
    # submission's trusted judge runs while the next kernel starts
    # (grader.coordinator.grading.grade_one).
    warm = any(job.warm for job in job_of.values())
    pool = ThreadPoolExecutor(max_workers=max(1, jobs) + (1 if warm else 0))
    futures = {
        pool.submit(grading.grade_one, job_of[a], student): a
        for a in job_of
        for student in students[a]
    }
    try:
        for future in as_completed(futures):
            assignment = futures[future]
            graded, own = future.result()
            grading.merge(job_of[assignment].root, url, assignment, graded, own)
            results[assignment].append(graded)
            if progress:
                progress(assignment, graded)
            if finished and len(results[assignment]) == len(students[assignment]):
                finished(assignment)
    except BaseException:
        # Interrupted: stop the students still running; those saved so far stay saved.
        pool.shutdown(wait=False, cancel_futures=True)
        grading.stop_all()
        raise
    pool.shutdown()
    return {a: sorted(graded, key=lambda g: g.student) for a, graded in results.items()}
