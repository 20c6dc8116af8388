"""The warm worker (grader/warm/pool.py): kernels forked from one zygote see nothing of each other.

One zygote (one worker) serves every kernel of this module, one after the other, as it serves
the submissions a worker grades. A first kernel leaves behind everything it can (patched
functions of torch and the course, a module, files in /tmp, /dev/shm and its folder, an
environment variable, a thread and a process still running, a seeded random state, a large
allocation); the next one looks for each and must find none. Other tests: the kernel cannot
write outside its folder, cannot see another submission's folder, has no network and no
capability, and stopping it (the deadline, a killed nbgrader) ends every process it started.
The last test grades a class of A through ``course autograde`` (warm): a submission that leaves
all of this behind, then one that looks for it, scored as when graded cold.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient
from traitlets.config import Config

from grader.coordinator import demo, pipeline
from grader.nbgrader import warm_kernels
from grader.nbgrader.kernels import SandboxedKernelManager
from grader.nbgrader.warm_kernels import WarmKernelManager
from grader.sandbox import cgroups
from grader.warm import pool as warm
from grader.warm.forkserver import ForkServer
from grader.warm.pool import WarmPool, Zygote, connect
from grader.warm.wire import request
from tests.conftest import class_outcome, make_course_copy, run_coroutine
from tests.test_adversarial import ASSIGNMENT, MASK, NOTEBOOK, WRONG_MASK, append_code
from tests.test_kernel_sandbox import KEYCTL, grader_key

MB = 2**20
STATUS = "dict(l.split(':', 1) for l in open('/proc/self/status'))"

LEAVE = """
import os, random, subprocess, sys, threading, time, types
import numpy, torch, torch.nn.functional as F, course.mode
F.softmax = lambda *args, **kwargs: "patched"
torch.nn.functional.relu = lambda *args, **kwargs: "patched"
course.mode.under_nbgrader = lambda: "patched"
sys.modules["planted_module"] = types.ModuleType("planted_module")
for path in ("/tmp/planted.txt", "/dev/shm/planted.txt", "planted.txt"):
    open(path, "w").write("left by the first submission")
