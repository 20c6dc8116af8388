"""The kernel managers of grading: private Unix sockets, and the sandboxed kernel.

Grading starts many kernels at once. Over TCP, jupyter_client chooses free ports and the kernel
binds them a moment later; when two kernels start together they can race for the same ports, and a
client may end up waiting forever for a reply that went elsewhere. With the ``ipc`` transport each
kernel gets its own socket files, named here after a fresh random id, so no two kernels can meet.
nbgrader and ``course check`` use this class (see nbgrader_config.py).

:class:`SandboxedKernelManager` starts the kernel of a graded notebook inside the bubblewrap
sandbox of :mod:`grader.sandbox.bubblewrap`. Both hand out a :class:`PromptKernelClient`, ready as
soon as the kernel has answered on both channels.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from queue import Empty

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_async
from traitlets import DottedObjectName, Integer, List, Unicode, default

from grader.sandbox import cgroups, policy, rlimits
from grader.sandbox.bubblewrap import sandbox_command
from grader.shared.limits import Limits

RECONNECT_MS = 10  # how often a client's channel tries a kernel socket not yet there


class PromptKernelClient(AsyncKernelClient):
    """A kernel client that is ready as soon as the kernel answered a ``kernel_info`` request on the
    shell channel and said "idle" for one on IOPub (IOPub is then connected).

    jupyter_client's own wait ends with 0.2 s of waiting for IOPub to fall silent, on every kernel
    start. Here nothing needs flushing: a reply or status left over from an earlier request has a
    parent other than the cell's, and nbclient skips it. A request answered late (a loaded machine)
    still counts: every request sent is one the kernel may answer."""

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        sent: set[str] = set()
        while True:
            sent.add(self.kernel_info())
            reply = await self._answer(self.shell_channel, sent, "kernel_info_reply", 1.0)
            if reply and await self._answer(self.iopub_channel, sent, "status", 0.2, "idle"):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    @staticmethod
    async def _answer(
        channel: object, sent: set[str], kind: str, seconds: float, state: str = ""
    ) -> dict | None:
        """The first message of ``kind`` (and execution ``state``) on ``channel`` whose parent is
        one of the ``sent`` requests, within ``seconds``; None if none came."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                msg = await ensure_async(channel.get_msg(timeout=left))  # type: ignore[attr-defined]
            except Empty:
                return None
            if msg["parent_header"].get("msg_id") in sent and msg["msg_type"] == kind:
                if not state or msg["content"].get("execution_state") == state:
                    return msg
        return None

    wait_for_ready = _async_wait_for_ready  # AsyncKernelClient binds the name to its own

    def start_channels(self, *args: object, **kwargs: object) -> None:
        """Channels that try again every 10 ms to reach sockets the kernel has not bound yet.

        The client connects while the kernel is still starting. ZeroMQ tries a missing socket again
        every 100 ms by default, and the wait for that retry was 0.1 to 0.15 s of every warm
        kernel's start (0.2 s from fork to first answer, 0.05 s with 10 ms)."""
        self.context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
        super().start_channels(*args, **kwargs)


class IsolatedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager on the ipc transport with a unique socket path per kernel, whose
    clients are :class:`PromptKernelClient`."""

    client_class = DottedObjectName("grader.nbgrader.kernels.PromptKernelClient")

    @default("client_factory")
    def _default_client_factory(self) -> type:
        return PromptKernelClient

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        """Wait for the kernel's end, looking every 10 ms (jupyter_client: every 100 ms, so that a
        killed kernel cost a tenth of a second each time)."""
        await super()._async_wait(pollinterval=min(pollinterval, 0.01))

    @default("transport")
    def _default_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _default_ip(self) -> str:
        if self.transport != "ipc":
            return super()._ip_default()
        return os.path.join(tempfile.gettempdir(), f"course-kernel-{uuid.uuid4().hex[:16]}")


class SandboxedKernelManager(IsolatedKernelManager):
    """A grading kernel inside a bubblewrap sandbox; nbgrader and nbclient stay outside.

    Inside, the kernel sees, read-only: the system (``/usr`` and its links, a few files of
    ``/etc``), the Python installation and the virtualenv, and the notebook package ``course/``. It
    runs under the configured limits (memory, file size, processes:
    :mod:`grader.sandbox.rlimits`).
    It may write only in its working directory (the submission's own folder) and in a private, empty
    ``/tmp`` of :attr:`tmp_size_mb`. Nothing else exists for it: not the gradebook, not ``source/``,
    not the other students, not the instructor's course folder. It runs in new PID, network, IPC,
    UTS and user namespaces with no capability (``--cap-drop ALL``: as root, bubblewrap would
    otherwise keep them), dies with the process that started it, and gets an environment cleared to
    :attr:`env_allow`. It talks to nbclient over the ipc transport, through a socket folder bound
    into the sandbox; cell timeouts interrupt it by a message (a SIGINT to bubblewrap would kill the
    sandbox, not interrupt the cell).
    """

    env_allow = List(
        Unicode(),
        policy.ENV_ALLOW,
        help="Environment variables passed into the sandbox (all others are cleared).",
    ).tag(config=True)
    tmp_size_mb = Integer(
        policy.TMP_MB,
        help="Size of the kernel's private /tmp (a tmpfs: it would otherwise fill memory).",
    ).tag(config=True)
    socket_root = Unicode(
        "",
        help="Folder for the kernel's socket folder (default: the temporary folder). The grader "
        "puts it in the submission's scratch course, which it removes whatever happened.",
    ).tag(config=True)
    etc_files = List(
        Unicode(),
        policy.ETC_FILES,
        help="Entries of /etc the kernel may read (the rest of /etc is not visible).",
    ).tag(config=True)

    @default("ip")
    def _default_ip(self) -> str:
        if self.transport != "ipc":
            return super()._default_ip()
        return os.path.join(self._socket_folder, "kernel")

    @default("connection_file")
    def _default_connection_file(self) -> str:
        return os.path.join(self._socket_folder, "kernel.json")

    @property
    def _socket_folder(self) -> str:
        if not getattr(self, "_sockets", None):
            root = self.socket_root or None
            self._sockets = tempfile.mkdtemp(prefix="course-sandbox-", dir=root)
        return self._sockets

    @property
    def kernel_spec(self):  # noqa: ANN201 - jupyter_client's KernelSpec
        """The kernel's spec, interrupted by message (see the class docstring)."""
        spec = super().kernel_spec
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        """The kernel's command line, behind bubblewrap."""
        kernel = super().format_kernel_cmd(extra_arguments)
        workdir = os.path.abspath(self._launch_args.get("cwd") or os.getcwd())
        sandboxed = sandbox_command(
            kernel, workdir, self._socket_folder, self.env_allow, self.etc_files, self.tmp_size_mb
        )
        # The configured limits hold for the kernel on every path (plain nbgrader included); `course
        # autograde` also sets them on the whole nbgrader process.
        limits = Limits(config=self.config)
        self._cgroups = cgroups.kernel_groups(
            limits.processes
        )  # run as root: grader/sandbox/cgroups.py
        return rlimits.wrap(
            sandboxed, limits.memory_mb, limits.file_size_mb, limits.processes, self._cgroups
        )

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart)
        # The kernel ended; a cold one's last processes may take a few milliseconds more.
        cgroups.remove(getattr(self, "_cgroups", []), wait=1.0)
        if not restart and getattr(self, "_sockets", None):
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._sockets = ""
