"""An adversarial class: broken, runaway and tampering submissions beside honest students.

The class is graded once (assignment A, 2 jobs, a cell limit of 12 s). Every submission
ends with a clear line in the grading report; honest students get exactly their usual scores;
no tampering submission earns a point; the gradebook survives an interrupted run.

The hostile kinds hide their code from the static scan (``exec`` of a hex string), so what stops
them is the sandbox (:mod:`grader.nbgrader.kernels`) and the trusted judge
(:mod:`grader.shared.verification`): each writes what it reached into ``reached.txt`` in its own
folder, and the tests read it back.
"""

from __future__ import annotations

import copy
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from nbformat import NotebookNode
from nbgrader.api import Gradebook, MissingEntry

from grader.coordinator import autograde, cluster, demo, pipeline
from grader.coordinator.grading import Graded
from grader.coordinator.submission import fill, solution_cells
from grader.shared import limits, quota, report
from tests.conftest import make_course_copy
from tests.graded_class_record import recorded

ASSIGNMENT = "a_masks"
NOTEBOOK = "masks_and_positions"
MASK = "generate_square_subsequent_mask"
WRONG_MASK = f"def {MASK}(sz):\n    return torch.zeros(sz, sz)\n"
MB = 2**20


def set_code(name: str, code: str) -> Callable[[NotebookNode], NotebookNode]:
    """Replace the solution cell that defines ``name`` by ``code``
    (grader.coordinator.submission.fill)."""

    def edit(nb: NotebookNode) -> NotebookNode:
        assert fill(nb, {name: code}) == [], f"no solution cell defines {name}"
        return nb

    return edit


def append_code(name: str, code: str) -> Callable[[NotebookNode], NotebookNode]:
    """Add ``code`` after the reference solution of the cell that defines ``name``."""

    def edit(nb: NotebookNode) -> NotebookNode:
        cell = solution_cells(nb)[name]
        cell.source = f"{cell.source}\n\n{code}"
        return nb

    return edit


def on_cell(grade_id: str, action: str) -> Callable[[NotebookNode], NotebookNode]:
    """Delete, duplicate or re-type (code -> markdown) the cell with ``grade_id``."""

    def edit(nb: NotebookNode) -> NotebookNode:
        index = next(
            i
            for i, c in enumerate(nb.cells)
            if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
        )
        if action == "delete":
            del nb.cells[index]
        elif action == "duplicate":
            twin = copy.deepcopy(nb.cells[index])
            twin["id"] = "duplicate-cell"
            nb.cells.insert(index, twin)
        elif action == "retype":
            old = nb.cells[index]
            new = nbformat.v4.new_markdown_cell(old.source, metadata=old.metadata)
            new["id"] = old["id"]
            nb.cells[index] = new
        return nb

    return edit


def hidden(code: str) -> str:
    """``code`` run through ``exec`` of a hex string: no static read of the cell sees it."""
    return f"exec(bytes.fromhex('{code.encode().hex()}').decode())\n\n"