os.environ["PLANTED"] = "1"
threading.Thread(target=time.sleep, args=(1000,), name="planted-thread").start()
subprocess.Popen(["sleep", "1000.25"])
random.seed(1); numpy.random.seed(1); torch.manual_seed(1)
import ctypes  # a key in the session, user and user-session keyrings (add_key: keyctl's - 2)
KEYS = ctypes.CDLL(None).syscall, KEYCTL[os.uname().machine]
assert all(KEYS[0](KEYS[1] - 2, b"user", b"planted", b"x", 1, ring) > 0 for ring in (-3, -4, -5))
before = int(STATUS["VmRSS"].split()[0]) // 1024
big = bytearray(b"x" * (400 * 2**20))
print(before)
""".replace("STATUS", STATUS).replace("KEYCTL", str(KEYCTL))

LOOK = """
import ctypes, json, os, random, sys, threading
import numpy, torch, torch.nn.functional as F, course.mode
state = random.getstate(); random.seed(1); python_seeded = state == random.getstate()
state = numpy.random.get_state()[1].copy(); numpy.random.seed(1)
numpy_seeded = bool((state == numpy.random.get_state()[1]).all())
found = {
    "softmax": F.softmax(torch.zeros(2), dim=0).tolist() != [0.5, 0.5],
    "relu": F.relu.__module__ != "torch.nn.functional",
    "course": course.mode.under_nbgrader() == "patched",
    "module": "planted_module" in sys.modules,
    "files": [p for p in ("/tmp/planted.txt", "/dev/shm/planted.txt", FIRST + "/planted.txt")
              if os.path.exists(p)],
    "environment": "PLANTED" in os.environ,
    "threads": [t.name for t in threading.enumerate() if t.name == "planted-thread"],
    "processes": [p for p in os.listdir("/proc") if p.isdigit()
                  and b"1000.25" in open(f"/proc/{p}/cmdline", "rb").read()],
    "random": [python_seeded, numpy_seeded, torch.initial_seed() == 1],
    "keyring": ctypes.CDLL(None).syscall(KEYCTL[os.uname().machine] - 1, b"user", b"planted",
                                         None, 0) > 0,  # request_key: keyctl's - 1
}
print(json.dumps(found))
print(int(STATUS["VmRSS"].split()[0]) // 1024)
""".replace("STATUS", STATUS).replace("KEYCTL", str(KEYCTL))

RANDOM = (
    "import random, numpy, torch\n"
    "print(random.random(), numpy.random.random(), torch.initial_seed(), torch.rand(1).item())"
)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    """One worker: every kernel of this module is forked from this zygote (started from a
    process with a session keyring, as a login session has one)."""
    grader_key()
    pool = WarmPool(1, {})
    try:
        with pool.worker() as one:
            one.settle()  # what it imports while idle: imported before the first kernel
            yield one
            assert one.alive(), "the zygote died while serving the module's kernels"
    finally:
        pool.close()


def folder(zygote: Zygote, name: str) -> Path:
    """A submission's folder in the worker's folder, as a scratch course is made."""
    path = zygote.root / name / "submitted" / "student" / "a"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(zygote: Zygote, work: Path, cells: list[str]) -> list[str]:
    """Each cell's output (stdout, or the error's name), in a warm kernel in ``work``."""
    nb = execute_warm(zygote, work, cells)
    return ["".join(o.get("text", o.get("ename", "")) for o in cell.outputs) for cell in nb.cells]


def execute_warm(zygote: Zygote, work: Path, cells: list[str]) -> nbformat.NotebookNode:
    """A notebook of ``cells`` run in a warm kernel forked from ``zygote``, in ``work``
    (``.../submitted/STUDENT/ASSIGNMENT``); errors are kept as outputs."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    config = {"zygote": str(zygote.socket), "socket_root": str(work.parents[2])}
    NotebookClient(
        nb,
        kernel_manager_class=WarmKernelManager,
        config=Config({"WarmKernelManager": config}),
        timeout=120,
        allow_errors=True,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(work)}},
    ).execute()
    return nb


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_nothing_of_an_earlier_kernel_is_visible(zygote: Zygote) -> None:
    first = folder(zygote, "first")
    rss_before = int(last_line(run(zygote, first, [LEAVE])[0]))
    assert (first / "planted.txt").exists()  # the first kernel did leave it
    second = folder(zygote, "second")
    output = run(zygote, second, [f"FIRST = {str(first)!r}", LOOK])[1]
    found, rss = json.loads(output.strip().splitlines()[-2]), int(last_line(output))
    assert found == {
        "softmax": False,
        "relu": False,
        "course": False,
        "module": False,
        "files": [],
        "environment": False,
        "threads": [],
        "processes": [],
        "random": [False, False, False],
        "keyring": False,
    }
    assert rss < rss_before + 200, f"{rss} MB resident, {rss_before} MB before the allocation"
    assert not marked("1000.25"), "the first kernel's process outlived it"


def test_random_state_is_a_fresh_processes(zygote: Zygote) -> None:
    """Python's, numpy's and torch's random state drawn anew from the OS in each kernel, as in
    a fresh process (torch 2.13 seeds its default generator from the OS too)."""
    one = run(zygote, folder(zygote, "random1"), [RANDOM])[0].split()
    two = run(zygote, folder(zygote, "random2"), [RANDOM])[0].split()
    assert len(one) == len(two) == 4
    same = [
        name
        for name, a, b in zip(["random", "numpy", "torch", "torch.rand"], one, two, strict=True)
        if a == b
    ]
    assert same == [], f"the same random state in two kernels: {same}"


WRITES = """
import os, sys, course
targets = ["/", "/usr", "/etc", "/dev", sys.prefix, os.path.dirname(course.__file__),
           os.path.dirname(os.getcwd()), ROOT, os.path.dirname(os.__file__)]
written = []
for target in targets:
    try:
        open(os.path.join(target, "written.txt"), "w").write("x")
        written.append(target)
    except OSError:
        pass
mounts = [(l.split()[4], "rw" in l.split()[5].split(",")) for l in open("/proc/self/mountinfo")]
writable = []  # the writable mounts not covered by a later one (at or above their path)
for index, (path, rw) in enumerate(mounts):
    later = [p for p, _ in mounts[index + 1:]]
    if rw and not any(path == p or path.startswith(p.rstrip("/") + "/") for p in later):
        writable.append(path)
print(written)
print(writable)
"""


