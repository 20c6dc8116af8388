"""Each kernel's cgroups (grader/sandbox/cgroups.py), made, joined and removed while other kernels
start.

Run by root where a cgroup hierarchy with the pids or cpu controller is writable (here and on
CI); elsewhere a kernel gets none, which the first test checks instead.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from grader.sandbox import cgroups

AS_ROOT = os.geteuid() == 0


@pytest.fixture
def made() -> list[str]:
    """Every cgroup a test makes, removed after it."""
    groups: list[str] = []
    yield groups
    cgroups.remove(groups, wait=1.0)


def test_kernels_get_cgroups_as_root_and_none_otherwise(made: list[str]) -> None:
    groups = cgroups.kernel_groups(64)
    made += groups
    if not AS_ROOT:
        assert groups == []
        return
    assert set(cgroups.parents()) == {"pids", "cpu"}, "run as root here, as on CI"
    assert len(groups) == len(cgroups.folders())
    assert [open(f"{g}/pids.max").read() for g in groups if "/pids" in g] == ["64\n"]


@pytest.mark.skipif(not AS_ROOT, reason="no cgroups are made for an ordinary user (checked above)")
def test_a_starting_kernels_cgroups_outlive_the_next_kernels_start(made: list[str]) -> None:
    """A kernel joins its cgroups after they are made, from another process; another worker's
    kernel starting meanwhile once removed them as "ended" (empty), and the first kernel ran
    without its cap on processes (a fork bomb filled the machine)."""
    first = cgroups.kernel_groups(64)  # made; its kernel has not joined them yet
    made += first
    made += cgroups.kernel_groups(64)  # the other worker's kernel starts
    assert all(os.path.isdir(g) for g in first), "a starting kernel's cgroups were removed"


@pytest.mark.skipif(not AS_ROOT, reason="no cgroups are made for an ordinary user (checked above)")
def test_the_cgroups_of_ended_kernels_are_removed_once_old_enough(made: list[str]) -> None:
    folder = cgroups.folders()[0]
    old = "kernel-1-ended"  # made long ago, empty: its kernel ended
    legacy = "kernel-oldname"  # named as before the time was in the name
    busy = "kernel-2-busy"  # made long ago, a process still in it
    for name in (old, legacy, busy):
        os.mkdir(os.path.join(folder, name))
        made.append(os.path.join(folder, name))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(os.path.join(folder, busy, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))
        made += cgroups.kernel_groups(64)  # a new kernel starts: the ended ones go
        left = set(os.listdir(folder))
        assert old not in left and legacy not in left
        assert busy in left, "a cgroup still in use was removed"
    finally:
        sleeper.kill()
        sleeper.wait()
    cgroups.remove([os.path.join(folder, busy)], wait=1.0)
    assert not os.path.isdir(os.path.join(folder, busy))
