"""Grading one submission in isolation, within limits.

Each submission is graded by its own ``nbgrader autograde`` process in a scratch course folder
that holds only that student's submission, the configuration and a private copy of the
gradebook: the notebook runs with no ``source/``, no course gradebook and no other student's
folder beside it. The process and everything it starts (the kernel) run under limits set in
``nbgrader_config.py`` (:class:`Limits`): wall-clock time for the whole submission, address
space (memory), size of any file written, number of processes. A submission that passes a limit
is stopped and reported; the others are graded as usual.

What is enforced where: the limits use POSIX rlimits (Linux, macOS), set by :mod:`grader.limits`,
which then becomes the nbgrader process (no ``preexec_fn``: grading runs in threads); the number
of processes is not limited for root, and the scratch folder keeps relative paths away from the
course, but a kernel run by the same user can still open an absolute path:
:mod:`grader.tampering` flags code that does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from traitlets import Integer
from traitlets.config import Configurable

from grader import limits as rlimits
from grader import verification
from grader.paths import CourseError, load_config
from grader.preprocessors import kernel_deaths, removed_copies
from grader.reference_run import TimeLimits


class Limits(Configurable):
    """Limits on one submission while it is graded (``c.Limits.*`` in nbgrader_config.py)."""

    submission_seconds = Integer(900, help="Wall-clock seconds for a whole submission.").tag(
        config=True
    )
    memory_mb = Integer(8192, help="Address space of the grading process and kernel (MB).").tag(
        config=True
    )
    file_size_mb = Integer(512, help="Largest file the submission may write (MB).").tag(config=True)
    processes = Integer(512, help="Processes of the grading user (not enforced for root).").tag(
        config=True
    )


def limits_of(root: Path) -> Limits:
    """The limits configured for the course at ``root``."""
    return Limits(config=load_config(root))


RUNNING: set[int] = set()  # pids of the nbgrader processes grading now
SCRATCH: set[Path] = set()  # scratch courses not yet removed


def stop_all() -> None:
    """Kill every grading process still running and remove its scratch course (interrupted)."""
    for pid in list(RUNNING):
        kill_tree(pid)
    for scratch in list(SCRATCH):
        remove(scratch)


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


@dataclass
class Outcome:
    """What grading one submission produced."""

    ok: bool
    seconds: float
    db_url: str
    message: str = ""
    # The trusted judge's verdicts, by notebook name (absent: the assignment has no judge).
    verifications: dict[str, verification.Verification] = field(default_factory=dict)


def _scratch_course(root: Path, assignment: str, student: str, main_db: Path) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="course-grade-"))
    SCRATCH.add(scratch)
    shutil.copy(root / "nbgrader_config.py", scratch)
    shutil.copytree(
        root / "submitted" / student / assignment, scratch / "submitted" / student / assignment
    )
    shutil.copyfile(main_db, scratch / "gradebook.db")
    for planted in (scratch / "submitted").rglob(f"*{verification.SUFFIX}"):
        planted.unlink()  # only the kernel's own observations are read
    return scratch


# The kernel of every graded notebook runs in bubblewrap (grader/kernels.py) unless the
# instructor asks for --unsafe-no-sandbox.
SANDBOXED_KERNEL = "--Execute.kernel_manager_class=grader.kernels.SandboxedKernelManager"


def check_sandbox() -> None:
    """Fail with a clear message unless bubblewrap can start a sandbox on this machine."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise CourseError(
            "bubblewrap (bwrap) is not installed, so student code cannot be sandboxed: run "
            "`make setup` (Debian/Ubuntu: apt-get install bubblewrap). To grade anyway, "
            "without the sandbox, pass --unsafe-no-sandbox (the report marks every notebook)."
        )
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--cap-drop", "ALL", "true"]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise CourseError(
            f"bubblewrap cannot start a sandbox here ({done.stderr.strip()[:200]}): user "
            "namespaces may be disabled. To grade anyway, without the sandbox, pass "
            "--unsafe-no-sandbox (the report marks every notebook)."
        )