# Hostile payloads (each then defines the wrong mask, so that a point gained would show).
REACH_GRADEBOOK = """
import glob, os
reached, folder = [], os.getcwd()
while folder != '/':
    folder = os.path.dirname(folder)
    reached += glob.glob(folder + '/gradebook.db') + glob.glob(folder + '/source/*/*.ipynb')
    reached += glob.glob(folder + '/submitted/*/*/*.ipynb')
reached += glob.glob('/tmp/*/gradebook.db') + glob.glob('/tmp/*/*/*/gradebook.db')
open('reached.txt', 'w').write('\\n'.join(reached))
"""
WALK_PROC = """
import os
reached = []
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            line = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()
            reached.append(f'{pid} {line} cwd={os.readlink(f"/proc/{pid}/cwd")}')
        except OSError:
            pass
reached = [r for r in reached if 'nbgrader_main autograde' in r or 'pytest' in r]
open('reached.txt', 'w').write('\\n'.join(reached))
"""
PATCH_USER_NS = """
ip = get_ipython()
ip.user_ns['check_close'] = lambda *args, **kwargs: None
ip.user_ns['check'] = lambda *args, **kwargs: None
ip.user_ns['checks'].diagnose_causal_mask_result = lambda mask, size: mask
"""
PATCH_EVERYTHING = """
import builtins, sys, torch, course.testcells, course.guard, course.verify
for module in [m for m in list(sys.modules.values()) if m and m.__name__.startswith('course')]:
    for name in dir(module):
        if name.startswith(('check', 'diagnose', 'fail', 'guard', 'same', 'name_the')):
            setattr(module, name, lambda *args, **kwargs: args[0] if args else None)
course.guard.replaced = lambda snapshot: []
course.verify.observe = lambda *args, **kwargs: None
torch.allclose = torch.equal = lambda *args, **kwargs: True
get_ipython().user_ns.update(check=lambda *a, **k: None, check_close=lambda *a, **k: None)
"""
WRITE_VENV = """
import os, sys, course
reached = []
for folder in [*sys.path, os.path.dirname(course.__file__)]:
    for name in ('zz_course_attack.pth', 'sitecustomize.py'):
        try:
            with open(os.path.join(folder or '.', name), 'a') as handle:
                handle.write('import os\\n')
            reached.append(os.path.abspath(os.path.join(folder or '.', name)))
        except OSError:
            pass
reached = [r for r in reached if not r.startswith(os.getcwd())]
open('reached.txt', 'w').write('\\n'.join(reached))
"""
KILL_GRADER = """
import os, signal
reached = []
for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
            reached.append(str(pid))
        except OSError:
            pass
open('reached.txt', 'w').write('\\n'.join(reached))
"""
OUTLIVE = """
import subprocess, sys
subprocess.Popen(['sleep', '4242'], start_new_session=True)
daemon = 'import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(4243)'
subprocess.Popen([sys.executable, '-c', daemon], start_new_session=True)
"""
EXIT_BEFORE_CHECK = "import os\nos._exit(0)\n"
# Issue 30: a class that kills its kernel when called (in the notebook's test and again in the
# trusted check), a loop that ignores SIGINT inside a graded function, and a notebook that
# fills its folder (3 files of 15 MB against the class's quota of 20 MB, COURSE_DISK_MB).
EXITS_WHEN_CALLED = """
import os

class PositionalEncoding(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        os._exit(3)
"""
EXITS_WHEN_OBSERVED = """
import os, sys

class PositionalEncoding(PositionalEncoding):
    def __init__(self, *args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.endswith("verify.py"):
                os._exit(3)
            frame = frame.f_back
        super().__init__(*args, **kwargs)
"""
RUNAWAY_WHEN_CALLED = """
import signal

class PositionalEncoding(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            pass
"""
FILLS_DISK = f"""
for i in range(3):
    with open(f"big{{i}}.bin", "wb") as handle:
        handle.write(bytes(15 * 2**20))

{WRONG_MASK}"""


# Issue 30: a mask found by what it returns among the course package's probes (B's and D's once
# returned A's causal mask), named nowhere, so the static scan has no name to catch.
IMPORTED_ANSWER = f"""
import importlib, pkgutil
import course

def _found(sz):
    for info in pkgutil.walk_packages(course.__path__, "course."):
        if not info.name.endswith("probe"):
            continue
        for value in list(vars(importlib.import_module(info.name)).values()):
            try:
                got = value(sz)
            except Exception:
                continue
            if isinstance(got, torch.Tensor) and got.shape == (sz, sz) and bool(got.isinf().any()):
                return got
    return torch.zeros(sz, sz)

def {MASK}(sz):
    return _found(sz)
"""


