"""The reference solution's own run, recorded at release: what grading's time limits come from.

``course release`` runs each instructor notebook once, in grading mode, as nbgrader runs the
reference student (solutions and hidden tests included), and records how long it took in
``reference_runs.json`` beside the gradebook, with the SHA-256 of the notebook it ran.
:func:`grader.shared.limits.time_limits` derives each submission's cell and submission time limits
from it. A record whose notebook changed since is not used (the configured limits apply) until the
next ``course release``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from grader.shared.notebooks import read_notebook
from grader.shared.paths import CourseError

FILE = "reference_runs.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read(root: Path) -> dict:
    """Every recorded reference run, by assignment (empty when none was recorded)."""
    path = root / FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def current(root: Path, assignment: str) -> dict | None:
    """The recorded run of ``assignment`` if it ran today's instructor notebooks, else None."""
    run = read(root).get(assignment)
    notebooks = sorted((root / "source" / assignment).glob("*.ipynb"))
    if not run or not notebooks:
        return None
    if run.get("notebooks") != {p.name: _sha256(p) for p in notebooks}:
        return None
    return run


def record(root: Path, assignment: str) -> dict:
    """Run the instructor notebooks of ``assignment`` in grading mode; record and return the run.

    Each notebook runs in a scratch copy of its folder with the course's kernel manager.
    """
    notebooks = sorted((root / "source" / assignment).glob("*.ipynb"))
    total, slowest, slowest_cell = 0.0, 0.0, ""
    for path in notebooks:
        seconds, cells = _timed_run(path)
        total += seconds
        name, cell_seconds = max(cells.items(), key=lambda item: item[1])
        if cell_seconds > slowest:
            slowest, slowest_cell = cell_seconds, name
    run = {
        "notebooks": {p.name: _sha256(p) for p in notebooks},
        "seconds": round(total, 1),
        "slowest_cell": slowest_cell,
        "slowest_cell_seconds": round(slowest, 1),
        "cpus": os.cpu_count(),
    }
    runs = read(root) | {assignment: run}
    (root / FILE).write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    return run


def _timed_run(path: Path) -> tuple[float, dict[str, float]]:
    """Seconds of a whole run of the notebook at ``path``, and of each code cell by name."""
    started: dict[int, float] = {}
    cells: dict[str, float] = {}

    def start(cell: dict, cell_index: int) -> None:
        started[cell_index] = time.perf_counter()

    def done(cell: dict, cell_index: int, execute_reply: dict) -> None:
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", f"cell {cell_index}")
        cells[name] = time.perf_counter() - started[cell_index]

    with tempfile.TemporaryDirectory(prefix="course-reference-") as scratch:
        folder = Path(scratch) / path.parent.name
        shutil.copytree(path.parent, folder)
        client = NotebookClient(
            read_notebook(folder / path.name),
            timeout=1800,
            kernel_manager_class="grader.nbgrader.kernels.IsolatedKernelManager",
            resources={"metadata": {"path": str(folder)}},
            on_cell_start=start,
            on_cell_executed=done,
        )
        begin = time.perf_counter()
        try:  # grading mode (course.mode), as nbgrader runs the reference student
            client.execute(env={**os.environ, "NBGRADER_EXECUTION": "autograde"})
        except CellExecutionError as error:
            first = str(error).strip().splitlines()[-1][:300]
            raise CourseError(
                f"the reference solution of {path.parent.name} fails in grading mode ({first}): "
                f"fix {path.relative_to(path.parents[2])} and release again"
            ) from None
        return time.perf_counter() - begin, cells