def grade(
    root: Path,
    assignment: str,
    student: str,
    main_db: Path,
    env: dict[str, str],
    limits: Limits,
    sandboxed: bool = True,
    judge: verification.Judge | None = None,
    times: TimeLimits | None = None,
) -> tuple[Outcome, Path]:
    """Autograde one student in a scratch course; return the outcome and the scratch folder.

    The autograded notebooks are copied back to ``root/autograded/STUDENT/ASSIGNMENT``. The
    caller reads the scores from ``outcome.db_url`` and removes the scratch folder. With
    ``sandboxed`` (the default) the notebook's kernel runs in bubblewrap and sees nothing but
    the submission's own folder (:class:`grader.kernels.SandboxedKernelManager`). With a
    ``judge`` and a judge for the assignment, the kernel's observations are judged
    (:mod:`grader.verification`) and the verdicts returned in the outcome. ``times`` (from
    :mod:`grader.reference_run`) tightens the cell and submission time limits.
    """
    times = times or TimeLimits(0, limits.submission_seconds, "the configured limits")
    scratch = _scratch_course(root, assignment, student, main_db)
    url = f"sqlite:///{scratch / 'gradebook.db'}"
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student]
    command += ["--db", url, f"--CourseDirectory.root={scratch}", "--force"]
    if sandboxed:  # the kernel's sockets live in the scratch course, removed with it
        command += [SANDBOXED_KERNEL, f"--SandboxedKernelManager.socket_root={scratch}"]
    seed = verification.new_seed() if judge and verification.has_judge(assignment) else 0
    command += [f"--ExecuteKeepingPoints.verification_seed={seed}"]
    if times.cell_seconds:
        command += [f"--Execute.timeout={times.cell_seconds}"]
    # The limits are set by a wrapper that becomes nbgrader (exec), not by preexec_fn, which is
    # unsafe in a process with threads: process.pid is nbgrader's own id (see kill_tree).
    command = rlimits.wrap(command, limits.memory_mb, limits.file_size_mb, limits.processes)
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    RUNNING.add(process.pid)
    try:
        log, _ = process.communicate(timeout=times.submission_seconds)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        process.communicate()
        message = (
            f"stopped after {times.submission_seconds} s, the time limit per submission "
            f"({times.basis}; a cell that never ends?)"
        )
        return Outcome(False, time.perf_counter() - start, url, message), scratch
    finally:
        RUNNING.discard(process.pid)
    seconds = time.perf_counter() - start
    graded = scratch / "autograded" / student / assignment
    if process.returncode != 0 or not graded.is_dir():
        return Outcome(False, seconds, url, _first_error(log)), scratch
    verifications = {}
    if seed and judge is not None:
        for name in sorted(p.stem for p in graded.glob("*.ipynb")):
            path = verification.observations_file(graded, name)
            verifications[name] = judge.verify(assignment, seed, path)
    for observed in graded.glob(f"*{verification.SUFFIX}"):
        observed.unlink()
    target = root / "autograded" / student / assignment
    shutil.rmtree(target, ignore_errors=True)
    copy_without_links(graded, target)
    # Notes of the course's preprocessors (nbgrader_config.py), read from nbgrader's log.
    notes = removed_copies(log) + kernel_deaths(log)
    return Outcome(True, seconds, url, "; ".join(notes), verifications), scratch


def copy_without_links(source: Path, target: Path) -> None:
    """Copy a folder that student code wrote into, leaving out every symbolic link."""
    shutil.copytree(source, target, ignore=_links)


def _links(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if Path(folder, name).is_symlink()]


PLAIN_WORDS = {
    "DeadKernelError": "the notebook's kernel died (os._exit, a crash or the memory limit)",
    "CellTimeoutError": "a cell ran past the time limit and could not be interrupted",
    "NotJSONError": "the notebook is not valid JSON (open it in JupyterLab to repair it)",
    "JSONDecodeError": "the notebook is not valid JSON (open it in JupyterLab to repair it)",
}


def _first_error(log: str) -> str:
    """The most telling line of a failed nbgrader run, in plain words, on one line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for key, words in PLAIN_WORDS.items():
        if any(key in line for line in lines):
            return f"{words}: not graded"
    for line in reversed(lines):
        if ("Error" in line or "Exception" in line) and "Please see" not in line:
            return line[-300:]
    return "nbgrader autograde failed (no message)"


def remove(scratch: Path) -> None:
    """Delete a scratch course folder."""
    shutil.rmtree(scratch, ignore_errors=True)
    SCRATCH.discard(scratch)