# student -> (edit of the reference notebook, or a special action)
CASES: dict[str, Callable[[NotebookNode], NotebookNode] | str] = {
    "syntax_error": set_code(MASK, f"def {MASK}(sz)\n    return 0\n"),
    "import_error": set_code(
        MASK, f"import not_a_module_at_all\n\ndef {MASK}(sz):\n    return 0\n"
    ),
    "endless_loop": set_code(MASK, f"while True:\n    pass\n\ndef {MASK}(sz):\n    return 0\n"),
    "ignores_sigint": set_code(
        MASK,
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
    ),
    "memory_hog": set_code(MASK, f"hog = torch.ones(2_000_000_000)\n\n{WRONG_MASK}"),
    "os_exit": set_code(MASK, "import os\nos._exit(3)\n"),
    "os_exit_late": set_code("PositionalEncoding", "import os\nos._exit(3)\n"),
    "sys_exit": set_code(MASK, "import sys\nsys.exit(1)\n"),
    "deleted_test": on_cell("test_mask_visible", "delete"),
    "duplicated_test": on_cell("test_mask_hidden", "duplicate"),
    "retyped_test": on_cell("test_mask_visible", "retype"),
    "huge_output": set_code(
        MASK, f"print('x' * 20_000_000)\nfor i in range(100_000):\n    print(i)\n\n{WRONG_MASK}"
    ),
    "patch_allclose": set_code(
        MASK, f"torch.allclose = lambda *args, **kwargs: True\n\n{WRONG_MASK}"
    ),
    "patch_helpers": set_code(
        MASK,
        "import course.testcells\ncourse.testcells.check_close = lambda *a, **k: None\n"
        f"checks.diagnose_causal_mask_result = lambda mask, sz: mask\n\n{WRONG_MASK}",
    ),
    "edit_sys_modules": set_code(
        MASK, f"import sys\nsys.modules['course.a_masks.checks'] = None\n\n{WRONG_MASK}"
    ),
    "uses_hidden_reference": set_code(MASK, f"def {MASK}(sz):\n    return _reference_mask(sz)\n"),
    "reads_solutions": set_code(
        MASK,
        "import glob\nSOLUTIONS = glob.glob('/**/source/a_masks/*.ipynb', recursive=True)\n\n"
        + WRONG_MASK,
    ),
    "renamed_notebook": "rename",
    "not_json": "garbage",
    # Hostile kinds (issue: grading a hostile class).
    "wrong_mask": set_code(MASK, WRONG_MASK),  # the honest baseline of the kinds below
    "reads_gradebook": set_code(MASK, hidden(REACH_GRADEBOOK) + WRONG_MASK),
    "walks_proc": set_code(MASK, hidden(WALK_PROC) + WRONG_MASK),
    "patches_user_ns": set_code(MASK, hidden(PATCH_USER_NS) + WRONG_MASK),
    "patches_everything": set_code(MASK, hidden(PATCH_EVERYTHING) + WRONG_MASK),
    "writes_venv": set_code(MASK, hidden(WRITE_VENV) + WRONG_MASK),
    "kills_grader": set_code(MASK, hidden(KILL_GRADER) + WRONG_MASK),
    "outlives_grading": set_code(MASK, hidden(OUTLIVE) + WRONG_MASK),
    "patches_then_exits": lambda nb: set_code("PositionalEncoding", hidden(EXIT_BEFORE_CHECK))(
        set_code(MASK, hidden(PATCH_USER_NS) + WRONG_MASK)(nb)
    ),
    # Issue 30.
    "exits_when_called": set_code("PositionalEncoding", EXITS_WHEN_CALLED),
    "exits_when_observed": append_code("PositionalEncoding", hidden(EXITS_WHEN_OBSERVED)),
    "runaway_when_called": set_code("PositionalEncoding", RUNAWAY_WHEN_CALLED),
    "fills_disk": set_code(MASK, FILLS_DISK),
    # A wrong mask that prints 3 MB each time it is called (in the test cells, which then fail).
    "floods_when_called": set_code(
        MASK, f"def {MASK}(sz):\n    print('x' * 3_000_000)\n    return torch.zeros(sz, sz)\n"
    ),
    "imports_course_answer": set_code(MASK, IMPORTED_ANSWER),
}
HOSTILE = [
    "reads_gradebook",
    "walks_proc",
    "patches_user_ns",
    "patches_everything",
    "writes_venv",
    "kills_grader",
    "outlives_grading",
    "patches_then_exits",
    "imports_course_answer",
]
HONEST = ["reference", "mask_transposed", "alt_correct"]
SCRATCH_BEFORE: set[Path] = set()  # grading's temporary folders before the class was graded