def test_the_kernel_writes_only_in_its_folder(zygote: Zygote) -> None:
    """Every mount the kernel may write is its folder, its socket folder or private; what it
    wrote elsewhere (the folders above its own, shown in its private /tmp) is not on the host."""
    import course

    work = folder(zygote, "writes")
    output = run(zygote, work, [f"ROOT = {str(zygote.root)!r}", WRITES])[1]
    written, writable = (eval(line) for line in output.strip().splitlines()[-2:])  # noqa: S307
    assert all(path.startswith("/tmp/") for path in written), written
    sockets = [p for p in writable if "course-sandbox-" in p]
    devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
    # the devices' mounts stay as bound, in both sandboxes (grader/sandbox/bubblewrap.py)
    assert set(writable) - set(sockets) - devices == {str(work), "/tmp", "/dev/shm", "/proc"}
    assert len(sockets) == 1
    hosts = [Path("/"), Path(sys.prefix), Path(course.__file__).parent, work.parent, zygote.root]
    assert [p for p in hosts if (p / "written.txt").exists()] == []


def test_another_submission_and_the_zygote_are_hidden(zygote: Zygote) -> None:
    other = folder(zygote, "other")
    (other / "answers.txt").write_text("another student's work")
    look = (
        f"import os\nprint([p for p in ({str(other / 'answers.txt')!r}, {str(zygote.socket)!r})"
        " if os.path.exists(p)])"
    )
    assert run(zygote, folder(zygote, "looks"), [look])[0].strip() == "[]"


BESIDE = """
import ctypes, os, subprocess, time
open("here.txt", "w").write("a submission graded at the same time")
subprocess.Popen(["sleep", "1000.5"])
KEYS = ctypes.CDLL(None).syscall, KEYCTL[os.uname().machine]
planted = [KEYS[0](KEYS[1] - 2, b"user", b"beside", b"x", 1, ring) > 0 for ring in (-3, -4, -5)]
open("planted.txt", "w").write(str(planted))
end = time.monotonic() + 60
while not os.path.exists("looked.txt") and time.monotonic() < end:  # the other kernel looks
    time.sleep(0.05)
""".replace("KEYCTL", str(KEYCTL))

LOOK_BESIDE = """
import ctypes, json, os
print(json.dumps({
    "files": os.path.exists(OTHER),
    "processes": [p for p in os.listdir("/proc") if p.isdigit()
                  and b"1000.5" in open(f"/proc/{p}/cmdline", "rb").read()],
    "keyring": ctypes.CDLL(None).syscall(KEYCTL[os.uname().machine] - 1, b"user", b"beside",
                                         None, 0) > 0,
}))
""".replace("KEYCTL", str(KEYCTL))


