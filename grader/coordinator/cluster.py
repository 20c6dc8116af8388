"""Grading on a Dask cluster: one task per submission, merged by the coordinator.

``course autograde ASSIGNMENT --scheduler tcp://HOST:8786`` (or ``--cluster local:N`` for a
:class:`distributed.LocalCluster` of N one-thread workers on this machine) sends each submission
to a Dask worker as one task. The task carries everything the worker needs and nothing more: the
submission's files, the assignment's source notebooks (for the tampering scan), the course
configuration, the limits, and the sqlite snapshot of the one assignment in the gradebook
(:mod:`grader.books.gradebook`). The worker grades it exactly as local grading does (a scratch
course, ``nbgrader autograde`` within the limits, the kernel in bubblewrap, the trusted judge;
:func:`grader.coordinator.grading.grade_one`) and returns the autograded notebooks, its private
gradebook and the report lines. The coordinator merges each result as it arrives, one at a time
(:func:`grade_class`, :func:`grader.coordinator.grading.merge`), so workers never hold the
gradebook's credentials and an interrupted run keeps every submission merged so far. A worker that
dies mid-task loses nothing: the scheduler runs the task again on another worker.

Every worker must run the same course code as the coordinator: :func:`fingerprint` hashes the
course's Python packages, and the coordinator refuses a cluster with a worker whose fingerprint
differs (a task also refuses to run on one).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path, PurePosixPath

from grader.coordinator import grading
from grader.coordinator.grading import Graded
from grader.coordinator.job import GradingJob
from grader.sandbox import bubblewrap as sandbox
from grader.shared import quota, verification
from grader.shared.finish import TIMED_OUT
from grader.shared.limits import Limits, TimeLimits, worker_env
from grader.shared.paths import CourseError, release_notebooks, use_this_python

PACKAGES = ("course", "grader", "judge")  # the code a worker runs; hashed by fingerprint()


def fingerprint() -> str:
    """The course's version and a hash of its Python code: equal on every machine only when the same
    course is installed."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        folder = Path(find_spec(package).origin).parent  # found, not imported
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder.parent)).encode())
            digest.update(path.read_bytes())
    return f"{version('course')}+{digest.hexdigest()[:12]}"


@dataclass
class Task:
    """What a worker receives to grade one submission (plain data, pickled by Dask)."""

    assignment: str
    student: str
    submission: dict[str, bytes]  # relative path -> content, the submitted folder's files
    source: dict[str, bytes]  # notebook file name -> content, the assignment's source/
    config: bytes  # nbgrader_config.py
    gradebook: bytes  # sqlite snapshot of the assignment
    limits: dict[str, int]  # grader.shared.limits.Limits' traits
    times: TimeLimits
    sandboxed: bool
    threads: int | None  # torch threads per grading kernel (None: the worker decides)
    expected: str  # the coordinator's fingerprint()


@dataclass
class TaskResult:
    """What a worker returns: the graded submission, its notebooks and private gradebook."""

    graded: Graded
    autograded: dict[str, bytes] = field(default_factory=dict)
    gradebook: bytes | None = None  # None: nothing was graded (see grading.merge)


# ----------------------------------------------------------------------------- worker side
_JUDGE: verification.Judge | None = None
_JUDGE_LOCK = threading.Lock()


def _judge() -> verification.Judge:
    """One judge process per worker, shared by its grading threads."""
    global _JUDGE
    with _JUDGE_LOCK:
        if _JUDGE is None:
            _JUDGE = verification.Judge()
        return _JUDGE


def worker_state() -> dict[str, str]:
    """What the coordinator checks on every worker before grading: the course's fingerprint and
    whether bubblewrap can sandbox a kernel there (empty, or why not)."""
    try:
        sandbox.check_sandbox()
        problem = ""
    except CourseError as error:
        problem = str(error)
    return {"fingerprint": fingerprint(), "sandbox": problem}


def grade_task(task: Task) -> TaskResult:
    """Grade one submission on this worker (a Dask task); see the module's docstring."""
    own = fingerprint()
    if own != task.expected:
        raise CourseError(f"this worker runs course {own}, the coordinator {task.expected}")
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="course-task-") as folder:
        root = _course_of(Path(folder), task)
        job = GradingJob(
            root, task.assignment, root / "snapshot.db", Limits(**task.limits), task.times,
            worker_env(task.threads or _threads_here()), task.sandboxed, _judge(),
        )  # fmt: skip
        graded, gradebook = grading.grade_one(job, task.student)
        result = TaskResult(graded, gradebook=gradebook)
        if graded.ok and gradebook:
            result.autograded = _files(root / "autograded" / task.student / task.assignment)
    return result


