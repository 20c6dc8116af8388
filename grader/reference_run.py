"""Time limits derived from the reference solution's own run, recorded at release.

A fixed limit (120 s a cell, 900 s a submission) lets a loop that never ends hold a worker for
15 minutes. ``course release`` therefore runs each instructor notebook once, in grading mode, as
nbgrader runs the reference student (solutions and hidden tests included), and records how long
it took in ``reference_runs.json`` beside the gradebook, with the SHA-256 of the notebook it ran.
Grading then allows, per submission of that assignment (:func:`limits_for`):

- a cell: ``CELL_FACTOR`` x the slowest cell of the reference run, at least ``CELL_FLOOR``;
- a submission: ``SUBMISSION_FACTOR`` x the whole reference run, at least ``SUBMISSION_FLOOR``;

never more than the configured limits (``c.Execute.timeout``, ``c.Limits.submission_seconds``),
which stay the ceiling. A record whose notebook changed since is not used (the configured limits
apply) until the next ``course release``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

FILE = "reference_runs.json"
CELL_FACTOR, CELL_FLOOR = 10, 30
SUBMISSION_FACTOR, SUBMISSION_FLOOR = 4, 120


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
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from grader.paths import CourseError
    from grader.submission import read_notebook

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
            kernel_manager_class="grader.kernels.IsolatedKernelManager",
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


@dataclass(frozen=True)
class TimeLimits:
    """The limits one submission is graded under, and where they come from."""

    cell_seconds: int
    submission_seconds: int
    basis: str  # said in the report when a submission is stopped


def limits_for(
    root: Path, assignment: str, cell_ceiling: int, submission_ceiling: int
) -> TimeLimits:
    """The limits of ``assignment``: derived from its reference run, capped by the configuration."""
    run = current(root, assignment)
    if run is None:
        return TimeLimits(cell_ceiling, submission_ceiling, "the configured limits")
    cell = max(CELL_FLOOR, round(CELL_FACTOR * run["slowest_cell_seconds"]))
    submission = max(SUBMISSION_FLOOR, round(SUBMISSION_FACTOR * run["seconds"]))
    basis = (
        f"the reference solution ran in {run['seconds']:g} s, its slowest cell in "
        f"{run['slowest_cell_seconds']:g} s"
    )
    return TimeLimits(min(cell, cell_ceiling), min(submission, submission_ceiling), basis)