def scratch_folders() -> set[Path]:
    """The temporary folders of grading runs and kernel sandboxes that exist now (in this test
    process's temporary folder: its own under pytest-xdist, see tests/conftest.py)."""
    tmp = Path(tempfile.gettempdir())
    return {*tmp.glob("course-grade-*"), *tmp.glob("course-sandbox-*"), *tmp.glob("course-warm-*")}


CELL_SECONDS = 12  # the class's cell limit: A's reference runs its slowest cell in under 1 s


@pytest.fixture(scope="module")
def adversarial_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The adversarial class and three honest students, graded with a cell limit, memory and
    disk tighter than the product's, each for a reason given below."""
    root = make_course_copy(tmp_path_factory.mktemp("adversarial") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, action in CASES.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        target = folder / f"{NOTEBOOK}.ipynb"
        if action == "rename":
            target = folder / "my_notebook.ipynb"
        if action == "garbage":
            target.write_text('{"cells": [ this is not json')
            continue
        nb = nbformat.read(str(reference), as_version=4)
        if callable(action):
            nb = action(nb)
        nbformat.write(nb, str(target))
    small_limits = {
        # Three submissions run a cell out (endless_loop, ignores_sigint, runaway_when_called):
        # the configured ceiling of CELL_SECONDS, below A's derived 30 s, makes each wait shorter
        # and stops them the same way (the derived limits: test_a_s_grading_job_has_the_derived_
        # time_limits, tests/test_reference_run.py).
        "COURSE_CELL_TIMEOUT": str(CELL_SECONDS),
        # memory_hog asks for 8 GB: under the product's 8192 MB it could get it; at 5000 MB the
        # allocation fails at once, as it would for a larger hog in a real class.
        "COURSE_MEMORY_MB": "5000",
        # fills_disk writes 45 MB: over 20 MB its files go, without writing 100 MB a run.
        "COURSE_DISK_MB": "20",
    }
    saved = {k: os.environ.get(k) for k in small_limits}
    os.environ.update(small_limits)
    try:
        SCRATCH_BEFORE.update(scratch_folders())
        # Warm workers, the default (grader/warm/pool.py); COURSE_TEST_COLD=1: `--cold`.
        warm = os.environ.get("COURSE_TEST_COLD") != "1"
        pipeline.autograde(root, ASSIGNMENT, jobs=2, students=[*CASES, *HONEST], warm=warm)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return root


def lines(root: Path, student: str) -> list[dict[str, str]]:
    rows = [r for r in report.read(root) if r["student"] == student]
    assert rows, f"no report line for {student}"
    return rows


def auto_score(root: Path, student: str) -> float:
    """The student's autograded score in the gradebook; an error when it has none (a missing
    grade on both sides of a comparison must not make it hold)."""
    with Gradebook(pipeline.db_url(root)) as gb:
        try:
            score = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student).code_score
        except MissingEntry:
            raise AssertionError(f"{student} has no graded {NOTEBOOK} in the gradebook") from None
    assert isinstance(score, int | float), f"{student}'s score is {score!r}"
    return score


def test_a_missing_grade_is_an_error_not_a_score(tmp_path: Path) -> None:
    """The test's own check: two students missing from the gradebook do not compare equal."""
    root = make_course_copy(tmp_path / "course")
    with Gradebook(pipeline.db_url(root)) as gb:
        gb.add_assignment(ASSIGNMENT)
    with pytest.raises(AssertionError, match="nobody has no graded"):
        assert auto_score(root, "nobody") == auto_score(root, "nobody_else")


def scores(root: Path, student: str) -> dict[str, float]:
    with Gradebook(pipeline.db_url(root)) as gb:
        nb = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {g.name: g.score for g in nb.grades}


def test_honest_students_are_unchanged(adversarial_class: Path) -> None:
    """Every test cell's score as in the demo class's record (tests/graded_class.json, which
    tests/test_demo_class.py compares with the graded class)."""
    cells = recorded([ASSIGNMENT])["cells"]
    for student in HONEST:
        usual = {cell: c["score"] for cell, c in cells[f"{ASSIGNMENT}/{student}"].items()}
        assert usual, f"no recorded test cell of {student}"
        got = scores(adversarial_class, student)
        assert {cell: got.get(cell) for cell in usual} == usual, student
        assert lines(adversarial_class, student)[0]["status"] == "graded"


