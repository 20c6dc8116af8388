"""``course autograde``: every submission of an assignment, N at a time or on a Dask cluster.

Each student is graded by :func:`grader.grading.grade_one` (its own ``nbgrader autograde``
process, in a scratch course with a private copy of the gradebook, within the limits); the
scores are copied into the course gradebook as soon as the student is done, one student at a
time (:func:`grader.grading.merge`), so parallel grading gives exactly the scores of a
sequential run, and an interrupted run keeps every student merged so far. With a database
server for a gradebook, or on a cluster, each private copy starts from an sqlite snapshot of
the one assignment (:func:`grader.gradebook.snapshot`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from grader import gradebook, grading, limits, sandbox
from grader.cluster import grade_class
from grader.grading import Graded
from grader.job import GradingJob
from grader.nbgrader_run import worker_env
from grader.paths import (
    CourseError,
    db_url,
    require_assignment,
    submitted_students,
    use_this_python,
)
from grader.verification import Judge


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

    The notebook's kernel runs in a bubblewrap sandbox (:mod:`grader.sandbox`). Without
    bubblewrap grading refuses to start, unless ``unsafe_no_sandbox``: then every notebook's
    report line says it was graded without the sandbox. The scores are checked for tampering
    and against the trusted judge, then merged into the course gradebook as each student
    finishes; a failed submission keeps its earlier scores. The report lines go to
    ``grading_report.csv``. Returns one :class:`Graded` per student.

    With ``cluster`` (a Dask scheduler's address, or ``local:N``) the submissions are graded
    on Dask workers instead, in the same sandbox, and merged here (:mod:`grader.cluster`).
    """
    url = db_url(root)
    main_db = _check(root, assignment, url)
    chosen = _chosen(root, assignment, students)
    if not unsafe_no_sandbox:
        sandbox.check_sandbox()
    use_this_python()
    cell_limits, times = limits.of_assignment(root, assignment)
    with tempfile.TemporaryDirectory(prefix="course-snapshot-") as folder:
        if main_db is None or cluster is not None:
            # The workers copy a snapshot of the one assignment (grader.gradebook).
            main_db = gradebook.snapshot(url, assignment, Path(folder) / "gradebook.db")
        job = GradingJob(
            root, assignment, main_db, cell_limits, times, worker_env(jobs), not unsafe_no_sandbox
        )
        if cluster is not None:
            return grade_class(job, chosen, cluster, url, progress)
        return grade_here(job, chosen, jobs, url, progress)


def _check(root: Path, assignment: str, url: str) -> Path | None:
    """Fail unless the assignment is released into a gradebook; return its sqlite file (None:
    a database server)."""
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
    job: GradingJob,
    students: list[str],
    jobs: int,
    url: str,
    progress: Callable[[Graded], None] | None = None,
) -> list[Graded]:
    """Grade ``students`` on this machine, ``jobs`` at a time; merge each into ``url``."""
    judge = Judge()
    job = replace(job, judge=judge)
    results: list[Graded] = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    futures = [pool.submit(grading.grade_one, job, student) for student in students]
    try:
        for future in as_completed(futures):
            graded, own = future.result()
            grading.merge(job.root, url, job.assignment, graded, own)
            results.append(graded)
            if progress:
                progress(graded)
    except BaseException:
        # Interrupted: stop the students still running; those saved so far stay saved.
        pool.shutdown(wait=False, cancel_futures=True)
        grading.stop_all()
        judge.close()
        raise
    pool.shutdown()
    judge.close()
    return sorted(results, key=lambda g: g.student)
