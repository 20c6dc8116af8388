"""A grading job: how the submissions of one assignment are graded in this run.

One :class:`GradingJob` is made per ``course autograde`` (or per task on a Dask worker) and handed,
with a student's id, to :func:`grader.coordinator.grading.grade_one`: the course folder, the
gradebook each submission's private copy starts from, the limits, the environment of the ``nbgrader
autograde`` process, the sandbox and the trusted judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.shared.limits import Limits, TimeLimits
from grader.shared.verification import Judge

if TYPE_CHECKING:
    from grader.warm.pool import Workers


@dataclass(frozen=True)
class GradingJob:
    """Everything grading a submission of ``assignment`` needs, but the student."""

    root: Path  # the course: nbgrader_config.py, source/ASSIGNMENT, submitted/STUDENT/ASSIGNMENT
    assignment: str
    gradebook: Path  # sqlite gradebook (or snapshot) that each private copy starts from
    limits: Limits
    times: TimeLimits
    env: dict[str, str]  # environment of the nbgrader process (grader.shared.limits.worker_env)
    sandboxed: bool = (
        True  # the kernel in bubblewrap (grader.nbgrader.kernels.SandboxedKernelManager)
    )
    judge: Judge | None = None  # None: no trusted verification (grader.shared.verification)
    # kernels forked from the run's zygote (grader.warm.pool), or the kept one (grader.warm.service)
    warm: Workers | None = None