@pytest.mark.parametrize(
    "student",
    ["syntax_error", "import_error", "endless_loop", "memory_hog", "sys_exit", "huge_output"],
)
def test_broken_code_loses_only_its_points(adversarial_class: Path, student: str) -> None:
    (line,) = lines(adversarial_class, student)
    assert line["status"] == "graded", line
    lost = {g for g, s in scores(adversarial_class, student).items() if s == 0}
    assert {"test_mask_visible", "test_mask_hidden"} <= lost
    assert "test_pe_hidden" not in lost, f"{student}: later cells should still run: {lost}"


def test_a_flood_of_output_is_cut_and_a_failed_test_still_fails(adversarial_class: Path) -> None:
    """Each cell keeps 1 MB of output
    (grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints.output): the graded notebooks stay
    small, the report says which cell was cut, and a test cell whose flood came before its failure
    keeps its error (and earns nothing)."""
    for student, cell in [
        ("huge_output", "mask_solution"),
        ("floods_when_called", "test_mask_visible"),
    ]:
        notebook = adversarial_class / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        assert notebook.stat().st_size < 5 * MB, (student, notebook.stat().st_size)
        (line,) = lines(adversarial_class, student)
        assert f"cell {cell} showed more than 1024 KB: cut" in line["detail"], line
        nb = nbformat.read(str(notebook), as_version=4)
        graded = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == cell)
        assert any("kept the first 1024 KB" in o.get("text", "") for o in graded.outputs)
    assert graded.outputs[-1].output_type == "error", graded.outputs[-1]
    assert auto_score(adversarial_class, "floods_when_called") == auto_score(
        adversarial_class, "wrong_mask"
    )


def test_endless_loop_ignoring_sigint_is_stopped(adversarial_class: Path) -> None:
    """Its kernel is stopped after the cell timeout and a grace: graded, the cell named with
    the cell limit in force."""
    (line,) = lines(adversarial_class, "ignores_sigint")
    assert line["status"] == "timed out", line
    limit = f"cell mask_solution ran past the time limit ({CELL_SECONDS} s)"
    assert limit in line["detail"], line
    assert auto_score(adversarial_class, "ignores_sigint") == 0  # in the first exercise


def test_a_s_grading_job_has_the_derived_time_limits(
    adversarial_class: Path, tmp_path: Path
) -> None:
    """Without the class's ceiling, a grading job of A carries the limits derived from A's
    reference run (30 s a cell, the floor), the ones a real class is graded under."""
    job = autograde._job(adversarial_class, ASSIGNMENT, "", tmp_path, 2, True, tmp_path / "a.db")
    assert job.times == limits.of_assignment(adversarial_class, ASSIGNMENT)[1]
    assert job.times.cell_seconds == limits.CELL_FLOOR, job.times
    assert job.times.basis.startswith("the reference solution ran in"), job.times


def test_runaway_cell_costs_that_cell(adversarial_class: Path) -> None:
    """A graded class whose constructor loops and ignores SIGINT: the test cell that calls it
    is stopped, the mask and padding exercises before it keep their 5 points (verified by the
    judge in a fresh kernel), the report names the cell."""
    (line,) = lines(adversarial_class, "runaway_when_called")
    assert line["status"] == "timed out", line
    assert "cell test_pe_visible ran past the time limit" in line["detail"], line
    assert "could not be verified" not in line["detail"], line
    assert auto_score(adversarial_class, "runaway_when_called") == 5


def test_a_function_that_kills_the_kernel_costs_only_its_tests(adversarial_class: Path) -> None:
    """A class that calls os._exit when built: its tests earn nothing, the observation in a
    fresh kernel does not call it again, and the 5 points before it stay (not flagged)."""
    (line,) = lines(adversarial_class, "exits_when_called")
    assert line["status"] == "graded", line
    assert "kernel died while cell test_pe_visible ran" in line["detail"], line
    assert auto_score(adversarial_class, "exits_when_called") == 5


