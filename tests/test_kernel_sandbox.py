"""The grading kernel's sandbox (bubblewrap): what code in a graded notebook can and cannot do.

One notebook, run once by nbclient through :class:`grader.nbgrader.kernels.SandboxedKernelManager`,
probes the sandbox from inside; each test reads one probe's output.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient
from traitlets.config import Config

from grader.nbgrader.kernels import SandboxedKernelManager
from grader.nbgrader.warm_kernels import WarmKernelManager
from grader.sandbox import bubblewrap as sandbox
from grader.sandbox import cgroups
from grader.sandbox.policy import POLICY
from grader.shared.limits import Limits
from grader.shared.paths import CourseError
from grader.warm.pool import WarmPool

# keyctl's system call number by machine (add_key and request_key are the two before it)
KEYCTL = {"x86_64": 250, "aarch64": 219}
PROBES = {
    # What the kernel sees: each mount it can reach (read-only or not, its type), its namespaces,
    # limits, capabilities; the same for a cold and a warm kernel (grader/sandbox/policy.py).
    "view": (
        "import json, os, resource, sys\nmounts = {}\nfor line in open('/proc/self/mountinfo'):\n"
        "    fields = line.split()\n    path = fields[4].replace('\\\\040', ' ')\n"
        "    major, minor = map(int, fields[2].split(':'))\n"
        "    if os.path.exists(path) and os.stat(path).st_dev == os.makedev(major, minor):\n"
        "        ro = bool(os.statvfs(path).f_flag & os.ST_RDONLY)\n"
        "        mounts[path] = ['ro' if ro else 'rw', fields[fields.index('-') + 1]]\n"
        "names = sorted(os.listdir('/proc/self/ns'))\n"
        "ns = {n: os.readlink('/proc/self/ns/' + n) for n in names}\n"
        "limits = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n))\n"
        "    for n in ('AS', 'FSIZE', 'NPROC', 'CORE')}\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
        "caps = {k: status[k].strip() for k in ('CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs')}\n"
        "sockets = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
        "print(json.dumps({'mounts': mounts, 'ns': ns, 'limits': limits, 'caps': caps,\n"
        "    'cwd': os.getcwd(), 'sockets': sockets, 'host': os.uname().nodename}))"
    ),
    "secret": "print(open(SECRET).read())",
    "write_here": "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())",
    "host_tmp": "import os; print(sorted(os.listdir('/tmp')))",
    "fill_tmp": "open('/tmp/big', 'wb').write(b'x' * (300 * 2**20))",
    "processes": "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
    "network": (
        "import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', PORT))\n"
        "print('connected')"
    ),
    "environment": "import os, json; print(json.dumps(dict(os.environ)))",
    "capabilities": (
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])"
    ),
    "system": "import torch, course.testcells; print(torch.__version__)",
    "backend": "import matplotlib; print(matplotlib.get_backend())",
    "figure_not_shown": "import matplotlib.pyplot as plt\nplt.plot([1, 2]);",
    "figure_shown": "plt.figure()\nplt.plot([2, 1])\nplt.show()",
    "offline_data": "import os, course.data.corpora; print(os.environ['HF_DATASETS_OFFLINE'])",
    "grader": "import grader",
    "endless": "import time\ntime.sleep(120)",
    "after": "print('the next cell runs')",
    # The host's settings under /proc (a kernel run by root could otherwise write them).
    "host_settings": (
        "import os\nwritable = [p for p in ('/proc/sys/kernel/printk_ratelimit',\n"
        "    '/proc/sys/vm/drop_caches', '/proc/sysrq-trigger') if os.access(p, os.W_OK)]\n"
        "try:\n    path = '/proc/sys/kernel/printk_ratelimit'\n"
        "    open(path, 'w').write(open(path).read())\n    writable.append('written')\n"
        "except OSError:\n    pass\nprint(writable)"
    ),
    # Processes: at most the limit (64 here), root or not (a fork bomb stops there).
    "fork_many": (
        "import os, signal, time\nchildren = []\ntry:\n    while len(children) < 200:\n"
        "        pid = os.fork()\n        if pid == 0:\n            time.sleep(60)\n"
        "            os._exit(0)\n        children.append(pid)\nexcept OSError:\n    pass\n"
        "for pid in children:\n    os.kill(pid, signal.SIGKILL)\n    os.waitpid(pid, 0)\n"
        "print('started', len(children))"
    ),
    # The cgroups that cap them (grader/sandbox/cgroups.py), out of the kernel's sight.
    "cgroups": (
        "import glob, os, sys\nconnection = sys.argv[sys.argv.index('-f') + 1]\n"
        "worker = os.path.dirname(os.path.dirname(connection))\n"
        "print(glob.glob('/sys/fs/cgroup/*') + glob.glob(os.path.join(worker, 'cgroups', '*')))"
    ),
    # The grader's session keyring (a login session has one): a place to leave a key.
    "grader_keyring": (
        f"import ctypes, os\nnumber = {KEYCTL}[os.uname().machine] - 1  # request_key\n"
        "print(ctypes.CDLL(None).syscall(number, b'user', b'grader-key', None, 0) > 0)"
    ),
}


def grader_key() -> None:
    """Give this process a session keyring of its own, holding a key, as a login session's
    would: the kernels it starts (and a zygote it starts) must not reach it."""
    libc = ctypes.CDLL(None, use_errno=True)
    number = KEYCTL[os.uname().machine]
    assert libc.syscall(number, 1, None) > 0, "no session keyring joined"
    added = libc.syscall(number - 2, b"user", b"grader-key", b"secret", 6, -3)  # the session's
    assert added > 0 and libc.syscall(number - 1, b"user", b"grader-key", None, 0) == added


@pytest.fixture(scope="module", params=["cold", "warm"])
def probed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[dict]]]:
    """The probes' outputs, from a kernel started in bubblewrap ("cold") and from one forked by a
    warm worker's zygote ("warm", grader/warm/pool.py): the same sandbox either way."""
    grader_key()
    if request.param == "cold":
        yield probe(tmp_path_factory, tmp_path_factory.mktemp("work"), SandboxedKernelManager, {})
        return
    pool = WarmPool(1, {})
    try:
        with pool.worker() as zygote:
            zygote.settle()  # what it imports while idle: imported before the probes
            config = {"zygote": str(zygote.socket), "socket_root": str(zygote.root)}
            yield probe(tmp_path_factory, zygote.root, WarmKernelManager, config)
    finally:
        pool.close()


