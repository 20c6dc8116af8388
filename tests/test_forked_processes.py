"""A submission's own processes never cost a later cell: the processes a cell leaves running are
ended after it (grader/nbgrader/processes.py), on every path that grades.

The forker's ``count_embedding`` is correct, and its solution cell then forks ``sleep`` children
until ``fork`` fails at the process limit. Each ``os.fork`` stops IPython's history thread, which
the next cell starts again: with no process left to give, that cell failed with "can't start new
thread" and a correct function lost its visible test. Graded beside the reference (its neighbour, at
the same time where the path grades two at once), the forker must get every point the reference
gets, its report line must say that the cell reached the limit, and no sleeper may be left.

The class's process limit is lowered (``c.Limits.processes``) so that the sleepers are forked in a
few seconds on a busy machine (each fork of a kernel that imported PyTorch copies its page tables);
the rule is the same at the configured 512.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import psutil
import pytest

from grader.coordinator import demo, pipeline
from grader.coordinator.submission import solution_cells
from grader.nbgrader import processes
from grader.nbgrader.kernels import IsolatedKernelManager
from grader.shared import report
from tests.conftest import make_course_copy
from tests.test_plain_nbgrader import nbgrader

ASSIGNMENT, NOTEBOOK = "c_params", "counting_parameters"
LIMIT = 64  # processes and threads of one kernel (c.Limits.processes)
SLEEP = "3601.5"  # the sleepers' argument: no other process on the machine has it
FORKS = f"""

import os
_started = 0
for _ in range(1500):
    try:
        _pid = os.fork()
    except OSError:
        break
    if _pid == 0:
        os.execvp("sleep", ["sleep", "{SLEEP}"])
    _started += 1
print("started", _started)
"""


def sleepers() -> list[int]:
    """The forker's sleepers still running anywhere on the machine."""
    found = []
    for process in psutil.process_iter(["cmdline", "pid"]):
        if (process.info["cmdline"] or [])[-1:] == [SLEEP]:
            found.append(process.info["pid"])
    return found


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """C released, the reference and the forker submitted, under a process limit of LIMIT."""
    root = make_course_copy(tmp_path_factory.mktemp("forks") / "course")
    with (root / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.Limits.processes = {LIMIT}\n")
    pipeline.release(root, ASSIGNMENT)
    # Without C's reference run, the configured ceilings are the time limits (120 s a cell): a cold
    # kernel's first import of matplotlib builds its font cache, a minute on a busy machine.
    runs = json.loads((root / "reference_runs.json").read_text())
    del runs[ASSIGNMENT]
    (root / "reference_runs.json").write_text(json.dumps(runs))
    demo.build_class(root, ASSIGNMENT)
    for folder in (root / "submitted").iterdir():
        if folder.name != "reference":
            shutil.rmtree(folder)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    nb = nbformat.read(str(reference), as_version=4)
    solution_cells(nb)["count_embedding"].source += FORKS
    target = root / "submitted" / "forker" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(nb, str(target))
    return root


@pytest.fixture(scope="module", params=["warm", "cold", "plain"])
def graded(request: pytest.FixtureRequest, course: Path, tmp_path_factory) -> dict[str, dict]:
    """The class graded on one path: `course autograde` (warm workers, --cold), two at once, or
    plain `nbgrader autograde`; the report's line of each student."""
    root = tmp_path_factory.mktemp(request.param) / "course"
    shutil.copytree(course, root)
    if request.param == "plain":
        done = nbgrader(root, "autograde", ASSIGNMENT, "--force")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    else:
        students = ["forker", "reference"]
        warm = request.param == "warm"
        pipeline.autograde(root, ASSIGNMENT, jobs=2, students=students, warm=warm)
    rows = {row["student"]: row for row in report.read(root)}
    rows["forker"]["printed"] = started(root)
    return rows


def started(root: Path) -> str:
    """What the forker's solution cell printed (how many sleepers it started)."""
    graded_nb = root / "autograded" / "forker" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    nb = nbformat.read(str(graded_nb), as_version=4)
    cell = solution_cells(nb)["count_embedding"]
    return "".join(o.get("text", "") for o in cell.outputs)


@pytest.mark.slow
def test_the_forker_keeps_every_point_its_functions_earn(graded: dict[str, dict]) -> None:
    forker, reference = graded["forker"], graded["reference"]
    assert "started" in forker["printed"], forker["printed"]
    assert reference["status"] == "graded" and reference["points"] == "14", reference
    assert forker["points"] == reference["points"], forker


@pytest.mark.slow
def test_the_report_says_the_cell_reached_the_limit(graded: dict[str, dict]) -> None:
    detail = graded["forker"]["detail"]
    assert "embedding_solution" in detail and f"limit of {LIMIT}" in detail, detail
    assert graded["reference"]["detail"] == "", graded["reference"]


@pytest.mark.slow
def test_no_sleeper_is_left(graded: dict[str, dict]) -> None:
    assert sleepers() == []


def test_the_hooks_line_is_read_back_for_the_report() -> None:
    """What the kernel's hook writes in a cell, found among the cell's other output, and the
    report's words made from it (at the limit, and below it)."""
    line = f"{processes.MARK}499 processes that this cell left running, which had reached the "
    line += "limit of 512 processes and threads]\n"
    assert processes.read_line(f"started 499\n{line}") == (499, 512)
    below = f"{processes.MARK}3 processes that this cell left running]\n"
    assert processes.read_line(below) == (3, 0)
    assert processes.read_line("started 3\n") is None
    assert "reached the limit of 512" in processes.note("embedding_solution", 499, 512)
    assert "limit" not in processes.note("embedding_solution", 3, 0)


def test_an_unsandboxed_kernel_gets_no_hook() -> None:
    """Outside a PID namespace of its own, every process of the machine would be a stranger to the
    hook: the grader does not set it (--unsafe-no-sandbox), nor does the kernel (its pid is not one
    of a fresh namespace's first)."""

    class Client:
        km = IsolatedKernelManager()
        kc = None  # an attempt to set the hook would fail on it

    processes.watch(Client())  # type: ignore[arg-type]
    registered: list[str] = []

    class Events:
        def register(self, event: str, function: object) -> None:
            registered.append(event)

    shell = type("Shell", (), {"events": Events()})()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("IPython.get_ipython", lambda: shell)
        exec(processes.hook_code(), {})  # here, pid > FIRST_PIDS: registers nothing (runs nothing)
        assert registered == []
        patch.setattr(processes, "FIRST_PIDS", 2**22 + 1)  # above any pid: the hook is set
        exec(processes.hook_code(), {})
    assert registered == ["post_run_cell"]
