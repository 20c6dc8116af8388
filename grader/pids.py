"""A cap on each kernel's processes where Linux's per-user one does not hold: the grader run as
root (CI, a container, the demo).

The limit on processes (``c.Limits.processes``) is an rlimit, RLIMIT_NPROC, which Linux does not
apply to the host's root user: a kernel graded by root could fork until the machine has no
process left to give (a fork bomb), which the other worker's submission, the grader and every
other program of the machine would pay for until the submission's time limit. Run as root,
the grader therefore puts each kernel, cold or warm, in a cgroup of its own whose ``pids.max``
is that limit (processes and threads together, as RLIMIT_NPROC counts them): under
``course-kernels/`` of the cgroup hierarchy that has the ``pids`` controller (cgroup v1 or v2).
The kernel joins it before its sandbox starts and never sees it (no cgroup file system in the
sandbox). Where no such hierarchy is writable (an ordinary user, whom RLIMIT_NPROC limits, or a
container whose cgroups are read-only), kernels get no cgroup and the run goes on.

    group = kernel_group(512)   # a new cgroup, or None
    join(group)                 # in the kernel's first process, before the sandbox
    remove(group)               # once the kernel has ended
"""

from __future__ import annotations

import functools
import os
import tempfile

PARENT = "course-kernels"


@functools.cache
def parent() -> str | None:
    """``course-kernels/`` in the cgroup hierarchy with the pids controller, made if need be, or
    None where there is none that this process may write (or it is not root)."""
    if os.geteuid() != 0:
        return None  # RLIMIT_NPROC holds for everyone else
    try:
        with open("/proc/self/mounts") as mounts:
            entries = [line.split()[1:4] for line in mounts]
    except OSError:
        return None
    for target, kind, options in entries:
        if kind == "cgroup" and "pids" in options.split(","):  # cgroup v1
            return _made(target, v2=False)
    for target, kind, _ in entries:
        if kind == "cgroup2" and "pids" in _read(os.path.join(target, "cgroup.controllers")):
            return _made(target, v2=True)
    return None


def _made(hierarchy: str, v2: bool) -> str | None:
    hierarchy = hierarchy.replace("\\040", " ")  # how /proc/self/mounts writes a space
    folder = os.path.join(hierarchy, PARENT)
    try:
        os.makedirs(folder, exist_ok=True)
        for where in [hierarchy, folder] if v2 else []:  # v2: the controller for the children
            if "pids" not in _read(os.path.join(where, "cgroup.subtree_control")):
                with open(os.path.join(where, "cgroup.subtree_control"), "w") as file:
                    file.write("+pids")
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def kernel_group(limit: int) -> str | None:
    """A new cgroup for one kernel, at most ``limit`` processes and threads, or None (see the
    module's docstring). Empty groups of kernels that have ended are removed first."""
    folder = parent()
    if folder is None:
        return None
    remove_ended()
    try:
        group = tempfile.mkdtemp(prefix="kernel-", dir=folder)
        with open(os.path.join(group, "pids.max"), "w") as file:
            file.write(str(limit))
    except OSError:
        return None
    return group


def remove_ended() -> None:
    """Remove the groups of the kernels that have ended (a group is refused while in use)."""
    folder = parent()
    for name in os.listdir(folder) if folder else []:
        if name.startswith("kernel-"):
            remove(os.path.join(folder, name))


def join(group: str) -> None:
    """Put this process (and whatever it starts from now on) in ``group``."""
    with open(os.path.join(group, "cgroup.procs"), "w") as file:
        file.write("0")


def holds_processes(group: str) -> bool:
    """Whether a process is in ``group``."""
    return bool(_read(os.path.join(group, "cgroup.procs")).strip())


def remove(group: str) -> None:
    """Remove ``group`` if no process is left in it (an empty cgroup's files go with it)."""
    try:
        os.rmdir(group)
    except OSError:
        pass


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""