def test_an_item_that_kills_the_observation_costs_that_item_only(adversarial_class: Path) -> None:
    """A class that passes the notebook's tests but calls os._exit when the trusted check
    builds it: each of its two items kills a kernel and fails; the other items are observed in
    fresh kernels, so the mask, padding and rotary tests keep their 8 points (flagged)."""
    (line,) = lines(adversarial_class, "exits_when_observed")
    assert line["status"] == "flagged", line
    assert "the kernel died while the trusted check observed test_pe_visible" in line["detail"]
    got = scores(adversarial_class, "exits_when_observed")
    assert got["test_pe_visible"] == got["test_pe_hidden"] == 0, got
    assert auto_score(adversarial_class, "exits_when_observed") == 8


def test_disk_quota_removes_the_largest_files_and_keeps_the_points(
    adversarial_class: Path,
) -> None:
    """3 files of 15 MB against a quota of 20 MB: the two largest removed, the points kept."""
    (line,) = lines(adversarial_class, "fills_disk")
    assert line["status"] == "over quota", line
    assert "over the disk quota of 20 MB" in line["detail"] and "2 files removed" in line["detail"]
    folder = adversarial_class / "autograded" / "fills_disk" / ASSIGNMENT
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) <= 20 * 2**20
    assert (folder / f"{NOTEBOOK}.ipynb").is_file()
    baseline = auto_score(adversarial_class, "wrong_mask")
    assert auto_score(adversarial_class, "fills_disk") == baseline


def test_the_runaway_guard_is_where_nbclient_calls_it() -> None:
    """ExecuteKeepingPoints stops a kernel that ignores the interrupt from nbclient's timeout
    handler (a private method): fail loudly if an nbclient upgrade renames or reshapes it."""
    import inspect

    from nbclient import NotebookClient

    from grader.nbgrader.execute_keeping_points import ExecuteKeepingPoints

    assert "_async_handle_timeout" in inspect.getsource(NotebookClient._async_poll_for_reply)
    ours = inspect.signature(ExecuteKeepingPoints._async_handle_timeout).parameters
    assert list(inspect.signature(NotebookClient._async_handle_timeout).parameters) == list(ours)


def test_quota_removes_the_largest_files_but_the_notebooks() -> None:
    sizes = {"nb.ipynb": 30 * MB, "a.bin": 10 * MB, "b.bin": 40 * MB, "c.txt": 1 * MB}
    assert quota.over_quota(sizes, 100) == []
    assert quota.over_quota(sizes, 0) == []  # no quota
    assert quota.over_quota(sizes, 45, keep=["nb.ipynb"]) == ["b.bin"]
    assert quota.over_quota(sizes, 20, keep=["nb.ipynb"]) == ["b.bin", "a.bin", "c.txt"]
    many = {f"f{i:05d}": 0 for i in range(quota.MAX_FILES + 5)} | {"nb.ipynb": 10}
    assert quota.over_quota(many, 100, keep=["nb.ipynb"]) == [f"f{i:05d}" for i in range(6)]


def test_quota_holds_what_a_worker_returns(tmp_path: Path) -> None:
    """The coordinator keeps a worker's files within the quota, whatever the worker did."""
    root = make_course_copy(tmp_path / "course")
    event = report.Event(ASSIGNMENT, "ann", NOTEBOOK, "graded", 3.0, 24.0)
    graded = Graded("ann", True, 1.0, events=[event])
    files = {f"{NOTEBOOK}.ipynb": b"{}", "big.bin": bytes(3 * MB), "small.bin": b"x"}
    cluster.write_autograded(root, cluster.TaskResult(graded, files, b"db"), ASSIGNMENT, 2)
    folder = root / "autograded" / "ann" / ASSIGNMENT
    assert sorted(p.name for p in folder.iterdir()) == [f"{NOTEBOOK}.ipynb", "small.bin"]
    assert event.status == "over quota" and "big.bin (3 MB)" in event.detail


