"""The warm worker's zygote: run INSIDE bubblewrap as ``python -c SOURCE WORKER_ROOT POLICY``.

Not imported by the grader: :func:`grader.warm.wire.zygote_source` hands its text, after the wire's
(:mod:`grader.warm.wire`, the messages both ends use), to Python in the sandbox, where the grader's
package stays out of sight. It uses only the standard library and what it preloads. ``POLICY`` is
the sandbox policy (:meth:`grader.sandbox.policy.Policy.for_zygote`, JSON): the same data that
bubblewrap's arguments for a cold kernel are built from.

The zygote imports torch, ipykernel and the course once, runs no torch op and starts no thread, then
serves requests on ``WORKER_ROOT/control/zygote.sock`` (:mod:`grader.warm.wire`): START with two
file descriptors (the kernel's stdout and stderr) is answered OK once the kernel's sandbox is set
up, or ERROR; then, on the same connection, KILL kills the kernel's whole PID namespace, and the
zygote answers EXIT when it has ended. A connection that closes kills its kernel.

Each kernel is three processes: A (forked by the zygote; joins the kernel's cgroups if any, unshares
new mount, PID, network, IPC and UTS namespaces, waits), B (PID 1 of the new PID namespace: sets up
the mounts and rlimits, enters a user namespace of its own, drops every capability, reaps), C (the
kernel: clean environment, fresh random state). Killing B ends all.
"""

import atexit
import contextlib
import importlib
import json
import os
import pkgutil
import random
import select
import signal
import socket
import sys
import time
import traceback

try:  # the texts of these, made modules before this one (grader.warm.wire.zygote_source)
    import _zygote_kernel_sandbox as kernel_sandbox
    import _zygote_wire as wire
except ImportError:  # read outside the sandbox (tests, tools)
    from grader.warm import kernel_sandbox, wire

# What a kernel imports (PRELOAD, before the zygote answers: the first kernels, forked at once,
# would each import what is missing) and what only some notebooks import, on first use (LATER,
# imported while idle): the modules that running every source notebook warm added. No torch op. Left
# out: datasets and pyarrow, whose import starts a thread (jemalloc's), which a fork would not
# carry; matplotlib_inline.backend_inline, whose import hooks the figures into the shell, which
# exists only in the kernel (imported here, a figure not shown by plt.show() was lost).
# numpy.random: imported lazily by numpy 2, or /tmp's tmpfs may hide it.
PRELOAD = ["numpy", "numpy.random", "torch", "matplotlib", "matplotlib.pyplot", "IPython"]
PRELOAD += ["ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.debugger", "ipywidgets"]
PRELOAD += ["PIL.PngImagePlugin", "IPython.core.pylabtools", "IPython.core.magics.execution"]
PRELOAD += ["course", "course.*"]  # course.*: every module of the course package
# torch._dynamo (an optimizer's first step; sympy alone: attention's) in steps of at most 0.3 s, the
# longest a request waits for the idle zygote (a kernel's end waited up to 0.8 s for it)
LATER = ["sympy", "torch.fx.experimental.symbolic_shapes", "torch.distributed.fsdp._fully_shard"]
LATER += ["torch._dynamo", "tracebacks"]  # tracebacks: not a module (_format_a_traceback)

PR_SET_PDEATHSIG = 1


# -- the kernel (C) ----------------------------------------------------------------------------


# The zygote's environment before its imports: what they set (HF_DATASETS_OFFLINE by course.data,
# MPLBACKEND) is set in each kernel too, as if it had imported them itself.
START_ENVIRONMENT = dict(os.environ)


def _fresh_state(start: wire.Start) -> None:
    """What a freshly started kernel process would have: its environment (with what the preloaded
    modules set in it), argv, path and random state."""
    imported = {k: v for k, v in os.environ.items() if START_ENVIRONMENT.get(k) != v}
    os.environ.clear()
    os.environ.update(start.env)
    os.environ.update(imported)
    sys.argv = [start.argv0, "-f", start.connection_file]
    sys.path[0] = start.workdir  # as `python -m ipykernel_launcher` run in the folder
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()  # torch 2.13 seeds a fresh process from the OS too


