"""The bubblewrap sandbox a graded notebook's kernel runs in, and the check that it can start.

:func:`sandbox_command` puts a kernel's command line behind ``bwrap``: the kernel sees,
read-only, the system, Python, the virtualenv and the notebook package ``course/``; it may write
only in the submission's own folder and a private ``/tmp``; it runs in new namespaces with no
capability and a cleared environment (:class:`grader.nbgrader.kernels.SandboxedKernelManager` says
what and why). :func:`check_sandbox` starts a trivial sandbox once, so that grading refuses to start
on a machine where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys

from grader.sandbox.policy import POLICY, environment, keyctl_number
from grader.shared.paths import CourseError


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


# What the kernel's interpreter reads, asked of that interpreter itself (``-I``: no cwd, no
# PYTHONPATH, no user site, as in the sandbox's cleared environment; packages found, not imported).
# Not this process's own view: nbgrader puts its working folder first on sys.path
# (nbgrader/apps/baseapp.py, 0.9.6), and ``python -m`` the current folder, so a course folder
# holding a ``course/`` of its own (a clone) named that one, not the one the kernel imports.
PROBE = """import importlib.util, json, sys
found = {name: importlib.util.find_spec(name) for name in ("course", "grader")}
print(json.dumps({
    "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
    "path": sys.path,
    "course": list(found["course"].submodule_search_locations or []) if found["course"] else [],
    "grader": found["grader"] is not None,
}))
"""
PROBE_SECONDS = 60
# Never bound whole, nor a folder above them: the kernel's own /tmp, /dev/shm and /proc are private
# (a bound /tmp would show every other submission's scratch course).
GUARDED = ["/tmp", "/dev/shm", "/proc"]


def kernel_python() -> str:
    """The interpreter every kernel runs: this one, named through the real folder of its virtualenv
    (a ``.venv`` that is a link: the link's own path is not in the sandbox), its file name kept (a
    venv's ``python`` is a link to the base interpreter, and Python finds its virtualenv from the
    name it was started as)."""
    folder, name = os.path.split(os.path.abspath(sys.executable))
    return os.path.join(os.path.realpath(folder), name)


def readable_roots(python: str | None = None) -> list[str]:
    """Folders the kernel must read, resolved: its interpreter's prefixes and binary, every folder
    on its sys.path and the ``course`` package it imports (:func:`kernel_reads`); with ``python`` (a
    kernel spec's own interpreter), that one's too."""
    folders = set(kernel_reads(kernel_python()))
    if python and python != kernel_python():
        folders |= set(kernel_reads(python))
    return sorted(f for f in folders if not _inside_another(f, folders))


@functools.cache
def kernel_reads(python: str) -> tuple[str, ...]:
    """The folders ``python`` reads to run a kernel (see :func:`readable_roots`): asked of it
    (:data:`PROBE`), once per process. A folder on its path that would show more than code is left
    out (:func:`_too_wide`): only the ``course/`` of a course folder is bound."""
    seen = probe(python)
    course = {os.path.realpath(f) for f in seen["course"]}
    guarded = [*GUARDED, os.getcwd()]
    guarded += [os.path.dirname(f) for f in course if _course_folder(os.path.dirname(f))]
    folders = {os.path.realpath(f) for f in seen["prefixes"] if f and os.path.isabs(f)}
    folders |= course | {os.path.dirname(os.path.realpath(python))}
    for entry in seen["path"]:
        if os.path.isabs(entry) and os.path.isdir(entry):
            real = os.path.realpath(entry)
            folders |= set() if _too_wide(real, guarded) else {real}
    return tuple(sorted(f for f in folders if f != "/" and not _inside_another(f, folders)))


@functools.cache
def probe(python: str) -> dict:
    """What ``python`` says of itself (:data:`PROBE`); when it cannot say (not a Python), this
    process's own view for this interpreter, else its folder only."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", PROBE], capture_output=True, text=True, timeout=PROBE_SECONDS
        )
        return json.loads(done.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        if python != kernel_python():
            return {"prefixes": [], "path": [], "course": [], "grader": False}
        return {"prefixes": [sys.prefix, sys.base_prefix], "path": [], "course": _course_here()}


def check_installed() -> None:
    """Fail with a clear message unless the course is installed in this Python: every process of
    grading imports the grader from the installation, never from the current folder."""
    if not probe(kernel_python()).get("grader", True):
        raise CourseError(
            f"the course is not installed in this Python ({sys.executable}): run `make setup` "
            "in the course folder (or `pip install -e .` there), then `.venv/bin/course ...`"
        )


def _too_wide(folder: str, guarded: list[str]) -> bool:
    """Whether a folder of the kernel's path must not be bound: a course folder (the solutions in
    source/, the gradebook: a clone installed by a static ``.pth``), or a folder holding one of
    ``guarded`` (the current folder, the course folder above ``course/``, the sandbox's private
    folders)."""
    if _course_folder(folder):
        return True
    return any(g == folder or g.startswith(folder.rstrip("/") + "/") for g in guarded)


def _course_folder(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "nbgrader_config.py"))


