"""A warm nbgrader for ``course autograde`` (unless ``--cold``): each submission's nbgrader process
is forked from one that has imported nbgrader once.

``python -m grader.nbgrader.main autograde ...`` spends more than a second importing nbgrader,
nbconvert, jupyter_client and sqlalchemy before it reads a notebook. Warm, the grader starts one
server per run (:class:`ForkServer`, ``python -m grader.warm.forkserver SOCKET``): it imports those
once, starts no thread, and for each request forks a child that becomes that submission's nbgrader
process: a session of its own, the requested folder, environment and rlimits
(:func:`grader.sandbox.rlimits.apply`), stdout and stderr on the pipe the grader passed, then
``grader.nbgrader.main.main()`` with the requested arguments. nbgrader is trusted code and outside
the sandbox, as on the cold path; what the fork shares with the server is what any fresh process of
the same program would have (imported modules, nothing configured: every application, configuration
file and gradebook is opened in the child). The child's id is one of this machine, so the grader
kills it (and what it started) as it kills a cold nbgrader process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.shared import process_output
from grader.warm.wire import ended_children

PRELOAD = [
    "nbgrader.apps.nbgraderapp",
    "nbgrader.apps.autogradeapp",
    "nbgrader.converters.autograde",
    "nbgrader.preprocessors",
    "nbclient",
    "jupyter_client",
    "zmq",
    "sqlalchemy",
    "grader.nbgrader.execute_keeping_points",
    "grader.nbgrader.leave_no_links",
    "grader.nbgrader.verify_points",
    "grader.nbgrader.kernels",
    "grader.nbgrader.warm_kernels",
    "ipykernel.kernelspec",  # by jupyter_client, for the python3 kernel's spec (with IPython)
    "IPython",  # by jupyter_client's kernel spec manager, for the folders of kernel specs
    "sqlalchemy.dialects.sqlite",  # by the gradebook's first engine
]


class ForkedRun:
    """One forked nbgrader process, as :func:`grader.coordinator.nbgrader_run.run` uses a Popen."""

    def __init__(self, client: socket.socket, pid: int, output: int) -> None:
        self.client, self.pid, self.output = client, pid, output
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        """Its output (bounded: grader/shared/process_output.py) and its end, within ``timeout``
        seconds (TimeoutExpired after)."""
        end, log = time.monotonic() + (timeout if timeout is not None else 1e9), ""
        if self.output >= 0:
            log = process_output.read_all(self.output, timeout)
            os.close(self.output)
            self.output = -1
        self.client.settimeout(max(1.0, end - time.monotonic()))
        try:
            line = self.client.makefile("rb").readline()
        except TimeoutError:
            raise subprocess.TimeoutExpired("nbgrader", timeout or 0) from None
        self.returncode = int(json.loads(line).get("exit", 1)) if line else 1
        self.client.close()
        return log, None

    def close(self) -> None:
        """Drop the pipe and the connection (after the process was killed)."""
        if self.output >= 0:
            os.close(self.output)
            self.output = -1
        self.client.close()


class ForkServer:
    """The per-run server (started at once, waited for at the first :meth:`spawn`), or, with
    ``attach``, the socket of one that the kept warm workers hold (:mod:`grader.warm.service`: not
    started, nor stopped, here)."""

    def __init__(self, attach: Path | None = None) -> None:
        self.process: subprocess.Popen | None = None
        if attach is not None:
            self.folder, self.socket = None, attach
            return
        self.folder = Path(tempfile.mkdtemp(prefix="course-nbfork-"))
        self.socket = self.folder / "server.sock"
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "grader.warm.forkserver", str(self.socket)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

    def _connect(self, timeout: float = 120) -> socket.socket:
        end = time.monotonic() + timeout
        while True:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                client.connect(str(self.socket))
                return client
            except OSError:
                client.close()
                ended = self.process is not None and self.process.poll() is not None
                if ended or time.monotonic() > end:
                    raise RuntimeError("the warm nbgrader server did not start") from None
                time.sleep(0.05)

    def spawn(
        self, command: list[str], cwd: Path, env: dict[str, str], limits: list[int]
    ) -> ForkedRun:
        """Fork ``python -m grader.nbgrader.main ARGS`` (``command``'s arguments after the module)
        in ``cwd`` with ``env`` under the rlimits ``limits`` (memory, file size, processes)."""
        read, write = os.pipe()
        client = self._connect()
        try:
            message = {"args": command, "cwd": str(cwd), "env": env, "limits": limits}
            socket.send_fds(client, [json.dumps(message).encode() + b"\n"], [write])
            os.close(write)
            line = client.makefile("rb").readline()
            answer = json.loads(line) if line else {"error": "no answer"}
        except BaseException:
            os.close(read)
            client.close()
            raise
        if "pid" not in answer:
            os.close(read)
            client.close()
            raise RuntimeError(f"the warm nbgrader server could not start nbgrader: {answer}")
        return ForkedRun(client, int(answer["pid"]), read)

    def close(self) -> None:
        if self.process is None:  # attached: the kept workers' server goes on
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for path in (self.socket, self.folder):
            try:
                path.unlink() if path.is_file() or path.is_socket() else path.rmdir()
            except OSError:
                pass


def _child(request: dict, output: int) -> None:
    """The forked nbgrader process. Never returns into the server's loop."""
    try:
        from grader.nbgrader import main as nbgrader_main  # loaded by the server already (PRELOAD)
        from grader.sandbox import rlimits  # loaded by the server already (PRELOAD)

        signal.set_wakeup_fd(-1)  # the server's
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        rlimits.apply(*request["limits"])
        sys.argv = ["grader.nbgrader.main", *request["args"]]
        nbgrader_main.main()
    except BaseException as error:  # noqa: BLE001 - said on the grader's pipe, then the end
        print(f"the forked nbgrader failed: {error!r}", file=sys.stderr, flush=True)
    os._exit(1)


def _prepare_once() -> None:
    """What each child would otherwise redo, and which depends on no submission: the notebook
    format's schema validators (compiled by fastjsonschema), nbgrader's database mappers and what
    the kernels' Python reads (grader.sandbox.bubblewrap.readable_roots)."""
    import nbformat  # in the server only, like PRELOAD (the grader's process never needs it)
    import nbgrader.api  # noqa: F401 - its models, which configure_mappers sets up
    from nbformat.validator import get_validator  # in the server only, as nbformat
    from sqlalchemy.orm import configure_mappers  # in the server only, as nbformat

    from grader.sandbox.bubblewrap import readable_roots  # in the server only, as nbformat

    for minor in (4, nbformat.current_nbformat_minor):  # what Jupyter has written for years
        for relaxed in (False, True):  # nbformat.read checks strictly, nbconvert relaxed
            get_validator(nbformat.current_nbformat, minor, relax_add_props=relaxed)
    configure_mappers()
    readable_roots()  # what the kernels read, asked of their Python once (a process each)


def serve(path: str) -> None:
    """Preload, then fork one nbgrader per request until the grader ends."""
    # in the server, first: it keeps a slow import out
    from grader.nbgrader import main as nbgrader_main

    nbgrader_main.skip_slow_imports()
    for name in PRELOAD:
        __import__(name)
    _prepare_once()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wakeup, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD is written
    signal.set_wakeup_fd(wakeup_write)  # a child's end is told at once
    running: dict[int, socket.socket] = {}
    grader = os.getppid()
    while os.getppid() == grader:  # ends with the grader, however it ended
        ready, _, _ = select.select([listener, wakeup], [], [], 0.1)
        if wakeup in ready:
            _drain(wakeup)
        if listener in ready:
            _accept(listener, running)
        for pid, code in ended_children() if running else ():
            connection = running.pop(pid, None)
            if connection is not None:
                _send(connection, {"exit": code})
                connection.close()


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _accept(listener: socket.socket, running: dict[int, socket.socket]) -> None:
    connection = listener.accept()[0]
    try:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 1)
        while message and not message.endswith(b"\n"):
            chunk = connection.recv(1 << 20)
            message += chunk
            if not chunk:
                break
        request = json.loads(message.decode())
    except (OSError, ValueError) as error:
        _send(connection, {"error": repr(error)})
        connection.close()
        return
    if len(fds) != 1:
        _send(connection, {"error": "no output pipe"})
        connection.close()
        return
    pid = os.fork()
    if pid == 0:
        listener.close()
        _child(request, fds[0])
    os.close(fds[0])
    running[pid] = connection
    _send(connection, {"pid": pid})


def _send(connection: socket.socket, message: dict) -> None:
    try:
        connection.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass


if __name__ == "__main__":
    serve(sys.argv[1])
