"""The warm worker's wire: every message between the grader and its zygote, and between the zygote
and the children it forks, by name.

Both ends import this module: the grader's side (:mod:`grader.warm.pool`, the warm kernel manager
:mod:`grader.nbgrader.warm_kernels`) as any module, and the zygote (:mod:`grader.warm.zygote`),
which runs inside the sandbox where the grader's package is out of sight, as the text that
:func:`zygote_source` puts before its own. Standard library only, for that reason.

On the zygote's socket (``control/zygote.sock`` in the worker's folder) each message is one JSON
object on one line. The grader asks ``{"op": START, ...}`` (the fields of :class:`Start`, with the
kernel's stdout and stderr as two file descriptors), ``{"op": KILL}`` or ``{"op": PRELOAD}``; the
zygote answers ``{"ok": true}``, ``{"error": WHY}``, and, when a started kernel has ended,
``{"exit": STATUS}``. A forked child tells the zygote how its kernel's start went on a pipe, one
:func:`status` line at a time: the pid of the kernel's namespace, then ready or an error.
"""

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

SOCKET = "control/zygote.sock"  # under the worker's folder
CGROUPS = "cgroups"  # under the worker's folder: where the zygote sees the kernels' cgroups
START, KILL, PRELOAD = "start", "kill", "preload"
OK, ERROR, EXIT = "ok", "error", "exit"  # the keys of the zygote's answers
PID, READY = "pid", "ready"  # a child's status lines (and ERROR)
MESSAGE_BYTES = 1 << 16  # the longest message the zygote reads


@dataclass
class Limits:
    """The rlimits of a kernel, in MB and processes (:class:`grader.shared.limits.Limits`)."""

    memory_mb: int
    file_size_mb: int
    processes: int


@dataclass
class Start:
    """Start a kernel: where it works, its limits, how it is started (what it may see is the sandbox
    policy the zygote was started with, :mod:`grader.sandbox.policy`)."""

    workdir: str  # the submission's folder: the kernel's working folder, writable
    sockets: str  # the folder of the kernel's ipc sockets, writable
    connection_file: str
    argv0: str  # the kernel's sys.argv[0]: its interpreter
    env: dict[str, str]  # its whole environment
    limits: Limits
    tmp_mb: int  # the size of each private tmpfs (the policy's)
    readable: list[str] = field(default_factory=list)  # bound again if under the fresh /tmp
    cgroups: list[str] = field(default_factory=list)  # where the zygote sees the kernel's cgroups

    @classmethod
    def read(cls, message: dict) -> "Start":
        fields = {k: v for k, v in message.items() if k != "op"}
        return cls(**{**fields, "limits": Limits(**fields["limits"])})


def encode(op: str, **fields: object) -> bytes:
    """One request line: ``{"op": op, **fields}``."""
    return json.dumps({"op": op, **fields}).encode() + b"\n"


def start_request(start: Start) -> bytes:
    return encode(START, **asdict(start))


def answer(**fields: object) -> bytes:
    """One answer line of the zygote: ``answer(ok=True)``, ``answer(error=...)``..."""
    return json.dumps(fields).encode() + b"\n"


def request(client: socket.socket, message: bytes, fds: list[int] | None = None) -> dict:
    """Send one request line, return the zygote's one-line answer."""
    if fds:
        socket.send_fds(client, [message], fds)
    else:
        client.sendall(message)
    return json.loads(read_line(client))


def read_line(client: socket.socket) -> bytes:
    """One answer line, read byte by byte (what follows belongs to a later reader)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = client.recv(1)
        if not chunk:
            raise OSError("the warm worker closed the connection")
        line += chunk
    return line


def status(kind: str, value: object = "") -> bytes:
    """One status line of a forked child: (PID, n), (READY,) or (ERROR, why)."""
    return json.dumps([kind, value]).encode() + b"\n"


def statuses(data: bytes) -> dict[str, object]:
    """The status lines read from a child, by kind (a line cut short by the child's end is left
    out)."""
    found: dict[str, object] = {}
    for line in data.splitlines():
        try:
            kind, value = json.loads(line)
        except ValueError:
            continue
        found[kind] = value
    return found


def write_status(fd: int, kind: str, value: object = "") -> None:
    os.write(fd, status(kind, value))


def ended_children() -> Iterator[tuple[int, int]]:
    """(pid, exit code) of each child process that has ended, without waiting for the others:
    what an ``{"exit": ...}`` answer reports (the zygote's kernels, the fork server's servers)."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, os.waitstatus_to_exitcode(code)


# Bundled before the zygote, in this order, each made the module named (what it imports first).
BUNDLED = [("_zygote_wire", "wire.py"), ("_zygote_kernel_sandbox", "kernel_sandbox.py")]


def zygote_source() -> str:
    """The zygote's program for ``python -c``: the text of each module of :data:`BUNDLED`, made the
    module named, then the zygote's own, which imports them by those names."""
    here = Path(__file__).parent
    boot = "import sys as _sys, types as _types\n"
    for name, file in BUNDLED:
        text = (here / file).read_text()
        boot += f"_sys.modules[{name!r}] = _module = _types.ModuleType({name!r})\n"
        boot += f"exec(compile({text!r}, 'grader/warm/{file}', 'exec'), _module.__dict__)\n"
    return boot + (here / "zygote.py").read_text()
