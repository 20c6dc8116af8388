"""Verdicts that student code cannot change: the grader's side of the trusted verification.

The notebook's own test cells run in the student's kernel, where student code can replace
whatever they call (from a string given to ``exec``, through IPython's namespace, ...). So each
notebook is verified a second time, where no student code runs:

1. after the last cell, :class:`grader.preprocessors.ExecuteKeepingPoints` runs
   :func:`course.verify.observe` in the same (sandboxed) kernel with a seed drawn here for this
   submission: the student's functions and classes are called on inputs drawn from that seed,
   and their results are saved as tensors and plain values (if the kernel died, in a fresh
   kernel that re-runs the notebook's code cells up to the one that killed it);
2. the judge (``python -m judge``, a separate process outside the sandbox, started once per
   grading run) loads that file with ``torch.load(weights_only=True)``, draws the same inputs
   and gives every test cell its verdict (:mod:`judge`);
3. :func:`disagreements` compares those verdicts with the points the notebook's own cells gave.
   The judge's verdict stands: a cell that earned points in the kernel but fails in the judge
   earns nothing, and so does every cell when the observations are missing or unreadable; the
   notebook is flagged so that the instructor sees it, and the report says which cells and why.
   (The judge draws fresh inputs, so code that is wrong only for inputs the notebook's fixed
   hidden tests missed loses those cells too; the rest of its points stay.)
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SUFFIX = ".observations.pt"  # written by the kernel next to the graded notebook


def observations_file(folder: Path, notebook: str) -> Path:
    """Where the kernel writes the observations of ``notebook``."""
    return folder / f"{notebook}{SUFFIX}"


def has_judge(assignment: str) -> bool:
    """Whether the course verifies ``assignment`` (``judge/ASSIGNMENT.py`` exists)."""
    return importlib.util.find_spec(f"judge.{assignment}") is not None


def new_seed() -> int:
    """A seed the submission cannot know in advance."""
    return secrets.randbelow(2**31 - 1) + 1


@dataclass
class Verification:
    """The judge's verdicts on one notebook, or why there are none."""

    verdicts: dict[str, str | None] = field(default_factory=dict)
    refused: str = ""


class Judge:
    """One ``python -m judge`` process, shared by the grading threads of a run."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def verify(self, assignment: str, seed: int, path: Path) -> Verification:
        """The judge's verdicts on the observations at ``path``."""
        request = json.dumps({"assignment": assignment, "seed": seed, "path": str(path)})
        with self._lock:
            for _attempt in range(2):  # a judge that died is started again, once
                process = self._started()
                try:
                    process.stdin.write(request + "\n")
                    process.stdin.flush()
                    line = process.stdout.readline()
                except (BrokenPipeError, OSError):
                    line = ""
                if line:
                    break
                self._process = None
            else:
                return Verification(refused="the judge process failed (see its messages)")
        reply = json.loads(line)
        if "refused" in reply:
            return Verification(refused=reply["refused"])
        return Verification(verdicts=reply["verdicts"])

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "judge"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        return self._process

    def close(self) -> None:
        """Stop the judge process."""
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None


def disagreements(verification: Verification, scores: dict[str, float]) -> dict[str, str]:
    """Test cells whose points cannot stand, with the reason: each cell that earned points in
    the kernel (``scores``: grade id -> points) but fails in the judge, or every cell that
    earned points when the observations are missing or unreadable. Empty when they agree."""
    earned = sorted(cell for cell, points in scores.items() if points and points > 0)
    if verification.refused:
        reason = f"could not be verified ({verification.refused})"
        return {cell: reason for cell in earned if cell in scores}
    found = {}
    for cell in earned:
        reason = verification.verdicts.get(cell)
        if reason:  # None: passes; absent: not an autograded test the judge knows
            found[cell] = f"passed in the notebook but fails the trusted check: {reason}"
    return found
