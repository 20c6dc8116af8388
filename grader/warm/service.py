"""Warm workers kept between grading runs: ``course workers start|stop|status``.

A run of ``course autograde`` starts its own warm workers (:class:`grader.warm.pool.WarmPool`: the
zygote, the nbgrader fork server) and its own judge, and each of them imports torch or nbgrader
first: about 4.5 s of CPU at the start of every run, as much as grading two submissions of A.
``course workers start`` starts them once, in a process of their own (:func:`serve`, detached from
the terminal), with a judge server (``python -m judge --serve``) that forks a fresh judge for each
run. Each later ``course autograde`` or ``course demo`` in this course, at the same ``--jobs``, uses
them (:func:`attach`) instead of starting its own.

Nothing of a run is kept for the next: every kernel is forked from the zygote, which never ran
student code, into namespaces of its own (as within a run), every nbgrader process from the fork
server, and every run's judge from the judge server; none of these three servers ever runs a
submission's code or reads its files. The kept workers run the code they were started with: a run
uses them only when the course's code (``grader``, ``judge``, ``course``), the Python and the main
libraries' versions and ``--jobs`` are those of the run (:func:`code_key`); otherwise the run starts
its own, and says why.

The state lives in ``ROOT/.warm-workers/`` (private to the instructor): ``state.json`` (where the
sockets are), ``lease`` (each run using the workers holds a shared lock on it for its whole length)
and ``log``. The workers stop after ``--idle`` minutes without a run (30 by default), when told
(``course workers stop``, which waits for a run using them to end), or when one of their servers
ended (a run then starts its own workers, as without them).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from grader.sandbox import cgroups
from grader.shared.limits import worker_env
from grader.shared.paths import CourseError
from grader.shared.verification import below_the_workers
from grader.warm.forkserver import ForkServer
from grader.warm.pool import STOPPED, WarmPool, Zygote

FOLDER = ".warm-workers"
IDLE_MINUTES = 30
START_SECONDS = 180  # torch imported by three servers at once, on a busy machine
PACKAGES = ("grader", "judge", "course")  # their code is what the workers preloaded
LIBRARIES = ("torch", "numpy", "matplotlib", "ipykernel", "jupyter_client", "nbgrader")


def folder(root: Path) -> Path:
    """The kept workers' folder of the course at ``root``."""
    return root / FOLDER


