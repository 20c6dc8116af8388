"""The bubblewrap sandbox a graded notebook's kernel runs in, and the check that it can start.

:func:`sandbox_command` puts a kernel's command line behind ``bwrap``: the kernel sees,
read-only, the system, Python, the virtualenv and the notebook package ``course/``; it may write
only in the submission's own folder and a private ``/tmp``; it runs in new namespaces with no
capability and a cleared environment (:class:`grader.kernels.SandboxedKernelManager` says what
and why). :func:`check_sandbox` starts a trivial sandbox once, so that grading refuses to start
on a machine where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

from grader.paths import CourseError


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


def readable_roots() -> list[str]:
    """Folders the kernel must read: the Python installation, the virtualenv, ``course/``."""
    folders = {sys.base_prefix, sys.prefix}
    spec = importlib.util.find_spec("course")  # found, not imported: the grader never imports it
    if spec and spec.submodule_search_locations:
        folders |= set(spec.submodule_search_locations)
    return sorted(os.path.realpath(f) for f in folders)


def sandbox_command(
    kernel: list[str],
    workdir: str,
    sockets: str,
    env_allow: list[str],
    etc_files: list[str],
    tmp_size_mb: int = 256,
) -> list[str]:
    """``bwrap ... -- KERNEL``: the kernel in a sandbox (see :class:`SandboxedKernelManager`)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError(
            "bubblewrap (bwrap) is not installed, so no notebook is graded: `make setup` "
            "installs it (Debian package bubblewrap); without it, grade with `course autograde "
            "--unsafe-no-sandbox`, which marks every notebook graded unprotected."
        )
    args = [bwrap, *system_binds(etc_files, tmp_size_mb)]
    args += ["--bind", sockets, sockets, "--bind", workdir, workdir]
    args += ["--chdir", workdir, "--unshare-all", "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--clearenv"]
    for name, value in sorted(sandbox_env(env_allow).items()):
        args += ["--setenv", name, value]
    return [*args, "--", sys.executable, "-I", "-S", "-c", NEW_SESSION_KEYRING, *kernel]


# Run first in the sandbox, then replaced by the kernel: a session keyring of the kernel's own.
# The grader's (a login session has one) would otherwise be shared by every kernel it starts,
# a place to leave a key for the next submission. keyctl's system call (operation 1: join).
NEW_SESSION_KEYRING = """import ctypes, os, sys
number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
if number is not None and ctypes.CDLL(None, use_errno=True).syscall(number, 1, None) < 0:
    sys.exit("the kernel's sandbox could not give it a session keyring of its own")
os.execv(sys.argv[1], sys.argv[1:])
"""


def system_binds(etc_files: list[str], tmp_size_mb: int) -> list[str]:
    """bwrap's arguments for what every sandbox sees: a private ``/tmp``, and read-only the
    system, the listed files of ``/etc``, Python, the virtualenv and ``course/``."""
    # /tmp first: the folders bound below may live under /tmp (a clone there, say).
    args = ["--size", str(tmp_size_mb * 2**20), "--tmpfs", "/tmp"]
    args += ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    # The host's settings, read-only: bubblewrap leaves /proc/sys writable to a process whose
    # user is root on the host (the grader run as root), capabilities or not.
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    for entry in etc_files:
        if os.path.exists(f"/etc/{entry}"):
            args += ["--ro-bind", f"/etc/{entry}", f"/etc/{entry}"]
    for folder in readable_roots():
        args += ["--ro-bind", folder, folder]
    return args


def sandbox_env(env_allow: list[str]) -> dict[str, str]:
    """The kernel's whole environment: HOME, PATH and the allowed variables that are set."""
    env = {"HOME": "/tmp", "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"}
    return env | {name: os.environ[name] for name in env_allow if name in os.environ}
