"""The warm kernel manager: nbgrader's kernel for a submission, forked by the run's zygote
(:mod:`grader.warm.zygote`) instead of started by bubblewrap, in the same sandbox
(:mod:`grader.sandbox.policy`). Loaded by nbgrader (``--Execute.kernel_manager_class``, named by
:mod:`grader.coordinator.nbgrader_run`); it talks to the zygote over :mod:`grader.warm.wire`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time

from traitlets import Unicode

from grader.nbgrader.kernels import SandboxedKernelManager
from grader.sandbox import cgroups
from grader.sandbox.bubblewrap import kernel_python, readable_roots, sandbox_env
from grader.shared.limits import Limits
from grader.shared.paths import CourseError
from grader.warm import wire

# How long a killed kernel's end may take to be told, after jupyter_client's own 5 s (a fork bomb's
# hundreds of processes on a busy machine): past that it is left to the zygote.
KILL_SECONDS = 15


class WarmProcess:
    """The kernel forked by a zygote, as jupyter_client's provisioner sees a process."""

    stdin = stdout = stderr = None

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.returncode: int | None = None
        self.pid = None  # a pid of the zygote's namespace: never signalled from here

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        self.client.setblocking(False)
        try:
            data = self.client.recv(4096, socket.MSG_PEEK)
        except BlockingIOError:
            return None
        finally:
            self.client.setblocking(True)
        if not data:  # the zygote died: so did its kernels
            self.returncode = -signal.SIGKILL
        elif data.endswith(b"\n"):
            self.returncode = int(json.loads(wire.read_line(self.client)).get(wire.EXIT, -9))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("warm kernel", timeout or 0)
            time.sleep(0.02)
        self.client.close()
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        """SIGKILL or SIGTERM end the kernel's namespace; interrupts go by message."""
        if signum in (signal.SIGKILL, signal.SIGTERM) and self.returncode is None:
            try:
                self.client.sendall(wire.encode(wire.KILL))
            except OSError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def leave_to_zygote(self) -> None:
        """Count the kernel ended: closing its connection tells the zygote to end it."""
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        self.client.close()

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class WarmKernelManager(SandboxedKernelManager):
    """A sandboxed kernel forked from the run's zygote instead of started by bubblewrap.

    The sandbox is the one of :class:`SandboxedKernelManager` (same files visible, same limits, same
    environment), set up by the zygote (:mod:`grader.warm.zygote`)."""

    zygote = Unicode("", help="The worker zygote's socket (grader.warm.pool.WarmPool).").tag(
        config=True
    )

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        """Only the program's name (the kernel's ``sys.argv[0]``): the zygote forks the kernel, in
        cgroups made as it starts (a cold kernel's launcher, made here, would not use them)."""
        return [kernel_python()]

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: object) -> None:
        if not self.zygote:
            raise CourseError("WarmKernelManager.zygote is not set: no warm worker to ask")
        workdir = os.path.abspath(str(kw.get("cwd") or os.getcwd()))
        limits = Limits(config=self.config)
        self._cgroups = cgroups.kernel_groups(limits.processes)
        worker = os.path.dirname(os.path.dirname(self.zygote))
        seen = [  # each group is in cgroups.folders()[k], bound at wire.CGROUPS/k in the zygote
            os.path.join(worker, wire.CGROUPS, str(k), os.path.basename(g))
            for k, g in enumerate(self._cgroups)
        ]
        start = wire.Start(
            workdir=os.path.realpath(workdir),
            sockets=os.path.realpath(self._socket_folder),
            connection_file=os.path.realpath(self.connection_file),
            argv0=kernel_cmd[0],
            env=sandbox_env(self.env_allow),
            limits=wire.Limits(limits.memory_mb, limits.file_size_mb, limits.processes),
            tmp_mb=self.tmp_size_mb,
            readable=readable_roots(),  # bound again if under the kernel's fresh /tmp
            cgroups=seen,  # where the zygote sees the kernel's cgroups (sandbox/cgroups.py)
        )
        client, answer = self._start(start)
        if not answer.get(wire.OK) and seen:  # the cgroups refused it (cgroup v2, say): go on
            print(f"warm kernel not in its cgroups: {answer.get(wire.ERROR)}", file=sys.stderr)
            client, answer = self._start(dataclasses.replace(start, cgroups=[]))
        if not answer.get(wire.OK):
            raise RuntimeError(
                f"the warm worker could not start a kernel: {answer.get(wire.ERROR)}"
            )
        assert self.provisioner is not None
        self.provisioner.process = WarmProcess(client)  # type: ignore[attr-defined]
        self.provisioner.pid = None  # type: ignore[attr-defined]
        self.provisioner.pgid = None  # type: ignore[attr-defined]
        self._reconcile_connection_info(self.provisioner.connection_info)

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        """jupyter_client's kill, which waits 5 s for the kernel's end; then up to
        :data:`KILL_SECONDS` more for the zygote to tell it (ending a namespace of hundreds of
        processes, a fork bomb's, takes longer on a busy machine); then the kernel is left to the
        zygote. Either way it has ended for this manager: nbclient's clean-up would otherwise shut
        it down again, through the sockets this shutdown closed (a ZMQError that cost the submission
        its grading)."""
        await super()._async_kill_kernel(restart=restart)
        process = getattr(self.provisioner, "process", None)
        if not isinstance(process, WarmProcess):
            return  # ended, and waited for
        end = time.monotonic() + KILL_SECONDS
        while process.poll() is None and time.monotonic() < end:
            await asyncio.sleep(0.05)
        process.leave_to_zygote()
        await self.provisioner.wait()

    def _start(self, start: wire.Start) -> tuple[socket.socket, dict]:
        """Ask the zygote to start a kernel: the connection (which the kernel lives on) and the
        answer; the connection is closed if it did not start."""
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(self.zygote)
        fds = [sys.stdout.fileno(), sys.stderr.fileno()]
        answer = wire.request(client, wire.start_request(start), fds)
        if not answer.get(wire.OK):
            client.close()
        return client, answer
