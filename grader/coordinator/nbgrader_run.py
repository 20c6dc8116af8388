"""One submission's ``nbgrader autograde`` process: run within its limits.

The process runs in the submission's scratch course (:mod:`grader.coordinator.scratch`) against the
private gradebook there. It is started through :mod:`grader.sandbox.rlimits`, a wrapper that sets
the memory, file size and process limits (:class:`grader.shared.limits.Limits`) and then becomes
nbgrader (no ``preexec_fn``: grading runs in threads); the cell timeout and the wall-clock limit of
the whole submission come from :class:`grader.shared.limits.TimeLimits`. A submission past its time
limit is killed with every process it started. The notebook's kernel runs in bubblewrap
(:class:`grader.nbgrader.kernels.SandboxedKernelManager`) unless the job is not sandboxed.

Run by root, the kernel's processes are capped by its cgroup (:mod:`grader.sandbox.cgroups`), the
rlimit being no limit for root; the scratch folder keeps relative paths away from the course;
without the sandbox a kernel run by the same user can still open an absolute path:
:mod:`grader.shared.tampering` flags code that does.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from grader.coordinator.job import GradingJob
from grader.sandbox import rlimits
from grader.shared import process_output
from grader.shared.kernel_check import MARKER
from grader.shared.notes import read_notes, stopped_notebooks

RUNNING: set[int] = set()  # pids of the nbgrader processes grading now
# Set by stop_all (an interrupted run): no nbgrader process starts after it. With the lock, a
# process is either started and in RUNNING before stop_all reads it, or never started.
STOPPED = threading.Event()
_LAUNCHING = threading.Lock()
DEADLINE_MARGIN = 10  # seconds of the submission's time limit kept for nbgrader to finish
KILLED_WAIT = 30  # seconds a killed nbgrader process's output is read for, at most

# The kernel of every graded notebook runs in bubblewrap (grader/nbgrader/kernels.py) unless the
# instructor asks for --unsafe-no-sandbox.
SANDBOXED_KERNEL = "--Execute.kernel_manager_class=grader.nbgrader.kernels.SandboxedKernelManager"
WARM_KERNEL = "--Execute.kernel_manager_class=grader.nbgrader.warm_kernels.WarmKernelManager"
UNSANDBOXED_KERNEL = "--Execute.kernel_manager_class=grader.nbgrader.kernels.IsolatedKernelManager"


@dataclass
class Run:
    """What one nbgrader run gave: whether it graded, how long it took, and a message (why it did
    not grade, or the notes of the course's preprocessors)."""

    ok: bool
    seconds: float
    message: str = ""
    stopped: set[str] = field(default_factory=set)  # notebooks with a cell that ran away


def command(
    job: GradingJob, student: str, scratch: Path, seed: int, zygote: Path | None = None
) -> list[str]:
    """The command line grading ``student`` in ``scratch``, behind the limits' wrapper (``zygote``:
    the socket of the warm worker that forks the kernels, :mod:`grader.warm.pool`)."""
    url = f"sqlite:///{scratch / 'gradebook.db'}"
    # nbgrader's command line, started and ended faster (grader/nbgrader/main.py)
    nbgrader = [sys.executable, "-P", "-m", "grader.nbgrader.main", "autograde", job.assignment]
    nbgrader += ["--student", student, "--db", url, f"--CourseDirectory.root={scratch}", "--force"]
    # After the observation nothing more is asked of the kernel: stop it at once (a graceful stop
    # waited a second or more for the kernel to exit).
    nbgrader += ["--Execute.shutdown_kernel=immediate"]
    if job.sandboxed and zygote is not None:  # forked by the warm worker, in the same sandbox
        nbgrader += [WARM_KERNEL, f"--WarmKernelManager.zygote={zygote}"]
        # Sockets in the worker's folder itself (ZeroMQ's ipc paths hold 107 characters; the scratch
        # course in it made them too long under a long TMPDIR); removed by nbgrader.
        worker = zygote.parent.parent
        nbgrader += [f"--SandboxedKernelManager.socket_root={worker}"]
    elif job.sandboxed:  # the kernel's sockets live in the scratch course, removed with it
        nbgrader += [SANDBOXED_KERNEL, f"--SandboxedKernelManager.socket_root={scratch}"]
    else:  # nbgrader_config.py names the sandbox: only this flag grades without it
        nbgrader += [UNSANDBOXED_KERNEL]
    # The quota, the judge, the tampering scan and the report come after this process, with one
    # judge for all the workers (grader.coordinator.grading); plain nbgrader does them itself.
    nbgrader += ["--VerifyPoints.enabled=False"]
    nbgrader += [f"--ExecuteKeepingPoints.verification_seed={seed}"]
    nbgrader += [f"--Notes.path={notes_file(scratch)}"]
    if job.times.cell_seconds:
        nbgrader += [f"--Execute.timeout={job.times.cell_seconds}"]
    # A fresh kernel for the trusted check starts only if it can end before the submission's time
    # limit (a few seconds kept for nbgrader to save the scores).
    deadline = time.time() + job.times.submission_seconds - DEADLINE_MARGIN
    nbgrader += [f"--ExecuteKeepingPoints.deadline={deadline:.0f}"]
    limits = job.limits
    return rlimits.wrap(nbgrader, limits.memory_mb, limits.file_size_mb, limits.processes)


def run(job: GradingJob, student: str, scratch: Path, seed: int, zygote: Path | None = None) -> Run:
    """Autograde ``student`` in ``scratch`` (``seed``: of the trusted verification, 0: none;
    ``zygote``: the warm worker's socket, None: a kernel started cold).

    The autograded notebooks are left in ``scratch/autograded/STUDENT/ASSIGNMENT``, the scores in
    ``scratch/gradebook.db``."""
    start = time.perf_counter()
    # The limits are set by a wrapper that becomes nbgrader (exec), not by preexec_fn, which is
    # unsafe in a process with threads: process.pid is nbgrader's own id (see kill_tree).
    with _LAUNCHING:
        if STOPPED.is_set():
            return Run(False, 0.0, "grading was interrupted before this submission started")
        process = launch(job, command(job, student, scratch, seed, zygote), scratch, zygote)
        RUNNING.add(process.pid)
    try:
        log, _ = process.communicate(timeout=job.times.submission_seconds)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        _end_killed(process)
        message = (
            f"stopped after {job.times.submission_seconds} s, the time limit per submission "
            f"({job.times.basis}; a cell that never ends?)"
        )
        return Run(False, time.perf_counter() - start, message)
    finally:
        RUNNING.discard(process.pid)
    seconds = time.perf_counter() - start
    graded = scratch / "autograded" / student / job.assignment
    if process.returncode != 0 or not graded.is_dir():
        return Run(False, seconds, first_error(log))
    # What the course's preprocessors (nbgrader_config.py) did, for the report.
    notes = notes_file(scratch)
    return Run(True, seconds, "; ".join(read_notes(notes)), stopped_notebooks(notes))


def launch(job: GradingJob, line: list[str], scratch: Path, zygote: Path | None) -> Any:
    """The nbgrader process of ``line`` (a Popen), or, warm, one forked by the run's
    :class:`grader.warm.forkserver.ForkServer` (same arguments, folder, environment and limits)."""
    if zygote is None or job.warm is None:
        return process_output.BoundedPopen(
            line, cwd=scratch, env=job.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    limits = [job.limits.memory_mb, job.limits.file_size_mb, job.limits.processes]
    arguments = line[line.index("grader.nbgrader.main") + 1 :]
    return job.warm.nbgrader.spawn(arguments, scratch, job.env, limits)


def _end_killed(process: Any) -> None:
    """Read a killed nbgrader process's output to its end, within :data:`KILLED_WAIT` seconds.

    A process that is not its descendant can hold that output open: a warm kernel, forked by the
    zygote, lives until the zygote sees the nbgrader connection close (a stopped or traced kernel,
    or a busy zygote, longer). The run must not wait for it without end: past the wait the output is
    dropped (the zygote still ends the kernel)."""
    try:
        process.communicate(timeout=KILLED_WAIT)
    except subprocess.TimeoutExpired:
        process.close()


def notes_file(scratch: Path) -> Path:
    """The notes file of the course's preprocessors: in the scratch course, out of the sandboxed
    kernel's reach (it sees only the notebook's folder)."""
    return scratch / "notes.json"


def kill_tree(pid: int) -> None:
    """Kill a process and every process it started (kernels start in their own session)."""
    try:
        parent = psutil.Process(pid)
        family = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=10)


def stop_all() -> None:
    """Kill every nbgrader process of this process still running, and start no other (grading was
    interrupted; :func:`allow_runs` allows them again, at the start of a run)."""
    with _LAUNCHING:
        STOPPED.set()
        running = list(RUNNING)
    for pid in running:
        kill_tree(pid)


def allow_runs() -> None:
    """A new grading run: nbgrader processes may start (again, after an interrupted one)."""
    STOPPED.clear()


PLAIN_WORDS = {
    "DeadKernelError": "the notebook's kernel died (os._exit, a crash or the memory limit)",
    "CellTimeoutError": "a cell ran past the time limit and could not be interrupted",
    "NotJSONError": "the notebook is not valid JSON (open it in JupyterLab to repair it)",
    "JSONDecodeError": "the notebook is not valid JSON (open it in JupyterLab to repair it)",
}


def first_error(log: str) -> str:
    """The most telling line of a failed nbgrader run, in plain words, on one line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:  # the grader's own check failed: its message says what to fix
        if f"{MARKER}: " in line:  # grader.shared.kernel_check.CourseNotImportable: WHY
            return line.split(f"{MARKER}: ", 1)[1][:1000]
    for key, words in PLAIN_WORDS.items():
        if any(key in line for line in lines):
            return f"{words}: not graded"
    for line in reversed(lines):
        if ("Error" in line or "Exception" in line) and "Please see" not in line:
            return line[-300:]
    return "nbgrader autograde failed (no message)"
