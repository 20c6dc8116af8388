"""Each kernel's own cgroups, where the grader runs as root (CI, a container, the demo): a cap on
its processes and a fair share of the processors.

The limit on processes (``c.Limits.processes``) is an rlimit, RLIMIT_NPROC, which Linux does not
apply to the host's root user: a kernel graded by root could fork until the machine had no process
left to give (a fork bomb). And a kernel with many busy processes or threads takes the processors
from the other worker's kernel, whose cells then run out of time through no fault of their own. Run
as root, the grader therefore puts each kernel, cold or warm, in a cgroup of its own under
``course-kernels/`` of each hierarchy that has the ``pids`` or the ``cpu`` controller (cgroup v1 or
v2): ``pids.max`` is the limit (processes and threads, as RLIMIT_NPROC counts them), and the ``cpu``
controller shares the processors between the kernels' cgroups, not between their threads. The kernel
joins them before its sandbox starts and never sees them (no cgroup file system in the sandbox).
Where none can be written (an ordinary user, whom RLIMIT_NPROC limits, or a container whose cgroups
are read-only), kernels get none.

    groups = kernel_groups(512) # the new cgroups (a list, empty where none can be made)
    join(groups) # in the kernel's first process, before the sandbox remove(groups) # once the
    kernel has ended

A cgroup is empty from when it is made until its kernel joins it, which another process does (a
kernel's launcher, or the zygote), while other workers make and remove theirs: so the cgroups of
ended kernels that :func:`remove_ended` removes are only those made :data:`JOIN_SECONDS` ago or more
(their name says when). Removing any empty one once put a starting kernel's cgroups away before it
joined them: the kernel ran uncapped.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import time

PARENT = "course-kernels"
CONTROLLERS = ("pids", "cpu")
# Far more than a kernel takes to join its cgroups once they are made (its start, which times out
# long before): an empty cgroup younger than that may be a starting kernel's.
JOIN_SECONDS = 600
MADE_AT = re.compile(r"kernel-(\d+)-")  # kernel-SECONDS-RANDOM: when it was made


@functools.cache
def parents() -> dict[str, str]:
    """``course-kernels/`` of the hierarchy of each controller, made if need be (one folder for both
    in cgroup v2): the controllers found writable by this process, none if it is not root."""
    if os.geteuid() != 0:
        return {}  # RLIMIT_NPROC holds for everyone else
    try:
        with open("/proc/self/mounts") as mounts:
            entries = [line.split()[1:4] for line in mounts]
    except OSError:
        return {}
    found: dict[str, str] = {}
    for target, kind, options in entries:
        hierarchy = target.replace("\\040", " ")  # how /proc/self/mounts writes a space
        if kind == "cgroup":  # v1: a hierarchy per controller (or a few together)
            have = set(options.split(","))
        elif kind == "cgroup2":
            have = set(_read(os.path.join(hierarchy, "cgroup.controllers")).split())
        else:
            continue
        for controller in [c for c in CONTROLLERS if c in have and c not in found]:
            folder = _made(hierarchy, controller if kind == "cgroup2" else None)
            if folder:
                found[controller] = folder
    return found


def _made(hierarchy: str, enable: str | None) -> str | None:
    """``course-kernels/`` in ``hierarchy`` (v2: with ``enable`` on for its children)."""
    folder = os.path.join(hierarchy, PARENT)
    try:
        os.makedirs(folder, exist_ok=True)
        for where in [hierarchy, folder] if enable else []:
            if enable not in _read(os.path.join(where, "cgroup.subtree_control")).split():
                with open(os.path.join(where, "cgroup.subtree_control"), "w") as file:
                    file.write(f"+{enable}")
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def folders() -> list[str]:
    """The ``course-kernels/`` folders of :func:`parents`, each once, always in this order."""
    return sorted(set(parents().values()))


def kernel_groups(limit: int) -> list[str]:
    """New cgroups for one kernel, one of one name in each of :func:`folders`, at most ``limit``
    processes and threads; none where none can be made (see the module's docstring). Those of
    kernels that have ended are removed first."""
    if not folders():
        return []
    remove_ended()
    groups: list[str] = []
    try:
        made = f"kernel-{int(time.time())}-"
        groups.append(tempfile.mkdtemp(prefix=made, dir=folders()[0]))
        name = os.path.basename(groups[0])
        for folder in folders()[1:]:
            os.mkdir(os.path.join(folder, name))
            groups.append(os.path.join(folder, name))
        if "pids" in parents():
            with open(os.path.join(parents()["pids"], name, "pids.max"), "w") as file:
                file.write(str(limit))
    except OSError:
        remove(groups)
        return []
    return groups


def remove_ended() -> None:
    """Remove the cgroups of the kernels that have ended (one is refused while in use), of those
    made :data:`JOIN_SECONDS` ago or more: a younger one may be a starting kernel's."""
    made_before = time.time() - JOIN_SECONDS
    for folder in folders():
        names = [n for n in os.listdir(folder) if n.startswith("kernel-")]
        remove([os.path.join(folder, n) for n in names if _made_at(n) <= made_before])


def _made_at(name: str) -> float:
    """When the cgroup ``name`` was made (0 if its name does not say: an old one)."""
    found = MADE_AT.match(name)
    return float(found.group(1)) if found else 0.0


def join(groups: list[str]) -> None:
    """Put this process (and whatever it starts from now on) in ``groups``."""
    for group in groups:
        with open(os.path.join(group, "cgroup.procs"), "w") as file:
            file.write("0")


def remove(groups: list[str], wait: float = 0.0) -> None:
    """Remove each of ``groups`` that no process is left in (its files go with it), waiting up to
    ``wait`` seconds in all for the last processes in them to end."""
    end = time.monotonic() + wait
    for group in groups:
        while os.path.isdir(group):
            try:
                os.rmdir(group)
            except OSError:  # in use still (or removed meanwhile)
                if time.monotonic() >= end:
                    break
                time.sleep(0.01)


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""
