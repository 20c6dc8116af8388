"""The limits one submission is graded under: configured, and derived from the reference run.

- :class:`Limits`: the ceilings set in ``nbgrader_config.py`` (``c.Limits.*``): wall-clock
  seconds for a whole submission, address space (memory), size of a written file, processes, and the
  disk quota of a submission's folder after grading (:mod:`grader.shared.quota`).
- :class:`TimeLimits`: the cell and submission time limits of one assignment. A fixed limit
  (120 s a cell, 900 s a submission) lets a loop that never ends hold a worker for 15 minutes, so
  grading allows, per submission (:func:`time_limits`):

  - a cell: ``CELL_FACTOR`` x the slowest cell of the reference run, at least ``CELL_FLOOR``;
  - a submission: ``SUBMISSION_FACTOR`` x the whole reference run, at least
    ``SUBMISSION_FLOOR``;

  never more than the configured limits (``c.Execute.timeout``, ``c.Limits.submission_seconds``),
  which stay the ceiling. Without a current record of the reference run
  (:mod:`grader.shared.reference_run`) the configured limits apply.

How they are enforced: the time limits by nbclient (a cell) and by the grader, which kills the
``nbgrader autograde`` process (:mod:`grader.coordinator.nbgrader_run`); memory, file size and
processes by POSIX rlimits, set by :mod:`grader.sandbox.rlimits`; the disk quota by the grader after
grading (:mod:`grader.shared.quota`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from traitlets import Integer
from traitlets.config import Configurable

from grader.shared import reference_run
from grader.shared.paths import load_config

CELL_FACTOR, CELL_FLOOR = 10, 30
SUBMISSION_FACTOR, SUBMISSION_FLOOR = 4, 120
DEFAULT_CELL_SECONDS = 120  # when the configuration sets no cell timeout


class Limits(Configurable):
    """Limits on one submission while it is graded (``c.Limits.*`` in nbgrader_config.py)."""

    submission_seconds = Integer(900, help="Wall-clock seconds for a whole submission.").tag(
        config=True
    )
    memory_mb = Integer(8192, help="Address space of the grading process and kernel (MB).").tag(
        config=True
    )
    file_size_mb = Integer(512, help="Largest file the submission may write (MB).").tag(config=True)
    processes = Integer(
        512,
        help="Processes and threads of the grading user; run as root, of each kernel (its "
        "cgroup, grader/sandbox/cgroups.py, where the cgroups can be written).",
    ).tag(config=True)
    disk_mb = Integer(
        100,
        help="Disk quota of a submission: what its folder may hold after grading, and what a "
        "worker returns (MB; the largest files are removed, the points kept; 0: no quota).",
    ).tag(config=True)


def configured(root: Path) -> Limits:
    """The limits configured for the course at ``root``."""
    return Limits(config=load_config(root))


@dataclass(frozen=True)
class TimeLimits:
    """The time limits one submission is graded under, and where they come from."""

    cell_seconds: int
    submission_seconds: int
    basis: str  # said in the report when a submission is stopped


def time_limits(
    root: Path, assignment: str, cell_ceiling: int, submission_ceiling: int
) -> TimeLimits:
    """The limits of ``assignment``: derived from its reference run, capped by the configuration."""
    run = reference_run.current(root, assignment)
    if run is None:
        return TimeLimits(cell_ceiling, submission_ceiling, "the configured limits")
    cell = max(CELL_FLOOR, round(CELL_FACTOR * run["slowest_cell_seconds"]))
    submission = max(SUBMISSION_FLOOR, round(SUBMISSION_FACTOR * run["seconds"]))
    basis = (
        f"the reference solution ran in {run['seconds']:g} s, its slowest cell in "
        f"{run['slowest_cell_seconds']:g} s"
    )
    return TimeLimits(min(cell, cell_ceiling), min(submission, submission_ceiling), basis)


def of_assignment(root: Path, assignment: str) -> tuple[Limits, TimeLimits]:
    """The configured limits of one submission, and the time limits from the reference run."""
    limits = configured(root)
    cell_ceiling = int(load_config(root).Execute.timeout or 0) or DEFAULT_CELL_SECONDS
    times = time_limits(root, assignment, cell_ceiling, limits.submission_seconds)
    return limits, times


def worker_env(jobs: int) -> dict[str, str]:
    """The environment of a grading process when ``jobs`` of them share this machine."""
    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    return {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