def _course_here() -> list[str]:
    """``course``'s folders as this process finds them (the probe failed: the old guess)."""
    spec = importlib.util.find_spec("course")  # found, not imported: the grader never imports it
    return list(spec.submodule_search_locations or []) if spec else []


def _inside_another(folder: str, folders: set[str]) -> bool:
    return any(f != folder and folder.startswith(f.rstrip("/") + "/") for f in folders)


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
    python = kernel_python()
    if kernel and kernel[0] == sys.executable:  # jupyter_client's name for "python"
        kernel = [python, *kernel[1:]]
    own = shutil.which(kernel[0]) if kernel else None  # a kernel spec's own interpreter
    args = [bwrap, *system_binds(etc_files, tmp_size_mb, own)]
    named = {"workdir": workdir, "sockets": sockets}
    for name in POLICY.writable:
        args += ["--bind", named[name], named[name]]
    args += ["--chdir", workdir, *UNSHARE, "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL"] if not POLICY.capabilities else []
    args += ["--clearenv"]
    for name, value in sorted(sandbox_env(env_allow).items()):
        args += ["--setenv", name, value]
    for path in MADE_WRITABLE:  # last: the mount points above are made in them
        args += ["--remount-ro", path] if os.path.exists(path) else []
    if POLICY.new_session_keyring:
        kernel = [python, "-I", "-S", "-c", NEW_SESSION_KEYRING.format(keyctl_number()), *kernel]
    return [*args, "--", *kernel]


# What bubblewrap itself leaves writable: its new root and /dev (tmpfs), /dev/pts. The policy
# writes in none of them (its writable mounts are bound above): read-only, as everything else the
# kernel sees. The devices bound in /dev stay as they are (both sandboxes: a device's mount made
# read-only no longer opens for writing, and a write to /dev/null touches no file system).
MADE_WRITABLE = ["/", "/dev", "/dev/pts"]


# bubblewrap's options for the policy's namespaces (a new mount namespace it always makes).
UNSHARE_OPTIONS = {"user": "--unshare-user", "pid": "--unshare-pid", "net": "--unshare-net"}
UNSHARE_OPTIONS |= {"ipc": "--unshare-ipc", "uts": "--unshare-uts"}
UNSHARE_OPTIONS |= {"cgroup": "--unshare-cgroup-try", "mount": None}
UNSHARE = [UNSHARE_OPTIONS[name] for name in POLICY.namespaces if UNSHARE_OPTIONS[name]]

# Run first in the sandbox, then replaced by the kernel: a session keyring of the kernel's own. The
# grader's (a login session has one) would otherwise be shared by every kernel it starts, a place to
# leave a key for the next submission. keyctl's system call (operation 1: join).
NEW_SESSION_KEYRING = """import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).syscall({}, 1, None) < 0:
    sys.exit("the kernel's sandbox could not give it a session keyring of its own")
os.execv(sys.argv[1], sys.argv[1:])
"""


def system_binds(etc_files: list[str], tmp_size_mb: int, python: str | None = None) -> list[str]:
    """bwrap's arguments for what every sandbox sees: a private ``/tmp``, and read-only the system,
    the listed files of ``/etc`` and what the kernel's Python reads (its installation, the
    virtualenv, ``course/``: :func:`readable_roots`, with ``python``'s if given)."""
    # /tmp first: the folders bound below may live under /tmp (a clone there, say).
    size = ["--size", str(tmp_size_mb * 2**20)]
    args = [*size, "--tmpfs", "/tmp"] if "/tmp" in POLICY.private_tmpfs else []
    args += ["--ro-bind", "/usr", "/usr", "--proc", POLICY.proc, "--dev", "/dev"]
    for path in POLICY.private_tmpfs:
        args += [*size, "--tmpfs", path] if path != "/tmp" else []
    # The host's settings, read-only: bubblewrap leaves /proc/sys writable to a process whose user
    # is root on the host (the grader run as root), capabilities or not.
    for path in POLICY.host_read_only:
        args += ["--ro-bind-try", path, path]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    for entry in etc_files:
        if os.path.exists(f"/etc/{entry}"):
            args += ["--ro-bind", f"/etc/{entry}", f"/etc/{entry}"]
    for folder in readable_roots(python):
        args += ["--ro-bind", folder, folder]
    return args


def sandbox_env(env_allow: list[str]) -> dict[str, str]:
    """The kernel's whole environment: HOME, PATH and the allowed variables that are set."""
    return environment(os.path.dirname(kernel_python()), env_allow)