def code_key(jobs: int) -> str:
    """What the kept workers must share with a run that uses them: the code of the course's
    packages, this Python, the main libraries' versions and the number of workers (their kernels'
    threads: grader.shared.limits.worker_env)."""
    digest = hashlib.sha256(f"{sys.executable}\n{sys.version}\njobs={jobs}\n".encode())
    for name in LIBRARIES:
        try:
            digest.update(f"{name}={importlib.metadata.version(name)}\n".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name}=none\n".encode())
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        top = Path(spec.origin).parent if spec and spec.origin else None
        for path in sorted(top.rglob("*.py")) if top else []:
            digest.update(str(path.relative_to(top)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# --- the workers' own process --------------------------------------------------------------


def serve(root: Path, jobs: int, idle_seconds: float) -> None:
    """The kept workers' process: start them, tell where they are, and wait until they are idle for
    ``idle_seconds``, told to stop (SIGTERM), or one of them ended."""
    place = folder(root)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    lease = os.open(place / "lease", os.O_RDWR | os.O_CREAT, 0o600)
    pool, judge = WarmPool(jobs, worker_env(jobs)), None
    try:
        judge = _start_judge(pool)
        zygote = _ready(pool, judge)
        state = {
            "pid": os.getpid(),
            "key": code_key(jobs),
            "jobs": jobs,
            "zygote_root": str(zygote.root),
            "zygote_socket": str(zygote.socket),
            "zygote_pid": zygote.process.pid,
            "nbgrader_socket": str(pool.nbgrader.socket),
            "judge_socket": str(pool.folder / "judge.sock"),
            "idle_seconds": idle_seconds,
        }
        _write_state(place, state)
        why = _wait(pool, judge, lease, idle_seconds, stop)
        print(f"the warm workers stop: {why}", file=sys.stderr, flush=True)
    finally:
        fcntl.flock(lease, fcntl.LOCK_EX)  # no run uses them any more: none will start to
        (place / "state.json").unlink(missing_ok=True)
        if judge is not None:
            judge.kill()
        pool.close()


def _start_judge(pool: WarmPool) -> subprocess.Popen:
    """The judge server, in the pool's private folder, below the workers (as a run's judge)."""
    judge = subprocess.Popen(
        [sys.executable, "-P", "-m", "judge", "--serve", str(pool.folder / "judge.sock")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    below_the_workers(judge.pid)
    return judge


def _ready(pool: WarmPool, judge: subprocess.Popen) -> Zygote:
    """Wait until the zygote has imported everything, the fork server and the judge listen."""
    pool.ready()
    zygote = pool.zygote
    zygote.settle()
    pool.nbgrader._connect(START_SECONDS).close()  # a connection it answers by forking nothing
    end = time.monotonic() + START_SECONDS
    while not (pool.folder / "judge.sock").exists():
        if judge.poll() is not None or time.monotonic() > end:
            raise CourseError("the warm workers' judge did not start")
        time.sleep(0.05)
    return zygote


def _write_state(place: Path, state: dict) -> None:
    new = place / "state.json.new"
    new.write_text(json.dumps(state, indent=1))
    new.rename(place / "state.json")


def _wait(
    pool: WarmPool, judge: subprocess.Popen, lease: int, idle_seconds: float, stop: threading.Event
) -> str:
    """Why the workers stop, once they should."""
    last_used = time.monotonic()
    while not stop.wait(1.0):
        if not pool.zygote.alive():
            return f"the zygote ended: {pool.zygote.output()[-300:]}"
        if pool.nbgrader.process is None or pool.nbgrader.process.poll() is not None:
            return "the nbgrader fork server ended"
        if judge.poll() is not None:
            return "the judge server ended"
        if _in_use(lease):
            last_used = time.monotonic()
        elif time.monotonic() - last_used > idle_seconds:
            return f"no run used them for {idle_seconds / 60:g} minutes"
    return "told to stop"


def _in_use(lease: int) -> bool:
    """Whether a run holds the lease (its shared lock)."""
    try:
        fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(lease, fcntl.LOCK_UN)
    return False


# --- a run's side ---------------------------------------------------------------------------


@dataclass
class KeptZygote:
    """The kept workers' zygote, as a run's submission uses a :class:`grader.warm.pool.Zygote`."""

    root: Path
    socket: Path
    pid: int  # its bubblewrap's, a child of the workers' process
    service: int

    def alive(self) -> bool:
        return _running(self.pid) and _running(self.service)


class KeptWorkers:
    """The kept workers, as a run uses its :class:`grader.warm.pool.WarmPool` (``worker()``,
    ``nbgrader``, ``close()``). The run holds their lease until :meth:`close`. Should they end
    during the run, the run starts workers of its own and goes on (a submission whose kernel ended
    with them is graded again, as when a run's own zygote ends)."""

    def __init__(self, state: dict, lease: int, jobs: int) -> None:
        self.state, self.lease, self.jobs = state, lease, jobs
        self.pid = int(state["pid"])
        self.slots = threading.BoundedSemaphore(max(1, jobs))
        self._zygote = KeptZygote(
            Path(state["zygote_root"]), Path(state["zygote_socket"]), state["zygote_pid"], self.pid
        )
        self._attached = ForkServer(attach=Path(state["nbgrader_socket"]))
        self._own: WarmPool | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def judge_socket(self) -> str:
        return str(self.state["judge_socket"])

    @property
    def nbgrader(self) -> ForkServer:
        return self._own.nbgrader if self._own is not None else self._attached

    @contextmanager
    def worker(self) -> Iterator[KeptZygote]:
        """The kept zygote for one submission, or, once it ended, the run's own."""
        while not self.slots.acquire(timeout=0.2):
            if self._closed:
                raise CourseError(STOPPED)
        try:
            yield self._ready_zygote()
        finally:
            self.slots.release()

    def _ready_zygote(self) -> KeptZygote | Zygote:
        with self._lock:
            if self._closed:
                raise CourseError(STOPPED)
            if self._own is None and self._zygote.alive():
                return self._zygote
            if self._own is None:
                print("the kept warm workers ended: this run starts its own", file=sys.stderr)
                self._own = WarmPool(self.jobs, worker_env(self.jobs))
        return self._own._ready_zygote()

    def close(self) -> None:
        """Let the kept workers go (and stop the run's own, if it started them)."""
        with self._lock:
            self._closed = True
        if self._own is not None:
            self._own.close()
        else:
            cgroups.remove_ended()  # any left by kernels of long ago (each removes its own)
        os.close(self.lease)  # its lock with it


def attach(root: Path, jobs: int) -> KeptWorkers | None:
    """The course's kept workers, held for this run, if they run the run's code at ``jobs`` workers;
    None otherwise (said on stderr when they run but do not fit)."""
    place = folder(root)
    state = read_state(place)
    if state is None:
        return None
    if state.get("key") != code_key(jobs):
        started = state.get("jobs")
        print(
            f"the kept warm workers (pid {state.get('pid')}) were started for other code "
            f"or for --jobs {started}: this run starts its own (`course workers stop`, then "
            f"`course workers start --jobs {jobs}` to keep these)",
            file=sys.stderr,
        )
        return None
    try:
        lease = os.open(place / "lease", os.O_RDWR)
    except OSError as error:  # started by another user, say
        print(f"the kept warm workers cannot be used: {error}", file=sys.stderr)
        return None
    fcntl.flock(lease, fcntl.LOCK_SH)  # they cannot decide to stop while it is held
    if read_state(place) != state:  # they stopped meanwhile
        os.close(lease)
        return None
    return KeptWorkers(state, lease, jobs)


def read_state(place: Path) -> dict | None:
    """The running workers' state, or None (none started, or their process is gone)."""
    try:
        state = json.loads((place / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state if _is_service(int(state.get("pid", 0))) else None


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (exists and is no zombie)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_service(pid: int) -> bool:
    """Whether ``pid`` is a kept workers' process (not another that reused its id)."""
    try:
        command = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return "grader.warm.service" in command and _running(pid)


# --- course workers start | stop | status ---------------------------------------------------


def start(root: Path, jobs: int, idle_minutes: float = IDLE_MINUTES) -> str:
    """Start the course's kept workers for ``jobs`` workers (unless they run already) and wait until
    they are ready; what to tell the user."""
    place = folder(root)
    state = read_state(place)
    if state is not None and state.get("key") == code_key(jobs):
        return f"the warm workers run already ({_describe(state)})"
    if state is not None:
        raise CourseError(
            f"warm workers for other code or another --jobs run already (pid {state['pid']}): "
            "`course workers stop` first"
        )
    place.mkdir(mode=0o700, exist_ok=True)
    place.chmod(0o700)
    log = os.open(place / "log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        command = [sys.executable, "-P", "-m", "grader.warm.service", str(root), str(jobs)]
        process = subprocess.Popen(
            [*command, str(idle_minutes * 60)],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not stopped with the terminal that started them
        )
    finally:
        os.close(log)
    end = time.monotonic() + START_SECONDS
    while time.monotonic() < end:
        state = read_state(place)
        if state is not None and state["pid"] == process.pid:
            return f"warm workers kept ({_describe(state)})"
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    tail = (place / "log").read_text(errors="replace")[-800:].strip()
    raise CourseError(f"the warm workers did not start: {tail or 'no message'}")


def stop(root: Path, timeout: float = 600) -> str:
    """Stop the course's kept workers once no run uses them (a run using them goes on)."""
    state = read_state(folder(root))
    if state is None:
        return "no warm workers are kept for this course"
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    start, said = time.monotonic(), False
    while _running(pid) and time.monotonic() < start + timeout:
        if not said and time.monotonic() > start + 2:  # a run holds them: they stop after it
            print("waiting for the grading run that uses them to end", file=sys.stderr)
            said = True
        time.sleep(0.1)
    if _running(pid):
        raise CourseError(f"the warm workers (pid {pid}) did not stop in {timeout:.0f} s")
    return f"the warm workers (pid {pid}) stopped"


def status(root: Path, jobs: int) -> str:
    """Whether the course keeps warm workers, and whether a run at ``jobs`` would use them."""
    state = read_state(folder(root))
    if state is None:
        return "no warm workers are kept for this course (`course workers start`)"
    if state.get("key") == code_key(jobs):
        return f"warm workers kept ({_describe(state)})"
    return (
        f"warm workers kept ({_describe(state)}), but a run at --jobs {jobs} with this code "
        f"would not use them: `course workers stop`, then `course workers start --jobs {jobs}`"
    )


def _describe(state: dict) -> str:
    idle = float(state.get("idle_seconds", 0)) / 60
    return (
        f"pid {state['pid']}, --jobs {state['jobs']}; `course autograde` and `course demo` at "
        f"--jobs {state['jobs']} use them; they stop after {idle:g} idle minutes or with "
        "`course workers stop`"
    )


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