def _run_kernel(start: wire.Start, status: int) -> None:
    """C: the kernel, in its own session, with only stdin, stdout and stderr open. Never returns: a
    failure before the kernel starts is told to the zygote on ``status``."""
    try:
        os.setsid()
        os.chdir(start.workdir)
        _fresh_state(start)
    except BaseException as error:  # noqa: BLE001 - told to the zygote, then this process ends
        _tell_and_exit(status, error)
    wire.write_status(status, wire.READY)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    code = 0
    try:
        from ipykernel import kernelapp  # preloaded by the zygote (PRELOAD)

        kernelapp.launch_new_instance(argv=["-f", start.connection_file])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - the kernel's own crash, reported on its stderr
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _tell_and_exit(status: int, error: BaseException) -> None:
    """End a failed forked child, after telling the zygote why (never back into its loop)."""
    try:
        wire.write_status(status, wire.ERROR, repr(error))
    finally:
        os._exit(70)


def _init(start: wire.Start, root: str, status: int, fds: list[int]) -> None:
    """B: PID 1 of the new namespaces. Sets up the sandbox, starts the kernel, reaps."""
    try:
        kernel_sandbox.apply(start, root)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        kernel = os.fork()
    except BaseException as error:  # noqa: BLE001 - told to the zygote, then this process ends
        _tell_and_exit(status, error)
    if kernel == 0:
        _run_kernel(start, status)  # never returns
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    while True:  # reap every orphan; end with the kernel (which ends the namespace)
        try:
            pid, code = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(code) & 0xFF)


def _die_with_parent() -> None:
    """SIGKILL this process when its parent ends (and at once if it already has)."""
    parent = os.getppid()
    kernel_sandbox.check(
        kernel_sandbox.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig"
    )
    if os.getppid() != parent:
        os._exit(70)


def _spawn(start: wire.Start, root: str, fds: list[int]) -> tuple[int, int]:
    """Fork A, which forks B in the new namespaces; return (A's pid, B's pid)."""
    read, write = os.pipe()
    first = os.fork()
    if first == 0:
        try:
            signal.set_wakeup_fd(-1)  # the zygote's: not this child's, nor the kernel's
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _die_with_parent()  # a zygote that ends (the grader stopped it) ends its kernels
            os.close(read)
            for group in start.cgroups:  # the kernel's own (grader/sandbox/cgroups.py)
                with open(os.path.join(group, "cgroup.procs"), "w") as file:
                    file.write("0")
            kernel_sandbox.unshare()
            init = os.fork()
            if init == 0:
                _die_with_parent()  # and so does B, PID 1 of the kernel's namespace
                _init(start, root, write, fds)  # never returns
            wire.write_status(write, wire.PID, init)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the zygote's sockets, this pipe
            _, code = os.waitpid(init, 0)
            os._exit(os.waitstatus_to_exitcode(code) & 0xFF)
        except BaseException as error:  # noqa: BLE001
            _tell_and_exit(write, error)
    os.close(write)
    return first, _read_status(read, first)


def _read_status(read: int, first: int) -> int:
    """B's pid once the kernel is about to start; raise with the child's error otherwise."""
    data, deadline = b"", time.monotonic() + 30
    try:
        while wire.READY not in wire.statuses(data) and wire.ERROR not in wire.statuses(data):
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read, 4096) if ready else b""
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read)
    said = wire.statuses(data)
    if wire.ERROR in said:
        raise RuntimeError(f"the kernel's sandbox could not be set up: {said[wire.ERROR]}")
    if wire.READY not in said or not said.get(wire.PID):
        raise RuntimeError("the kernel's sandbox did not start (no answer from its process)")
    return int(said[wire.PID])


# -- the zygote's loop ---------------------------------------------------------------------------


class Kernel:
    """One kernel started for one connection."""

    def __init__(self, connection: socket.socket, first: int, init: int) -> None:
        self.connection, self.first, self.init = connection, first, init

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.init, signal.SIGKILL)  # PID 1 of its namespace: all of it ends


def _send(connection: socket.socket, **answer: object) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(wire.answer(**answer))