def test_two_kernels_at_once_see_nothing_of_each_other(zygote: Zygote) -> None:
    """The workers of a run share its zygote: a kernel graded while another runs finds
    nothing of it (its folder, its processes, the keys it left in its keyrings)."""
    one, two = folder(zygote, "beside-one"), folder(zygote, "beside-two")
    first = threading.Thread(target=run, args=(zygote, one, [BESIDE]))
    first.start()
    try:
        deadline = time.monotonic() + 60
        while not (one / "planted.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        output = run(zygote, two, [f"OTHER = {str(one / 'here.txt')!r}", LOOK_BESIDE])[1]
    finally:
        (one / "looked.txt").write_text("done")
        first.join()
    assert (one / "planted.txt").read_text() == "[True, True, True]"  # it did leave them
    assert json.loads(last_line(output)) == {"files": False, "processes": [], "keyring": False}
    assert not marked("1000.5"), "the first kernel's process outlived it"


NETWORK = """
import socket
print(sorted(name for _, name in socket.if_nameindex()))
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2)
    print("connected")
except OSError as error:
    print(type(error).__name__)
"""


def test_no_network(zygote: Zygote) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        output = run(zygote, folder(zygote, "network"), [f"PORT = {port}", NETWORK])[1]
    interfaces, reached = output.strip().splitlines()
    assert interfaces == "['lo']" and reached != "connected", output


def test_no_capability_and_none_to_gain(zygote: Zygote) -> None:
    keys = ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")
    code = f"s = {STATUS}\nprint([s[k].strip() for k in {keys!r}])"
    output = run(zygote, folder(zygote, "caps"), [code])[0]
    assert eval(output) == ["0000000000000000"] * 4 + ["1"]  # noqa: S307


def marked(marker: str) -> list[psutil.Process]:
    """Processes of this machine whose command line holds ``marker``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or []):
            found.append(process)
    return found


RUNAWAY = """
import signal, subprocess, threading
subprocess.Popen(["sleep", "{marker}"])
threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""


async def _start_runaway(zygote: Zygote, work: Path, marker: str) -> WarmKernelManager:
    """A warm kernel whose cell ignores interrupts and has started a process and a thread."""
    manager = WarmKernelManager(zygote=str(zygote.socket), socket_root=str(work.parents[2]))
    await manager.start_kernel(cwd=str(work))
    client = manager.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    client.execute(RUNAWAY.format(marker=marker))
    for _ in range(200):
        if marked(marker):
            break
        await asyncio.sleep(0.05)
    client.stop_channels()
    return manager


def pythons(zygote: Zygote) -> list[psutil.Process]:
    """The zygote's Python process, below bubblewrap, and the children it forked."""
    below = psutil.Process(zygote.process.pid).children(recursive=True)
    return [p for p in below if p.name() == "python" and "-c" in p.cmdline()]


def gone(marker: str, seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while marked(marker) and time.monotonic() < end:
        time.sleep(0.1)
    return not marked(marker)


def test_stopping_the_kernel_at_the_deadline_ends_all_it_started(zygote: Zygote) -> None:
    async def scenario() -> bool:
        manager = await _start_runaway(zygote, folder(zygote, "runaway"), "1000.5")
        assert marked("1000.5"), "the kernel did not start its process"
        await manager.shutdown_kernel(now=True)  # what ExecuteKeepingPoints does
        return await manager.is_alive()

    assert run_coroutine(scenario()) is False
    assert gone("1000.5"), "a process of the stopped kernel still runs"


@pytest.mark.slow  # it waits out jupyter_client's own 5 s
def test_a_kernel_whose_end_is_told_late_is_left_to_the_zygote(zygote: Zygote, monkeypatch) -> None:
    """A kernel whose end the zygote does not tell in time (a fork bomb's namespace on a busy
    machine; here the zygote is stopped) counts as ended once killed: nbclient's clean-up then
    does not shut it down a second time through closed sockets (a ZMQError, "Operation not
    supported", that lost a submission's grading in CI), and the zygote, going on, ends it."""
    monkeypatch.setattr(warm_kernels, "KILL_SECONDS", 0.5)
    python = [p for p in pythons(zygote) if p.parent().name() != "python"]
    assert len(python) == 1, python  # the zygote, below bubblewrap

    async def scenario() -> bool:
        manager = await _start_runaway(zygote, folder(zygote, "late"), "1000.875")
        assert marked("1000.875"), "the kernel did not start its process"
        python[0].suspend()
        try:
            await manager.shutdown_kernel(now=True)  # what ExecuteKeepingPoints does
            return await manager.is_alive()  # nbclient's clean-up shuts it down if True
        finally:
            python[0].resume()

    assert run_coroutine(scenario()) is False
    assert gone("1000.875"), "the zygote did not end the kernel left to it"


def test_a_killed_nbgrader_takes_its_kernel_with_it(zygote: Zygote) -> None:
    """When the grader kills nbgrader at the submission's time limit, the connection to the
    zygote closes: the zygote kills the kernel's namespace."""

    async def scenario() -> None:
        manager = await _start_runaway(zygote, folder(zygote, "orphan"), "1000.75")
        assert marked("1000.75"), "the kernel did not start its process"
        manager.provisioner.process.client.close()  # as the end of a killed process does

    run_coroutine(scenario())
    assert gone("1000.75"), "the kernel outlived the nbgrader process that started it"


def test_a_kernel_that_fails_to_start_leaves_the_zygote_serving_alone(zygote: Zygote) -> None:
    """A kernel whose set-up fails (here: an environment that is not a mapping) is told as an
    error and ends; no forked child goes on serving the zygote's socket (it would answer later
    requests without capabilities), and the next kernel starts."""
    work = folder(zygote, "broken")
    broken = {"op": "start", "workdir": str(work), "sockets": str(work.parents[2])}
    broken |= {"connection_file": str(work / "k.json"), "argv0": sys.executable, "env": "x"}
    broken |= {"limits": {"memory_mb": 8192, "file_size_mb": 64, "processes": 512}}
    broken |= {"tmp_mb": 16, "readable": []}
    with connect(zygote.socket) as client:
        message = json.dumps(broken).encode() + b"\n"
        answer = request(client, message, [sys.stdout.fileno(), sys.stderr.fileno()])
    assert "error" in answer and "could not be set up" in answer["error"], answer
    time.sleep(0.5)  # the failed processes end
    left = pythons(zygote)
    assert len(left) == 1, f"besides the zygote, forked children still run: {left}"
    for name in ("after1", "after2", "after3"):
        assert run(zygote, folder(zygote, name), ["print(6 * 7)"]) == ["42\n"]


@pytest.mark.parametrize("manager_class", [SandboxedKernelManager, WarmKernelManager])
def test_each_kernel_runs_in_cgroups_of_its_own(
    zygote: Zygote, manager_class: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run by root, a kernel, cold or warm, is in a cgroup of its own in each hierarchy with the
    pids or cpu controller (grader/sandbox/cgroups.py), its processes capped; they go with it. (A
    warm kernel once made a second set, a cold kernel's, that it never joined.)"""
    assert os.geteuid() != 0 or set(cgroups.parents()) == {"pids", "cpu"}, cgroups.parents()
    made: list[list[str]] = []
    kernel_groups = cgroups.kernel_groups
    monkeypatch.setattr(
        cgroups, "kernel_groups", lambda n: made.append(kernel_groups(n)) or made[-1]
    )

    async def scenario() -> list[str]:
        warm = {"zygote": str(zygote.socket)} if manager_class is WarmKernelManager else {}
        work = folder(zygote, "cg-warm" if warm else "cg-cold")  # short: ZeroMQ's ipc paths
        manager = manager_class(socket_root=str(work.parents[2]), **warm)
        await manager.start_kernel(cwd=str(work))
        groups = list(manager._cgroups)
        try:
            assert len(groups) == len(set(cgroups.parents().values()))
            assert made == [groups], "cgroups made that the kernel is not in"
            for group in groups:  # (a cold kernel's launcher joins them as it starts)
                for _ in range(100):
                    if open(f"{group}/cgroup.procs").read().split():
                        break
                    await asyncio.sleep(0.05)
                assert open(f"{group}/cgroup.procs").read().split(), f"no process in {group}"
            assert [open(f"{g}/pids.max").read() for g in groups if "pids" in g] == ["512\n"]
        finally:
            await manager.shutdown_kernel(now=True)
        return groups

    groups = run_coroutine(scenario())
    assert not any(os.path.exists(g) for g in groups), "its cgroups outlived the kernel"


def test_a_cgroup_the_zygote_cannot_join_leaves_the_kernel_uncapped_and_said(
    zygote: Zygote, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    """Where the zygote cannot put a kernel in its cgroup (cgroup v2 may refuse it, say), the
    kernel starts without the cap (as a cold kernel's rlimits alone) and the log says so."""

    monkeypatch.setattr(warm.cgroups, "kernel_groups", lambda limit: ["/no/such/kernel-group"])
    assert run(zygote, folder(zygote, "uncapped"), ["print(6 * 7)"]) == ["42\n"]
    assert "warm kernel not in its cgroups" in capfd.readouterr().err


# -- through `course autograde` (warm): one worker, one submission after the other ------------


def leaves(marker: str) -> str:
    """The first submission: the reference mask, then everything it can leave behind, its
    process's command line marked by ``marker``: each test its own, since a test on another
    worker may have its own such process running."""
    return LEAVE.replace("print(before)", "").replace("1000.25", marker)


# The second: the reference mask only if nothing was left; a wrong one (points lost) otherwise.
LOOKS = f"""
import os, sys, threading
import torch, torch.nn.functional as F, course.mode
_left = [
    F.softmax(torch.zeros(2), dim=0).tolist() != [0.5, 0.5],
    course.mode.under_nbgrader() == "patched",
    "planted_module" in sys.modules,
    os.path.exists("/tmp/planted.txt") or os.path.exists("/dev/shm/planted.txt"),
    "PLANTED" in os.environ,
    any(t.name == "planted-thread" for t in threading.enumerate()),
    torch.initial_seed() == 1,
]
if any(_left):
    {WRONG_MASK.replace(chr(10), chr(10) + "    ")}
"""


@pytest.mark.slow
def test_a_graded_submission_finds_nothing_of_the_one_before(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """One worker grades "a_leaves" then "b_looks" warm: every score, flag and status as graded
    cold, and "b_looks" gets the reference's full marks (it found nothing left)."""
    root = make_course_copy(tmp_path_factory.mktemp("warm") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    edits = {"a_leaves": append_code(MASK, leaves("1000.625")), "b_looks": append_code(MASK, LOOKS)}
    for student, edit in edits.items():
        target = root / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(edit(nbformat.read(str(reference), as_version=4)), str(target))
    students = ["a_leaves", "b_looks", "reference"]
    pipeline.autograde(root, ASSIGNMENT, jobs=1, students=students, warm=True)
    warm = class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    pipeline.autograde(root, ASSIGNMENT, jobs=1, students=students, warm=False)
    cold = class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    assert warm == cold
    assert warm["b_looks"] == warm["reference"]
    assert warm["reference"][1:] == (False, "graded")
    assert not marked("1000.625"), "the first submission's process outlived its grading"


def test_the_forked_nbgrader_runs_with_the_given_folder_environment_and_limits(
    tmp_path: Path,
) -> None:
    """grader/warm/forkserver.py: a forked nbgrader gets the arguments, folder and environment asked
    for (nbgrader's --version, a config file in the folder that reads them) and the rlimits."""
    (tmp_path / "nbgrader_config.py").write_text(
        "import os, resource, nbformat.validator\n"
        "print('env', os.environ.get('WARM_PROBE'), 'cwd', os.getcwd(), 'fsize',"
        " resource.getrlimit(resource.RLIMIT_FSIZE)[0] // 2**20)\n"
        "print('compiled schemas', len(nbformat.validator.validators))\n"
    )
    server = ForkServer()
    try:
        arguments = ["list", f"--Exchange.root={tmp_path}"]  # an exchange it may write
        env = {"WARM_PROBE": "yes", "PATH": "/usr/bin"}
        run = server.spawn(arguments, tmp_path, env, [8192, 7, 512])
        log, _ = run.communicate(timeout=120)
    finally:
        server.close()
    assert f"env yes cwd {tmp_path} fsize 7" in log, log
    assert "compiled schemas 4" in log, "the server compiles the notebook schemas once"
    assert run.returncode == 0, log


def test_warm_workers_that_cannot_start_leave_grading_cold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zygote that dies at its start (here: its code raises) is said, with what it wrote,
    and the run grades with kernels started afresh; nothing of the pool is left."""
    from grader.coordinator import autograde
    from grader.warm import wire

    monkeypatch.setattr(wire, "zygote_source", lambda: "raise SystemExit('no zygote here')")
    tmp = Path(tempfile.gettempdir())
    before = {*tmp.glob("course-warm-*"), *tmp.glob("course-nbfork-*")}
    with autograde._pool(True, 2) as pool:
        assert pool is None
    said = capsys.readouterr().err
    assert "the warm worker did not start: no zygote here" in said
    assert "grading with kernels started afresh (--cold)" in said
    assert {*tmp.glob("course-warm-*"), *tmp.glob("course-nbfork-*")} == before


def test_closing_the_pool_stops_every_zygote_and_no_worker_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interrupted run closes the pool while submissions hold zygotes or are taking one: each
    zygote stops, and a thread that took one as the pool closed gives up at once, without one
    wait of the pool's polling (it once waited two minutes for a socket that the closing pool
    had removed). No clock is read: the pool's sleep fails the test if it is called."""
    from grader.shared.paths import CourseError

    pool = WarmPool(1, {})
    pool.ready()
    held = pool.worker()
    zygote = held.__enter__()  # a submission grading on the only zygote
    pool.close()
    assert not zygote.alive()

    def waits(seconds: float) -> None:
        raise AssertionError(f"a worker of the closed pool waited ({seconds} s)")

    clock = types.SimpleNamespace(monotonic=time.monotonic, sleep=waits)
    monkeypatch.setattr(warm, "time", clock)
    monkeypatch.setattr(pool.slots, "acquire", lambda *a, **k: waits(k.get("timeout", 0)))
    with pytest.raises(CourseError, match="stopped"):
        zygote.ready(stopped=lambda: pool._closed)  # taken just before the close
    with pytest.raises(CourseError, match="stopped"):
        with pool.worker():
            pass
    monkeypatch.undo()
    held.__exit__(None, None, None)


def test_a_zygote_that_died_is_replaced_and_the_run_goes_on(capfd) -> None:
    """The workers share the run's zygote: if it ends (killed from outside, say), the next
    submission starts a new one, says so, and its kernels work."""
    pool = WarmPool(2, {})
    try:
        with pool.worker() as first:
            first.process.kill()
            first.process.wait()
        with pool.worker() as second:
            assert second is not first and second.alive()
            work = second.root / "after" / "submitted" / "student" / "a"
            work.mkdir(parents=True)
            assert run(second, work, ["print(6 * 7)"])[0].strip() == "42"
    finally:
        pool.close()
    assert "warm worker ended" in capfd.readouterr().err
    assert not first.alive() and not second.alive()


@pytest.mark.slow
@pytest.mark.parametrize("kills", [1, 2])
def test_a_submission_whose_zygote_ended_is_graded_again(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, kills: int
) -> None:
    """The zygote killed from outside while a submission's kernel runs: its kernel died through
    no doing of its own, so the zygote's replacement grades it again, with every point. If that
    one is killed too, the submission is "not graded" and keeps the scores of its earlier
    grading; the next submission is graded either way."""
    from grader.coordinator import grading, nbgrader_run

    root = make_course_copy(tmp_path_factory.mktemp("ended") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    students = ["killed", "reference"]
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    submission = root / "submitted" / "killed" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    submission.parent.mkdir(parents=True)
    shutil.copy(reference, submission)
    pipeline.autograde(root, ASSIGNMENT, jobs=1, students=students, warm=True)
    before = class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    waits = "open('started.txt', 'w').write('x')\nimport time\ntime.sleep(5)"
    edited = append_code(MASK, waits)(nbformat.read(str(reference), as_version=4))
    nbformat.write(edited, str(submission))

    real, runs = nbgrader_run.run, []

    def run_and_kill(job, student, folder, *args):  # noqa: ANN001, ANN002, ANN202
        def kill() -> None:
            deadline = time.monotonic() + 60
            while not list(folder.rglob("started.txt")) and time.monotonic() < deadline:
                time.sleep(0.05)
            job.warm._zygotes[-1].process.kill()

        runs.append(student)
        if student == "killed" and runs.count(student) <= kills:
            threading.Thread(target=kill, daemon=True).start()
        return real(job, student, folder, *args)

    monkeypatch.setattr(grading.nbgrader_run, "run", run_and_kill)
    results = {
        g.student: g
        for g in pipeline.autograde(root, ASSIGNMENT, jobs=1, students=students, warm=True)
    }
    assert sorted(runs) == ["killed", "killed", "reference"]  # once more, not more
    assert results["reference"].ok
    after = class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    assert after["reference"] == before["reference"]
    if kills == 1:
        assert results["killed"].ok
        assert after["killed"] == before["reference"]  # every point, graded
    else:
        assert not results["killed"].ok and "warm worker ended twice" in results["killed"].message
        assert after["killed"][:2] == before["killed"][:2]  # the scores and flag of before
        assert after["killed"][2] == "not graded"
