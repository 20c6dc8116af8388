"""The sandbox policy of a graded kernel, as data: what it sees fresh, what of the host it sees
read-only, where it may write, which namespaces are its own, what it may not do.

Both sandboxes are built from it: bubblewrap's arguments for a kernel started afresh
(:func:`grader.sandbox.bubblewrap.sandbox_command`) and the mounts, namespaces and limits the warm
zygote sets up for each kernel it forks (:mod:`grader.warm.zygote`, which receives
:meth:`Policy.for_zygote` in each start request: it cannot import the grader).
``tests/test_kernel_sandbox.py`` checks that a kernel sees the same from inside either way.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

# keyctl's system call number (operation 1: join a new session keyring), per machine, from each
# architecture's system call table in Linux (arch/*/entry/syscalls, include/uapi/asm-generic).
KEYCTL = {
    "x86_64": 250,
    "i686": 288,
    "aarch64": 219,
    "riscv64": 219,
    "armv7l": 311,
    "ppc64le": 271,
    "s390x": 280,
}


# The variables a kernel's environment keeps (all others are cleared), the entries of /etc it may
# read (the rest of /etc is not there), the size of each private tmpfs: the defaults of
# SandboxedKernelManager's settings (c.SandboxedKernelManager.env_allow, etc_files, tmp_size_mb).
ENV_ALLOW = [
    "LANG", "LC_ALL", "TZ", "NBGRADER_EXECUTION", "COURSE_FAST", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "TORCH_NUM_THREADS", "MPLBACKEND", "PYTHONHASHSEED",
]  # fmt: skip
ETC_FILES = ["ld.so.cache", "localtime", "passwd", "group", "nsswitch.conf", "fonts"]
ETC_FILES += ["alternatives"]
TMP_MB = 256


@dataclass(frozen=True)
class Policy:
    """What one graded kernel may see and do."""

    # Fresh and private to the kernel: an empty tmpfs each (its size: the sandbox's /tmp size).
    private_tmpfs: tuple[str, ...] = ("/tmp", "/dev/shm")
    # A /proc of the kernel's own PID namespace.
    proc: str = "/proc"
    # The host's settings under /proc: read-only (a kernel run by root could otherwise write them).
    host_read_only: tuple[str, ...] = (
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
    )
    # Writable besides the private mounts: the submission's folder and the kernel's socket folder.
    # Everything else the kernel sees is read-only.
    writable: tuple[str, ...] = ("workdir", "sockets")
    # Its own namespaces: no other process, no network, no host name, mounts or ids of the host's.
    namespaces: tuple[str, ...] = ("user", "mount", "pid", "net", "ipc", "uts", "cgroup")
    capabilities: tuple[str, ...] = ()  # none, and none to regain (no_new_privs)
    new_session_keyring: bool = True  # never the grader's (a login session has one)
    core_dumps: bool = False
    home: str = "/tmp"

    def for_zygote(self) -> dict:
        """The policy as the zygote reads it (plain JSON), with this machine's keyctl number."""
        return {**asdict(self), "keyctl": keyctl_number()}


POLICY = Policy()


def keyctl_number(machine: str | None = None) -> int:
    """keyctl's system call number here; a clear refusal on a machine not in :data:`KEYCTL`."""
    machine = machine or os.uname().machine
    if machine not in KEYCTL:
        raise RuntimeError(
            f"the sandbox cannot give a kernel a session keyring of its own on {machine}: its "
            "keyctl system call number is not in grader/sandbox/policy.py KEYCTL (add it, from "
            "the architecture's system call table), or grade with --unsafe-no-sandbox"
        )
    return KEYCTL[machine]


def environment(python_folder: str, allowed: list[str]) -> dict[str, str]:
    """The kernel's whole environment: HOME, PATH and the allowed variables that are set."""
    env = {"HOME": POLICY.home, "PATH": f"{python_folder}:/usr/bin:/bin"}
    return env | {name: os.environ[name] for name in allowed if name in os.environ}
