"""A warm start for grading: kernels forked from a zygote (``course autograde``, the default;
``--cold`` starts each kernel afresh).

Design. A cold kernel pays for Python, ipykernel and torch on every submission. Here a run of
``course autograde`` keeps one *zygote* (:mod:`grader.warm.zygote`) for all its workers, started
once inside bubblewrap with its own user namespace forced (``--unshare-user``: whatever capability
it holds is one of that namespace, never the host's), and new PID, network, IPC and UTS namespaces.
It sees what a cold kernel sees (:func:`grader.sandbox.bubblewrap.system_binds`) plus, writable, its
own folder, where the workers' scratch courses are made. One zygote, not one per worker: each
started zygote imports torch again, while the workers' kernels, each in its own namespaces (user
namespace included), are as apart forked from one as from two. It imports torch, numpy, matplotlib,
ipykernel and ``course``, never runs a torch op and starts no thread (fork safety), and waits. For
each kernel nbgrader asks for (:class:`WarmKernelManager`, over the zygote's Unix socket), it forks
a child that, before any student code, unshares new mount, PID, network, IPC and UTS namespaces and
forks again (the kernel's parent is PID 1 of the new PID namespace), mounts a fresh /tmp, /dev/shm
and /proc, hides the zygote's folder but the submission's folder and its socket folder, remounts
every other mount read-only, applies the rlimits, enters a user namespace and a session keyring of
its own, drops every capability (bounding and ambient sets too, and no_new_privs), closes every
inherited file, resets the environment to the allowed list, argv, sys.path and the random state
(Python's and numpy's reseeded from the OS, torch's to a fresh process's default seed), and starts
ipykernel's IPKernelApp on the ipc sockets of the connection file, as the cold path does. Nothing of
an earlier submission can be seen: its processes are gone (killing PID 1 of its namespace ends all
of them, threads included), its memory was its own (copy-on-write), its files were in its own /tmp
and folder, and the zygote's modules, environment and random state were never touched by student
code. What stays shared by design: the zygote's hash seed (str hashes), like PYTHONHASHSEED, and
what the zygote imported before any submission. Interrupts go by message (as in the sandbox);
shutdown and the deadline kill the namespace (the zygote also kills a kernel whose nbgrader
connection closed: a killed nbgrader). The pool also holds the run's
:class:`grader.warm.forkserver.ForkServer`, which forks each submission's nbgrader process (trusted,
outside the sandbox) from one that imported nbgrader.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from grader.sandbox import cgroups, policy
from grader.sandbox.bubblewrap import kernel_python, sandbox_env, system_binds
from grader.sandbox.policy import POLICY
from grader.shared.paths import CourseError
from grader.warm import wire
from grader.warm.forkserver import ForkServer

START_SECONDS = 120  # a zygote that does not answer by then is a failed start
STOPPED = "grading was stopped: the warm workers are closed"


class Workers(Protocol):
    """What a run's submissions use of their warm workers: a :class:`WarmPool`, or the workers kept
    between runs (:class:`grader.warm.service.KeptWorkers`)."""

    @property
    def nbgrader(self) -> ForkServer: ...

    def worker(self) -> AbstractContextManager[Any]: ...

    def close(self) -> None: ...


class Zygote:
    """A zygote: a bubblewrap sandbox holding a preloaded Python, and its folder."""

    def __init__(self, root: Path, env: dict[str, str], tmp_size_mb: int) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket = root / wire.SOCKET
        args = ["bwrap", *system_binds(policy.ETC_FILES, tmp_size_mb)]
        args += ["--bind", str(root), str(root), "--chdir", str(root)]
        for k, folder in enumerate(cgroups.folders()):  # kernels' cgroups, hidden from kernels
            args += ["--bind", folder, str(root / wire.CGROUPS / str(k))]
        # User 0 with every capability, of its own user namespace only (run by an ordinary user,
        # bubblewrap would leave it none): what it needs to set up each kernel's mounts.
        args += ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL"]
        args += ["--unshare-pid", "--unshare-net", "--unshare-ipc"]
        args += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        args += ["--clearenv"]
        for name, value in sorted(env.items()):
            args += ["--setenv", name, value]
        args += ["--", kernel_python(), "-c", wire.zygote_source(), str(root)]
        args += [json.dumps(POLICY.for_zygote())]
        log = self._log_file()
        try:
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        finally:
            os.close(log)

    def ready(
        self, timeout: float = START_SECONDS, stopped: Callable[[], bool] = lambda: False
    ) -> None:
        """Wait until the zygote listens, which it does once it has found that it can sandbox a
        kernel here and before it imports torch and the rest: a submission's nbgrader starts
        meanwhile, and its kernel's request waits for those imports. Fail with the zygote's error
        output if it died, at once if ``stopped()`` (its pool closed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if stopped():
                raise CourseError(STOPPED)
            if self.process.poll() is not None:
                raise CourseError(f"the warm worker did not start: {self.output()[-500:]}")
            if self.socket.exists():
                return
            time.sleep(0.02)
        self.close()
        raise CourseError(f"the warm worker did not answer in {timeout:.0f} s")

    def _log_file(self) -> int:
        """The zygote's stderr: a file beside its folder (a pipe nobody reads could fill up and stop
        it; the kernels it forks write on nbgrader's own output)."""
        self.log = self.root.with_suffix(".log")
        return os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

    def output(self) -> str:
        """What the zygote wrote on its stderr (its last 4 kB)."""
        try:
            return self.log.read_bytes()[-4096:].decode(errors="replace").strip()
        except OSError:
            return ""

    def settle(self) -> None:
        """Wait until the zygote has imported what it imports while idle (zygote.LATER), as it has
        after its first submissions."""
        with connect(self.socket) as client:
            wire.request(client, wire.encode(wire.PRELOAD))

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, remove: bool = True) -> None:
        """Stop the zygote (and, with it, any kernel still running) and remove its folder (unless
        not ``remove``: a submission being judged may still read its scratch course there; the
        pool's folder goes when the pool is closed)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)


class WarmPool:
    """One zygote for the ``workers`` of a run: each submission's kernel is forked from it, in its
    own namespaces; at most ``workers`` submissions hold it at once (:meth:`worker`)."""

    def __init__(self, workers: int, env: dict[str, str], tmp_size_mb: int = 256) -> None:
        self.slots = threading.BoundedSemaphore(max(1, workers))
        self.folder = Path(tempfile.mkdtemp(prefix="course-warm-"))
        self.env = {**sandbox_env(policy.ENV_ALLOW), **_only(env)}
        self.tmp_size_mb = tmp_size_mb
        self._count = 0
        self._lock = threading.Lock()
        self._closed = False
        self._zygotes: list[Zygote] = []  # the one serving, and any that died: close() stops each
        self.nbgrader = ForkServer()  # each submission's nbgrader forked warm too
        try:
            self._new()
        except BaseException:  # bwrap missing, say: nothing of the pool is left behind
            self.close()
            raise

    def _new(self) -> Zygote:
        """Start a zygote (the lock held, or before any worker runs)."""
        if self._closed:
            raise CourseError(STOPPED)
        self._count += 1
        zygote = Zygote(self.folder / f"zygote-{self._count}", self.env, self.tmp_size_mb)
        self._zygotes.append(zygote)
        return zygote

    @property
    def zygote(self) -> Zygote:
        """The zygote serving now (the last one started)."""
        return self._zygotes[-1]

    def ready(self) -> None:
        """Wait until the zygote answers (CourseError, and the pool closed, if it cannot)."""
        try:
            self.zygote.ready(stopped=lambda: self._closed)
        except BaseException:
            self.close()
            raise

    @contextmanager
    def worker(self) -> Iterator[Zygote]:
        """The ready zygote, for one submission (a new one if it died); CourseError once the pool is
        closed (an interrupted run: no thread waits for ever)."""
        self._take_slot()
        try:
            yield self._ready_zygote()
        finally:
            self.slots.release()

    def _take_slot(self) -> None:
        while not self._closed:
            if self.slots.acquire(timeout=0.2):
                return
        raise CourseError(STOPPED)

    def _ready_zygote(self) -> Zygote:
        with self._lock:
            zygote = self.zygote  # started by __init__, or the last one restarted
            if not zygote.alive() and not self._closed:  # say why, then start another
                code, error = zygote.process.returncode, zygote.output()
                print(f"warm worker ended ({code}), restarted: {error[-500:]}", file=sys.stderr)
                zygote.close(remove=False)  # other submissions' scratch courses may be there
                zygote = self._new()
            if self._closed:
                raise CourseError(STOPPED)
        zygote.ready(stopped=lambda: self._closed)
        return zygote

    def close(self) -> None:
        """Stop every zygote (an interrupted run: a submission taking one as the pool closes gives
        up instead of waiting for it), and remove the pool's folder."""
        with self._lock:
            self._closed = True
        for zygote in self._zygotes:
            zygote.close(remove=False)
        self.nbgrader.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        cgroups.remove_ended()  # any left by kernels of long ago (each removes its own)


def _only(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` a kernel may see (the sandbox's allowed list)."""
    return {name: value for name, value in env.items() if name in policy.ENV_ALLOW}


@contextmanager
def connect(path: Path) -> Iterator[socket.socket]:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
        yield client
    finally:
        client.close()