def test_killed_kernel_keeps_the_points_of_the_cells_before(adversarial_class: Path) -> None:
    (line,) = lines(adversarial_class, "os_exit")
    assert line["status"] == "graded", line
    assert "kernel died" in line["detail"] and "cells before it keep their points" in line["detail"]
    assert auto_score(adversarial_class, "os_exit") == 0  # it died in the first exercise
    (late,) = lines(adversarial_class, "os_exit_late")
    assert late["status"] == "graded" and "kernel died" in late["detail"], late
    # The mask and padding exercises ran before the kernel died in the positional encoding:
    # their 5 points stay; the positional encoding's tests did not run and earn nothing.
    assert auto_score(adversarial_class, "os_exit_late") == 5


@pytest.mark.parametrize(
    ("student", "lost"), [("deleted_test", 1), ("duplicated_test", 0), ("retyped_test", 0)]
)
def test_test_cells_cannot_be_removed_or_changed(
    adversarial_class: Path, student: str, lost: int
) -> None:
    """nbgrader restores changed test cells from the gradebook; a deleted test earns nothing."""
    (line,) = lines(adversarial_class, student)
    assert line["status"] == "graded", line
    full = auto_score(adversarial_class, "reference")
    assert auto_score(adversarial_class, student) == full - lost
    if student == "duplicated_test":
        assert "second copy of cell test_mask_hidden" in line["detail"]


@pytest.mark.parametrize(
    "student",
    [
        "patch_allclose",
        "patch_helpers",
        "edit_sys_modules",
        "uses_hidden_reference",
        "reads_solutions",
    ],
)
def test_tampering_is_flagged_and_earns_nothing(adversarial_class: Path, student: str) -> None:
    (line,) = lines(adversarial_class, student)
    assert line["status"] == "flagged", line
    assert line["detail"], "the report says why"
    assert auto_score(adversarial_class, student) == 0
    with Gradebook(pipeline.db_url(adversarial_class)) as gb:
        assert gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student).flagged


def test_renamed_and_invalid_notebooks_are_reported(adversarial_class: Path) -> None:
    statuses = {r["notebook"]: r["status"] for r in lines(adversarial_class, "renamed_notebook")}
    assert statuses == {NOTEBOOK: "missing notebook", "my_notebook.ipynb": "ignored"}
    assert auto_score(adversarial_class, "renamed_notebook") == 0  # in the gradebook, with 0
    (line,) = lines(adversarial_class, "not_json")
    assert line["status"] == "not graded"
    assert "JSON" in line["detail"]


def test_interrupted_run_keeps_the_gradebook(adversarial_class: Path, tmp_path: Path) -> None:
    root = tmp_path / "course"
    subprocess.run(["cp", "-a", str(adversarial_class), str(root)], check=True)
    before = {s: scores(root, s) for s in HONEST}
    command = [
        sys.executable,
        "-m",
        "grader.command.cli",
        "--root",
        str(root),
        "autograde",
        ASSIGNMENT,
    ]
    command += ["--jobs", "1", *[f"--student={s}" for s in HONEST]]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    first = process.stdout.readline()  # one student graded and saved
    assert "graded" in first
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    time.sleep(1)
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert {s: scores(root, s) for s in HONEST} == before