def _course_of(folder: Path, task: Task) -> Path:
    """A course folder holding just what grading ``task`` needs."""
    (folder / "nbgrader_config.py").write_bytes(task.config)
    (folder / "snapshot.db").write_bytes(task.gradebook)
    source = folder / "source" / task.assignment
    source.mkdir(parents=True)
    for name, content in task.source.items():
        (source / _safe(name)).write_bytes(content)
    submitted = folder / "submitted" / task.student / task.assignment
    _write_files(submitted, task.submission)
    return folder


def _threads_here() -> int:
    # distributed is imported where a cluster is used: it takes about a second to import, and local
    # grading (`course autograde --jobs N`) never needs it.
    from distributed import get_worker

    return max(1, (os.cpu_count() or 1) // get_worker().state.nthreads)


# ----------------------------------------------------------------------------- files
MAX_SUBMISSION_MB = 256  # a submission folder larger than this is not sent to the cluster


def _files(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` (symbolic links left out), by relative path."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and not _under_link(path, folder):
            files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return files


def _under_link(path: Path, folder: Path) -> bool:
    return any(parent.is_symlink() for parent in path.parents if folder in parent.parents)


def _safe(relative: str) -> PurePosixPath:
    """A relative path that stays inside its folder, or CourseError."""
    path = PurePosixPath(relative)
    if path.is_absolute() or not path.parts or ".." in path.parts:
        raise CourseError(f"refused a file path from the cluster: {relative!r}")
    return path


def _write_files(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        target = folder / _safe(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


# ----------------------------------------------------------------------------- coordinator
def parse_cluster(spec: str) -> int | str:
    """``local:N`` -> N workers on this machine; anything else is a scheduler address."""
    if spec.startswith("local:"):
        count = spec.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise CourseError(f"--cluster expects local:N with N >= 1 workers, not {spec!r}")
        return int(count)
    return spec


def connect(spec: str, timeout: str = "20s") -> tuple[object, object | None]:
    """A Dask client for ``spec`` (a scheduler address or ``local:N``) and the LocalCluster it
    started (None for a scheduler someone else runs)."""
    from distributed import Client, LocalCluster  # imported here: see _threads_here

    target = parse_cluster(spec)
    if isinstance(target, int):
        cluster = LocalCluster(
            n_workers=target, threads_per_worker=1, processes=True, dashboard_address=None
        )
        return Client(cluster), cluster
    try:
        return Client(target, timeout=timeout), None
    except (OSError, TimeoutError) as error:
        raise CourseError(
            f"cannot reach the Dask scheduler at {target}: {error}. Start one with "
            "`dask scheduler` and workers with `dask worker ADDRESS` (docs/scale.md, 'Grading on a "
            "Dask cluster')."
        ) from None


def check_workers(client: object, expected: str, sandboxed: bool, wait_seconds: int = 60) -> int:
    """Refuse a cluster whose workers run other course code or cannot sandbox; return the number of
    workers."""
    try:
        client.wait_for_workers(1, timeout=wait_seconds)
    except TimeoutError:
        raise CourseError(
            f"the Dask scheduler has no worker after {wait_seconds} s: start `dask worker "
            "ADDRESS` on the grading machines"
        ) from None
    states = client.run(worker_state)
    other = {w: s["fingerprint"] for w, s in states.items() if s["fingerprint"] != expected}
    if other:
        listed = ", ".join(f"{w} runs {f}" for w, f in sorted(other.items()))
        raise CourseError(
            f"workers with other course code than this coordinator ({expected}): {listed}. "
            "Install the same version of the course on every worker (pip install -e . at the "
            "same commit) and restart them."
        )
    unsafe = {w: s["sandbox"] for w, s in states.items() if s["sandbox"]}
    if sandboxed and unsafe:
        worker, reason = sorted(unsafe.items())[0]
        raise CourseError(f"worker {worker} cannot sandbox student code: {reason}")
    return len(states)


def grade_on_cluster(
    spec: str,
    tasks: list[Task],
    merged: Callable[[TaskResult], None],
    failed: Callable[[Task, str], None],
) -> None:
    """Send every task to the cluster named by ``spec``; ``merged`` is called with each result as it
    arrives, ``failed`` with each task that raised. Interrupted: the tasks not yet merged are
    cancelled (a LocalCluster's grading processes are stopped); the merged ones stay."""
    from distributed import as_completed  # imported here: see _threads_here

    client, cluster = connect(spec)
    try:
        if tasks:
            check_workers(client, tasks[0].expected, tasks[0].sandboxed)
        run = uuid.uuid4().hex[:8]
        futures = {
            client.submit(grade_task, task, key=f"grade-{task.student}-{run}", pure=False): task
            for task in tasks
        }
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except Exception as error:  # noqa: BLE001 (a worker's error is a report line)
                    failed(futures[future], f"{type(error).__name__}: {error}")
                    continue
                merged(result)
        except BaseException:
            client.cancel(list(futures))
            if cluster is not None:
                client.run(grading.stop_all)
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def local_threads(spec: str) -> int | None:
    """Torch threads per kernel for a LocalCluster (its workers share this machine)."""
    target = parse_cluster(spec)
    return max(1, (os.cpu_count() or 1) // target) if isinstance(target, int) else None


def read_submission(folder: Path) -> dict[str, bytes]:
    """The files of a submitted folder, refusing one larger than :data:`MAX_SUBMISSION_MB`."""
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    if total > MAX_SUBMISSION_MB * 2**20:
        raise CourseError(
            f"{folder} holds {total / 2**20:.0f} MB, more than {MAX_SUBMISSION_MB} MB: "
            "remove the large files or grade it on this machine (--jobs)"
        )
    return _files(folder)


def write_autograded(root: Path, result: TaskResult, assignment: str, disk_mb: int = 0) -> None:
    """Put a worker's autograded notebooks in ``root/autograded/STUDENT/ASSIGNMENT``, within the
    disk quota ``disk_mb`` (the worker keeps to it; a worker that did not is held to it here)."""
    target = root / "autograded" / result.graded.student / assignment
    shutil.rmtree(target, ignore_errors=True)
    files = result.autograded
    kept = [f"{name}.ipynb" for name in release_notebooks(root, assignment)]
    removed = quota.over_quota({n: len(c) for n, c in files.items()}, disk_mb, kept)
    if removed:
        sizes = {n: len(c) for n, c in files.items()}
        files = {n: c for n, c in files.items() if n not in set(removed)}
        over = quota.detail(sizes, removed, disk_mb)
        for event in result.graded.events:
            if event.status in ("graded", "flagged", TIMED_OUT):
                event.status = quota.STATUS if event.status == "graded" else event.status
                event.detail = "; ".join(d for d in (event.detail, over) if d)
    _write_files(target, files)


def grade_class(
    job: GradingJob,
    students: list[str],
    spec: str,
    url: str,
    progress: Callable[[Graded], None] | None = None,
) -> list[Graded]:
    """Grade ``students`` on the Dask cluster ``spec``, one task each; merge into ``url``."""
    root, assignment = job.root, job.assignment
    common = dict(
        assignment=assignment,
        source={p.name: p.read_bytes() for p in (root / "source" / assignment).glob("*.ipynb")},
        config=(root / "nbgrader_config.py").read_bytes(),
        gradebook=job.gradebook.read_bytes(),
        limits={name: getattr(job.limits, name) for name in job.limits.trait_names(config=True)},
        times=job.times,
        sandboxed=job.sandboxed,
        threads=local_threads(spec),
        expected=fingerprint(),
    )
    results: list[Graded] = []

    def done(graded: Graded, own: bytes | None) -> None:
        grading.merge(root, url, assignment, graded, own)
        results.append(graded)
        if progress:
            progress(graded)

    def merged(result: TaskResult) -> None:
        if result.gradebook:  # graded: its notebooks (within the quota), then its scores
            write_autograded(root, result, assignment, job.limits.disk_mb)
        done(result.graded, result.gradebook)

    def failed(student: str, message: str) -> None:
        done(grading.not_graded(root, assignment, student, message), b"")

    tasks = []
    for student in students:
        try:
            submission = read_submission(root / "submitted" / student / assignment)
        except CourseError as error:
            failed(student, str(error))
            continue
        tasks.append(Task(student=student, submission=submission, **common))
    grade_on_cluster(spec, tasks, merged, lambda task, why: failed(task.student, why))
    return sorted(results, key=lambda g: g.student)
