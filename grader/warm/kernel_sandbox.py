"""How the warm zygote sandboxes each kernel it forks, from the sandbox policy
(:mod:`grader.sandbox.policy`): the namespaces, the mounts, a user namespace and session keyring of
the kernel's own, no capability, the rlimits. Run INSIDE the zygote's sandbox, as the text
:func:`grader.warm.wire.zygote_source` puts before the zygote's own (standard library only); the
same policy builds bubblewrap's arguments for a cold kernel (:mod:`grader.sandbox.bubblewrap`).
"""

import ctypes
import os
import resource
import stat

try:  # the wire's text, made a module before this one (grader.warm.wire.zygote_source)
    import _zygote_wire as wire
except ImportError:  # read outside the sandbox (tests, tools)
    from grader.warm import wire

# Linux's flags for unshare(2), by the policy's names for namespaces (include/uapi/linux/sched.h)
CLONE = {"mount": 0x00020000, "uts": 0x04000000, "ipc": 0x08000000, "user": 0x10000000}
CLONE |= {"pid": 0x20000000, "net": 0x40000000, "cgroup": 0x02000000}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
OPTION_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}
OPTION_FLAGS |= {"noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
POLICY: dict = {}  # the sandbox policy (set by the zygote's main)


def new_namespaces() -> int:
    """The policy's namespaces but the user's (entered last, after the mounts)."""
    return sum(CLONE[name] for name in POLICY["namespaces"] if name != "user")


libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encode = lambda s: s.encode() if s else None  # noqa: E731
    result = libc.mount(
        encode(source), target.encode(), encode(fstype), ctypes.c_ulong(flags), encode(data)
    )
    check(result, f"mount {target}")


def writable_mounts(start: wire.Start) -> set[str]:
    named = {"workdir": start.workdir, "sockets": start.sockets}
    private = {*POLICY["private_tmpfs"], POLICY["proc"]}
    return private | {named[name] for name in POLICY["writable"]}


def mounts(start: wire.Start, root: str) -> None:
    """The policy's mounts: fresh private tmpfs (/tmp, /dev/shm), the worker's folder hidden but for
    this submission's folders, a /proc of the new PID namespace with the host's settings read-only,
    every other mount read-only."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in bound(start)}
    size = int(start.tmp_mb) * 2**20
    for path in POLICY["private_tmpfs"]:
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    if os.path.exists(root):  # not under /tmp: hide the worker's folder (other submissions)
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path, fd in sorted(kept.items()):  # a folder before the folders inside it
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        os.close(fd)
    mount("proc", POLICY["proc"], "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in POLICY["host_read_only"]:
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    read_only_but(writable_mounts(start))


def bound(start: wire.Start) -> list[str]:
    """Bound again over the fresh /tmp: the submission's folder and socket folder, and what the
    kernel reads (Python, the virtualenv, ``course/``) if under /tmp (read-only, as the rest)."""
    reads = [path for path in start.readable if under(path, "/tmp")]
    return [start.workdir, start.sockets, *reads]


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def read_only_but(writable: set[str]) -> None:
    """Remount read-only every mount not in ``writable`` (keeping its other flags)."""
    with open("/proc/self/mountinfo", "rb") as file:
        entries = [line.split() for line in file]
    for fields in entries:
        target = os.fsdecode(fields[4].decode("unicode_escape").encode("latin-1"))  # \\040: " "
        options = fields[5].decode().split(",")
        if target in writable or "ro" in options or target.startswith("/proc/"):
            continue
        if os.path.exists(target) and stat.S_ISCHR(os.stat(target).st_mode):
            continue  # a device (/dev/null...): as bubblewrap binds it (sandbox/bubblewrap.py)
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in options:
            flags |= OPTION_FLAGS.get(option, 0)
        try:
            mount(None, target, None, flags)
        except OSError as error:
            if error.errno not in (2, 22):  # hidden under a later mount (the worker's folder)
                raise


def own_user_namespace() -> None:
    """A user namespace of the kernel's own (ids mapped to themselves) and a new session keyring
    (never another kernel's nor the grader's), after the mounts (a covered /proc refuses it)."""
    uid, gid = os.geteuid(), os.getegid()
    check(libc.unshare(CLONE["user"]), "unshare user")
    for name, text in [("uid_map", uid), ("setgroups", "deny"), ("gid_map", gid)]:
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text if text == "deny" else f"{text} {text} 1")
    if POLICY["new_session_keyring"]:  # not the grader's either
        check(min(0, libc.syscall(POLICY["keyctl"], 1, None)), "session keyring")


def drop_capabilities() -> None:
    """No capability left, none to regain (bounding and ambient sets cleared, no new privs)."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            check(-1, f"drop capability {cap}")
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

    header, data = Header(0x20080522, 0), (Data * 2)()
    check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def rlimits(limits: wire.Limits) -> None:
    """The limits grader/sandbox/rlimits.py sets for a cold kernel, the same way."""
    mb = 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    if not POLICY["core_dumps"]:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def unshare() -> None:
    """New namespaces, the policy's but the user's (A, before forking B)."""
    check(libc.unshare(new_namespaces()), "unshare")


def apply(start: wire.Start, root: str) -> None:
    """The kernel's sandbox, set up in B (PID 1 of the new namespaces)."""
    mounts(start, root)
    rlimits(start.limits)
    own_user_namespace()
    if not POLICY["capabilities"]:
        drop_capabilities()


def try_it() -> None:
    """What a kernel's sandbox does, on nothing (the zygote's self-test, in new namespaces)."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    own_user_namespace()
    drop_capabilities()
