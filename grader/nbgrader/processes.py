"""The processes a graded notebook's cells leave running are ended after each cell, so that every
cell starts with the whole process limit (``c.Limits.processes``, docs/limits.md).

Every process of a graded kernel counts against one limit, its threads included (the kernel's
cgroup, or the rlimit on processes): a cell that forks until ``fork`` fails leaves no process and no
thread for the cells after it. They then fail through no fault of their code: IPython stops its
history thread at each ``os.fork`` and starts it again in the next cell, which failed with "can't
start new thread", and a correct function lost its visible test.

So before the first cell of the notebook, :func:`watch` gives the kernel an IPython
``post_run_cell`` hook (:func:`hook_code`), which runs after every cell that the kernel runs,
graded or not, the observation's included, whether the cell passed, failed or was interrupted. The
processes of the kernel's own PID namespace when the hook is set are the kernel's (the kernel, its
sandbox's first process) and are kept; any other one there after a cell is the submission's: it
is killed (SIGKILL, again until none is left), and the kernel reaps those that are its children.
The kernel's threads and the grader's processes are not touched (the grader is not in the
namespace). The hook starts no thread and no Python fork; before killing, it asks once whether
the limit was reached, by ``posix_spawn`` of ``true`` (which fails there). It then says in the
cell what it ended (a line that starts with :data:`MARK`), which the grader reads back
(:func:`read_line`) for the report's line (:func:`note`).

The hook runs inside the student's kernel: a submission that removes it or breaks what it calls
keeps its own processes, and costs only its own later cells (its kernel's cgroup or rlimit still
caps it). Every path that grades runs the hook: ExecuteKeepingPoints calls :func:`watch` in each
kernel it starts, warm or cold, under `course autograde` or plain nbgrader.
"""

from __future__ import annotations

import re

from nbclient import NotebookClient

from grader.nbgrader.kernels import SandboxedKernelManager

MARK = "[the grader ended "
# A sandboxed kernel is one of the first processes of a PID namespace of its own (its pid is 2 or 3;
# tests/test_kernel_sandbox.py): elsewhere (no sandbox) the hook is not set, as every process of the
# machine would be a stranger to it.
FIRST_PIDS = 50

# Run in the kernel, in a namespace of its own (the student's gets no name); what it calls is bound
# once, here, so that a cell replacing os.kill later does not change the hook.
TEMPLATE = '''exec(compile(r"""
import os, resource, signal, sys, time
from IPython import get_ipython

def _hook(kill=os.kill, listdir=os.listdir, waitpid=os.waitpid, spawn=os.posix_spawn,
          write=sys.stderr.write, getpid=os.getpid, monotonic=time.monotonic,
          sleep=time.sleep, open=open, WNOHANG=os.WNOHANG, SIGKILL=signal.SIGKILL, MARK=MARK):
    kept = {int(p) for p in listdir("/proc") if p.isdigit()}
    limit = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    true = next((p for p in ("/usr/bin/true", "/bin/true") if os.path.exists(p)), "")

    def alive():
        found = []
        for name in listdir("/proc"):
            if name.isdigit() and int(name) not in kept:
                try:
                    with open(f"/proc/{name}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                if fields[0] != b"Z":
                    found.append(int(name))
                elif int(fields[1]) == getpid():
                    reap([int(name)])
        return found

    def reap(pids):
        for pid in pids:
            try:
                waitpid(pid, WNOHANG)
            except OSError:
                pass

    def reached():
        if not true:
            return False
        try:
            pid = spawn(true, [true], {})
        except OSError:
            return True
        try:
            waitpid(pid, 0)
        except OSError:
            pass
        return False

    def end_processes(result=None):
        try:
            left = alive()
            if not left:
                return
            full = reached()
            ended, end = set(), monotonic() + 5.0
            while left and monotonic() < end:
                for pid in left:
                    try:
                        kill(pid, SIGKILL)
                        ended.add(pid)
                    except OSError:
                        pass
                sleep(0.005)
                left = alive()
            at = f", which had reached the limit of {limit} processes and threads" if full else ""
            write(f"{MARK}{len(ended)} processes that this cell left running{at}]\\n")
        except BaseException:
            pass

    return end_processes

if os.getpid() < FIRST_PIDS:
    get_ipython().events.register("post_run_cell", _hook())
""", "<the grader's hook: the processes a cell leaves running are ended>", "exec"),
{"MARK": __MARK__, "FIRST_PIDS": __FIRST_PIDS__})
'''


def hook_code() -> str:
    """The code that sets the hook in a kernel (:data:`TEMPLATE`, with :data:`MARK` and
    :data:`FIRST_PIDS`)."""
    return TEMPLATE.replace("__MARK__", repr(MARK)).replace("__FIRST_PIDS__", str(FIRST_PIDS))


LINE = re.compile(
    re.escape(MARK) + r"(\d+) processes that this cell left running"
    r"(?:, which had reached the limit of (\d+) processes and threads)?\]"
)


def watch(client: NotebookClient) -> None:
    """Give ``client``'s kernel the hook that ends, after each cell, the processes the cell left
    running (the module's text), if the kernel is sandboxed (in a PID namespace of its own); a
    kernel that refuses it is graded without it (logged)."""
    if not isinstance(client.km, SandboxedKernelManager):  # --unsafe-no-sandbox
        return
    reply = client.wait_for_reply(client.kc.execute(hook_code(), silent=True, store_history=False))
    content = (reply or {}).get("content", {})
    if content.get("status") != "ok":
        client.log.warning(
            "the kernel did not take the hook that ends the processes a cell leaves: %s",
            content.get("evalue") or content.get("ename") or "no answer",
        )


def read_line(text: str) -> tuple[int, int] | None:
    """(processes ended, the limit they had reached or 0) from the hook's line in ``text``; None
    when ``text`` holds none."""
    found = LINE.search(text) if MARK in text else None
    if not found:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


def note(cell: str, ended: int, limit: int) -> str:
    """The report's words for cell ``cell``, whose processes the hook ended."""
    if limit:
        return (
            f"cell {cell} reached the limit of {limit} processes and threads: the grader ended "
            f"the {ended} processes it left running, so that the next cells could run"
        )
    return f"cell {cell} left {ended} processes running: the grader ended them after it"