def _serve(listener: socket.socket, root: str, wakeup: int) -> None:
    """Answer requests; a kernel's end (SIGCHLD, written on ``wakeup``) is told at once."""
    kernels: dict[socket.socket, Kernel] = {}
    clients: set[socket.socket] = set()
    later = list(LATER)
    while True:
        idle = 0.05 if later else 1.0  # the next of LATER once nothing came for 50 ms
        ready, _, _ = select.select([listener, wakeup, *clients], [], [], idle)
        if not ready and later:
            _import(later.pop(0))
        for connection in ready:
            if connection == wakeup:  # SIGCHLD wrote one byte each (a pipe holds 64 KB)
                os.read(wakeup, 1 << 16)
                continue
            if connection is listener:
                clients.add(listener.accept()[0])
                continue
            try:
                message, fds, _, _ = socket.recv_fds(connection, wire.MESSAGE_BYTES, 2)
            except OSError:
                message, fds = b"", []
            if not message:  # closed: its kernel ends with it
                clients.discard(connection)
                if connection in kernels:
                    kernels.pop(connection).kill()
                connection.close()
                continue
            _handle(connection, message, fds, root, kernels, later)
        _reap(kernels)


def _handle(
    connection: socket.socket,
    message: bytes,
    fds: list[int],
    root: str,
    kernels: dict,
    later: list[str],
) -> None:
    try:
        request = json.loads(message.decode().splitlines()[0])
        op = request.get("op")
        if op == wire.PRELOAD:  # LATER now, then answer (tests: a settled zygote)
            while later:
                _import(later.pop(0))
            _send(connection, ok=True)
        elif op == wire.KILL and connection in kernels:
            kernels[connection].kill()
        elif op == wire.START and connection not in kernels and len(fds) == 2:
            first, init = _spawn(wire.Start.read(request), root, fds)
            kernels[connection] = Kernel(connection, first, init)
            _send(connection, ok=True)
        else:
            _send(connection, error=f"unknown request {op!r}")
    except Exception as error:  # noqa: BLE001 - the zygote outlives a failed request
        _send(connection, error=str(error))
    finally:
        for fd in fds:
            os.close(fd)


def _reap(kernels: dict) -> None:
    for pid, code in wire.ended_children():
        for connection, kernel in list(kernels.items()):
            if kernel.first == pid:
                _send(connection, exit=code)
                del kernels[connection]


def _import(name: str) -> None:
    """Import ``name`` if it loads here (``course.*``: all of ``course``; ``tracebacks``: below)."""
    try:
        if name == "tracebacks":
            _format_a_traceback()
        elif name != "course.*":
            importlib.import_module(name)
        else:
            for module in pkgutil.walk_packages(sys.modules["course"].__path__, "course."):
                importlib.import_module(module.name)
    except Exception:  # noqa: BLE001 - a module that cannot load here loads in the kernel
        pass


def _format_a_traceback() -> None:
    """Format a failed check's traceback through a torch module as a kernel does (no torch op):
    kernels forked after have what it parsed and loaded (0.05 to 0.1 s of their first error)."""
    from IPython.core.ultratb import AutoFormattedTB  # preloaded (IPython)

    class Fails(sys.modules["torch"].nn.Module):
        def forward(self) -> None:
            sys.modules["course.testcells"].fail("a warm-up")

    try:
        Fails()()
    except AssertionError:
        AutoFormattedTB(mode="Context", theme_name="neutral").structured_traceback(*sys.exc_info())


def _self_test() -> None:
    """Set up a kernel's namespaces and mounts in a child that then ends: a zygote that cannot
    (nested user namespaces refused, say) ends here with why, and the grader grades cold."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            signal.set_wakeup_fd(-1)
            os.close(read)
            kernel_sandbox.unshare()
            init = os.fork()
            if init == 0:
                kernel_sandbox.try_it()
                os._exit(0)
            _, code = os.waitpid(init, 0)
            os._exit(os.waitstatus_to_exitcode(code) & 0xFF)
        except BaseException as error:  # noqa: BLE001 - told to the zygote, then this child ends
            _tell_and_exit(write, error)
    os.close(write)
    _, code = os.waitpid(child, 0)
    said = os.read(read, 4096).decode(errors="replace").strip()
    os.close(read)
    if code != 0:
        raise SystemExit(f"this warm worker cannot sandbox a kernel here ({said or code})")


def main(root: str, policy: str) -> None:
    """Preload, then serve the worker's requests until the grader ends."""
    kernel_sandbox.POLICY.update(json.loads(policy))
    # As ipykernel does before any import (matplotlib reads it once): inline figures by default
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    _self_test()
    path = os.path.join(root, wire.SOCKET)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(16)  # then named: the grader goes on, its first request waits for PRELOAD
    os.rename(path + ".new", path)
    for name in PRELOAD:
        _import(name)
    wakeup, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD is written
    signal.set_wakeup_fd(wakeup_write)
    _serve(listener, root, wakeup)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