# ----------------------------------------------------------------------------- hostile kinds
def marked_processes() -> list[str]:
    """Processes started by ``outlives_grading`` (sleep 4242 / 4243), anywhere on the machine."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if line == "sleep 4242" or "time.sleep(4243)" in line:
            found.append(line)
    return found


def reached(root: Path, student: str) -> list[str]:
    """What a hostile submission wrote into reached.txt in its own folder (copied back)."""
    path = root / "autograded" / student / ASSIGNMENT / "reached.txt"
    assert path.is_file(), f"{student} did not run its payload"
    return [line for line in path.read_text().splitlines() if line]


@pytest.mark.parametrize("student", HOSTILE)
def test_no_hostile_submission_gains_a_point(adversarial_class: Path, student: str) -> None:
    """Each kind earns at most what its honest code earns (the wrong mask) and is reported."""
    (line,) = lines(adversarial_class, student)
    assert line["status"] in ("graded", "flagged"), line
    baseline = auto_score(adversarial_class, "wrong_mask")
    assert baseline == auto_score(adversarial_class, "reference") - 3  # the mask's 3 points
    assert auto_score(adversarial_class, student) <= baseline, line


@pytest.mark.parametrize("student", ["patches_user_ns", "patches_everything", "patches_then_exits"])
def test_patched_verdicts_are_overruled_by_the_trusted_judge(
    adversarial_class: Path, student: str
) -> None:
    """Tests that pass only because the kernel was patched fail in the judge: the wrong mask
    earns nothing, the notebook is flagged and the report says why."""
    (line,) = lines(adversarial_class, student)
    assert line["status"] == "flagged", line
    assert "trusted check" in line["detail"] or "could not be verified" in line["detail"], line
    got = scores(adversarial_class, student)
    assert got["test_mask_visible"] == got["test_mask_hidden"] == 0, got
    with Gradebook(pipeline.db_url(adversarial_class)) as gb:
        assert gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student).flagged


@pytest.mark.parametrize("student", ["reads_gradebook", "walks_proc", "writes_venv"])
def test_the_sandbox_hides_the_course_and_keeps_the_venv(
    adversarial_class: Path, student: str
) -> None:
    """No gradebook, source/, other submission, grading process or writable venv is reached."""
    assert reached(adversarial_class, student) == []
    for folder in {Path(p) for p in sys.path if p.endswith("site-packages")}:
        assert not (folder / "zz_course_attack.pth").exists()
        assert (
            not (folder / "sitecustomize.py").exists()
            or "import os\n" not in (folder / "sitecustomize.py").read_text()
        )


def test_killing_every_process_it_sees_stops_nothing_else(adversarial_class: Path) -> None:
    """Inside its PID namespace the kernel sees no grader; every student after it is graded."""
    assert lines(adversarial_class, "kills_grader")[0]["status"] == "graded"
    for student in [*HOSTILE, *HONEST, "wrong_mask"]:
        assert lines(adversarial_class, student), student


def test_nothing_outlives_grading(adversarial_class: Path) -> None:
    assert lines(adversarial_class, "outlives_grading")[0]["status"] == "graded"
    assert marked_processes() == []
    assert scratch_folders() <= SCRATCH_BEFORE, scratch_folders() - SCRATCH_BEFORE


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"


BOMB_SECONDS = 12  # the bomb's cell limit: longer than the two other submissions' grading


@pytest.mark.slow  # the bomb runs out its cell's time limit: in the deep tier only
@pytest.mark.deep
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_fork_bomb_is_contained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """A fork bomb, graded beside an honest submission as CI grades (root, whom the rlimit on
    processes spares): its kernel's cgroup stops it at the limit and keeps its share of the
    processors (grader/sandbox/cgroups.py): the honest submission, graded at the same time, keeps
    every point, and the bomb earns none. The cell limit is the configured ceiling
    (``COURSE_CELL_TIMEOUT``) of :data:`BOMB_SECONDS`, not A's 30 s: the bomb is capped all along,
    so 30 s would prove nothing more."""
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", str(BOMB_SECONDS))
    root = make_course_copy(tmp_path / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, code in [("bomb", FORK_BOMB), ("honest", "honest = True")]:
        target = root / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True)
        edited = append_code(MASK, code)(nbformat.read(str(reference), as_version=4))
        nbformat.write(edited, str(target))
    students = ["bomb", "honest", "reference"]
    pipeline.autograde(root, ASSIGNMENT, jobs=2, students=students, warm=warm)
    rows = {row["student"]: row for row in report.read(root)}
    assert rows["honest"]["status"] == rows["reference"]["status"] == "graded"
    assert rows["honest"]["points"] == rows["reference"]["points"] == "13", rows
    # Stopped at its cell's time limit, capped all along: "timed out", the cells before it kept.
    # (It ended "not graded" in some runs while another worker's kernel, starting at the same
    # moment, could remove its cgroups before it joined them: then it ran uncapped.)
    assert rows["bomb"]["status"] == "timed out", rows["bomb"]["detail"]
    assert f"time limit ({BOMB_SECONDS} s)" in rows["bomb"]["detail"], rows["bomb"]["detail"]
    assert rows["bomb"]["points"] == "0", rows["bomb"]