# A file of the host's /tmp the kernel must not see; this process's own name (two runs at once).
HOST_FILE = f"host-file-for-sandbox-test-{os.getpid()}"


def probe(
    tmp_path_factory: pytest.TempPathFactory,
    parent: Path,
    manager: type[SandboxedKernelManager],
    config: dict[str, str],
) -> dict[str, list[dict]]:
    """Run the probes in a kernel of ``manager`` (configured by ``config``), in a submission
    folder under ``parent``."""
    course_root = tmp_path_factory.mktemp("course")
    secret = course_root / "gradebook.db"
    secret.write_text("hidden tests live here")
    (Path("/tmp") / HOST_FILE).write_text("host")
    work = parent / "submitted" / "student" / "a"
    work.mkdir(parents=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    nb = nbformat.v4.new_notebook()
    setup = f"SECRET = {str(secret)!r}\nPORT = {listener.getsockname()[1]}"
    nb.cells = [nbformat.v4.new_code_cell(setup)]
    nb.cells += [
        nbformat.v4.new_code_cell(code, metadata={"probe": k}) for k, code in PROBES.items()
    ]
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # other tests' servers
    os.environ["COURSE_DB"] = "postgresql://user:password@server/gradebook"
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        client = NotebookClient(
            nb,
            kernel_manager_class=manager,  # as nbgrader's Execute does
            config=Config({manager.__name__: config, "Limits": {"processes": 64}}),
            # 8 s a cell (torch's import on a busy machine), 2 s for the endless one: it is
            # interrupted either way, and the next cell must still run.
            timeout_func=lambda cell: 2 if cell.metadata.get("probe") == "endless" else 8,
            allow_errors=True,
            interrupt_on_timeout=True,
            resources={"metadata": {"path": str(work)}},
        )
        client.execute()
    finally:
        listener.close()
        del os.environ["COURSE_DB"], os.environ["NBGRADER_EXECUTION"]
        (Path("/tmp") / HOST_FILE).unlink()
    assert (work / "mine.txt").read_text() == "ok"
    ours = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    _, alive = psutil.wait_procs(ours, timeout=10)
    assert not alive, f"processes left after the kernel stopped: {alive}"
    return {c.metadata["probe"]: c.outputs for c in nb.cells if "probe" in c.metadata}


# IPython's word, in whichever cell runs then, that the kernel's /tmp (which a probe fills) took
# no history: not the probe's output.
HISTORY_FULL = re.compile(
    r"The history saving thread hit an unexpected error \(.*?\)\."
    r"History will not be written to the database\.\n?"
)


def text(outputs: list[dict]) -> str:
    return HISTORY_FULL.sub("", "".join(o.get("text", "") for o in outputs))


def error(outputs: list[dict]) -> str:
    return "".join(o.get("ename", "") for o in outputs if o.output_type == "error")


def test_files_outside_are_not_visible(probed) -> None:
    assert error(probed["secret"]) == "FileNotFoundError"


def test_the_submission_folder_is_writable(probed) -> None:
    assert text(probed["write_here"]).strip() == "ok"


def test_tmp_is_private(probed) -> None:
    assert HOST_FILE not in text(probed["host_tmp"])


def test_private_tmp_cannot_fill_memory(probed) -> None:
    """/tmp is a tmpfs (memory): it is capped (256 MB), a larger file fails."""
    assert error(probed["fill_tmp"]) == "OSError"


def test_no_other_process_is_visible(probed) -> None:
    # IPython's history thread may say beside it that /tmp is full (the fill_tmp probe)
    lists = re.findall(r"\[[0-9, ]+\]", text(probed["processes"]))
    assert lists, probed["processes"]
    pids = json.loads(lists[-1])
    assert max(pids) < 50 and len(pids) < 10, pids  # the sandbox's own few processes


def test_no_network(probed) -> None:
    assert error(probed["network"]) in {"ConnectionRefusedError", "OSError", "TimeoutError"}
    assert "connected" not in text(probed["network"])


def test_environment_is_cleared(probed) -> None:
    env = json.loads(text(probed["environment"]))
    assert "COURSE_DB" not in env and "JPY_PARENT_PID" not in env
    assert env["NBGRADER_EXECUTION"] == "autograde"  # allowed: grading mode
    assert "password" not in json.dumps(env)


def test_no_capability(probed) -> None:
    assert int(text(probed["capabilities"]), 16) == 0


def test_torch_and_the_notebook_side_work_the_grader_is_absent(probed) -> None:
    assert text(probed["system"]).startswith("2.")
    assert error(probed["grader"]) == "ModuleNotFoundError"


def test_the_hosts_settings_are_read_only(probed) -> None:
    """/proc/sys and /proc/sysrq-trigger are covered read-only in the kernel's own /proc too
    (a kernel, cold or warm, once wrote a setting of the host when the grader ran as root)."""
    assert text(probed["host_settings"]).strip() == "[]", probed["host_settings"]


def test_a_kernel_starts_no_more_processes_than_the_limit(probed) -> None:
    """Run by root (CI), whom Linux's per-user limit spares, the kernel's cgroup stops it."""
    found = re.search(r"started (\d+)", text(probed["fork_many"]))
    assert found, probed["fork_many"]
    started = int(found.group(1))
    where = (
        "no cgroup hierarchy with the pids controller is writable here"
        if "pids" not in cgroups.parents()
        else ""
    )
    assert 10 < started < 64, f"{started} processes started; {where}"


def test_the_cgroups_are_out_of_sight(probed) -> None:
    assert text(probed["cgroups"]).strip() == "[]", probed["cgroups"]


def test_the_graders_session_keyring_is_out_of_reach(probed) -> None:
    """A kernel has a session keyring of its own: a key the grader's session holds (so one
    that another kernel could have left there) is not found."""
    assert text(probed["grader_keyring"]).strip() == "False", probed["grader_keyring"]


def test_a_cell_timeout_interrupts_and_the_next_cell_runs(probed) -> None:
    assert error(probed["endless"]) == "KeyboardInterrupt"
    assert "the next cell runs" in text(probed["after"])


def test_grading_refuses_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(CourseError, match="--unsafe-no-sandbox"):
        sandbox.check_sandbox()


def test_bubblewrap_works_here(tmp_path: Path) -> None:
    """The check grading starts with passes on this machine, and a process started the way a
    kernel is runs alone in its PID namespace and sees nothing of the course but ``course/``."""
    try:
        sandbox.check_sandbox()
    except CourseError as error:
        pytest.fail(f"grading would refuse to start here: {error}")
    workdir, sockets = tmp_path / "work", tmp_path / "sockets"
    workdir.mkdir()
    sockets.mkdir()
    source = Path(__file__).resolve().parents[1] / "source"
    look = f"import os; print(os.getpid(), os.path.exists({str(source)!r}))"
    command = sandbox.sandbox_command(
        [sys.executable, "-c", look], str(workdir), str(sockets), [], []
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pid, sees_source = done.stdout.split()
    assert int(pid) <= 2, f"pid {pid}: not in a PID namespace of its own"
    assert source.is_dir() and sees_source == "False", "the sandbox shows source/"


def test_figures_reach_the_notebook_shown_or_not(probed) -> None:
    """A warm kernel's matplotlib is a fresh kernel's: the inline backend, and a figure the
    cell leaves behind is displayed as one passed to plt.show() is (a zygote that imported the
    inline backend before any kernel existed lost the first kind, and its default backend both)."""
    assert text(probed["backend"]).strip() == "module://matplotlib_inline.backend_inline"
    for name in ("figure_not_shown", "figure_shown"):
        images = [o for o in probed[name] if "image/png" in o.get("data", {})]
        assert len(images) == 1, (name, probed[name])


def test_what_an_import_sets_in_the_environment_is_set(probed) -> None:
    """course.data sets HF_DATASETS_OFFLINE=1 when imported; imported by the zygote, it is set
    in every warm kernel as in a kernel that imported it itself."""
    assert text(probed["offline_data"]).strip() == "1"


VIEWS: dict[str, dict] = {}  # each sandbox's view, by kind ("cold", "warm")


def view(probed: dict[str, list[dict]]) -> dict:
    """The view probe's output, its two folders of this run named WORK and SOCKETS."""
    seen = json.loads(text(probed["view"]))
    named = {seen.pop("cwd"): "WORK", seen.pop("sockets"): "SOCKETS"}
    seen["mounts"] = {named.get(path, path): kind for path, kind in seen["mounts"].items()}
    return seen


def test_cold_and_warm_kernels_see_what_the_policy_says(
    probed: dict[str, list[dict]], request: pytest.FixtureRequest
) -> None:
    """bubblewrap's sandbox and the warm zygote's, both built from grader/sandbox/policy.py, give
    a kernel the same view: the same mounts (each read-only but the policy's writable ones), the
    policy's namespaces (none of them the grader's), the same limits and no capability."""
    seen = view(probed)
    writable = {path for path, (mode, _) in seen["mounts"].items() if mode == "rw"}
    devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
    expected = {*POLICY.private_tmpfs, POLICY.proc, "WORK", "SOCKETS"}
    assert writable - devices == expected, seen["mounts"]
    assert seen["mounts"]["/proc"] == ["rw", "proc"]
    assert all(seen["mounts"][p][0] == "ro" for p in POLICY.host_read_only if p in seen["mounts"])
    ours = {n: os.readlink(f"/proc/self/ns/{n}") for n in os.listdir("/proc/self/ns")}
    names = {"mount": "mnt"}
    shared = [n for n in POLICY.namespaces if seen["ns"][names.get(n, n)] == ours[names.get(n, n)]]
    assert not shared, f"the kernel shares the grader's namespaces {shared}"
    mb = 2**20
    limits = Limits(config=Config({"Limits": {"processes": 64}}))
    assert seen["limits"] == {
        "AS": [limits.memory_mb * mb] * 2,
        "FSIZE": [limits.file_size_mb * mb] * 2,
        "NPROC": [64, 64],
        "CORE": [0, 0],
    }
    assert seen["caps"] == {"CapEff": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16} | {
        "NoNewPrivs": seen["caps"]["NoNewPrivs"]
    }
    VIEWS[request.node.callspec.params["probed"]] = seen
    if len(VIEWS) == 2:  # both kinds ran (in this module's order: cold, then warm)
        cold, warm = VIEWS["cold"], VIEWS["warm"]
        assert cold["mounts"] == warm["mounts"], {
            "cold only": cold["mounts"].items() - warm["mounts"].items(),
            "warm only": warm["mounts"].items() - cold["mounts"].items(),
        }
        assert (cold["limits"], cold["caps"], cold["host"]) == (
            warm["limits"],
            warm["caps"],
            warm["host"],
        )
