"""Verdicts that student code cannot change: the grader's side of the trusted verification.

This module is the whole of it on the grader's side: the seed of a submission (:func:`seed_for`),
the judge process and its verdicts on the graded notebooks (:class:`Judge`, :func:`judge_notebooks`)
and those verdicts applied to the gradebook (:func:`apply_verdicts`). In the words of the code: the
kernel *observes* (writes the observations file), the *judge* decides, the grader *verifies* the
points against its verdicts.

The notebook's own test cells run in the student's kernel, where student code can replace whatever
they call (from a string given to ``exec``, through IPython's namespace, ...). So each notebook is
verified a second time, where no student code runs:

1. after the last cell, :class:`grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints` runs
   :func:`course.verify.observe` in the same (sandboxed) kernel with a seed drawn here for this
   submission: the student's functions and classes are called on inputs drawn from that seed, and
   their results are saved as tensors and plain values (if the kernel died, in a fresh kernel that
   re-runs the notebook's code cells up to the one that killed it);
2. the judge (``python -m judge``, a separate process outside the sandbox, started once per
   grading run, or forked for the run by the judge server of kept warm workers) loads that file with
   ``torch.load(weights_only=True)``, draws the same inputs and gives every test cell its verdict
   (:mod:`judge`);
3. :func:`disagreements` compares those verdicts with the points the notebook's own cells gave.
   The judge's verdict stands: a cell that earned points in the kernel but fails in the judge earns
   nothing, and so does every cell when the observations are missing or unreadable
   (:func:`apply_verdicts`); the notebook is flagged so that the instructor sees it, and the report
   says which cells and why. (The judge draws fresh inputs, so code that is wrong only for inputs
   the notebook's fixed hidden tests missed loses those cells too; the rest of its points stay.)
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import SubmittedNotebook

from course import contract

SUFFIX = contract.OBSERVATIONS_SUFFIX  # written by the kernel next to the graded notebook
JUDGE_NICENESS = 5  # the judge runs below the grading workers (see Judge._started)


def below_the_workers(pid: int) -> None:
    """Set process ``pid`` :data:`JUDGE_NICENESS` steps below this process's priority (at most
    19): under a ``nice``d grading run too, where an absolute niceness would put the judge above
    the workers (or be refused to a user who is not root)."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, pid, min(19, mine + JUDGE_NICENESS))


def observations_file(folder: Path, notebook: str) -> Path:
    """Where the kernel writes the observations of ``notebook``."""
    return Path(contract.observations_path(folder, notebook))


def has_judge(assignment: str) -> bool:
    """Whether the course verifies ``assignment`` (``judge/ASSIGNMENT.py`` exists)."""
    return importlib.util.find_spec(f"judge.{assignment}") is not None


def new_seed() -> int:
    """A seed the submission cannot know in advance."""
    return secrets.randbelow(2**31 - 1) + 1


def seed_for(assignment: str, judge: Judge | None) -> int:
    """The seed of one submission's observations: 0 (not verified) without a judge or without a
    judge of ``assignment``."""
    return new_seed() if judge is not None and has_judge(assignment) else 0


@dataclass
class Verification:
    """The judge's verdicts on one notebook, or why there are none."""

    verdicts: dict[str, str | None] = field(default_factory=dict)
    refused: str = ""
    # Each failed cell's mistake: {"key": stable key, "message": the check's message}.
    mistakes: dict[str, dict[str, str]] = field(default_factory=dict)


class Judge:
    """One ``python -m judge`` process, shared by the grading threads of a run; or, with ``address``
    (the socket of the kept warm workers' judge server, :mod:`grader.warm.service`), a judge forked
    for this run from one that imported torch already."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self._process: subprocess.Popen | ForkedJudge | None = None
        self._lock = threading.Lock()
        self._closed = False

    def verify(self, assignment: str, seed: int, path: Path) -> Verification:
        """The judge's verdicts on the observations at ``path``."""
        request = contract.request_line(assignment, seed, str(path))
        with self._lock:
            for _attempt in range(2):  # a judge that died is started again, once
                if self._closed:  # grading was stopped (a worker thread still finishing)
                    return Verification(refused="grading was stopped before the judge's check")
                process = self._started()
                try:
                    process.stdin.write(request)
                    process.stdin.flush()
                    line = process.stdout.readline()
                except (BrokenPipeError, OSError):
                    line = ""
                if line:
                    break
                self._process = None
            else:
                return Verification(refused="the judge process failed (see its messages)")
        verdicts, refused = contract.read_reply(line)
        return Verification(verdicts, refused, contract.read_mistakes(line))

    def start(self) -> None:
        """Start the judge process now (it imports torch), so that the first verdicts do not wait
        for it: a run starts it while its first kernels run."""
        with self._lock:
            self._started()

    def _started(self) -> subprocess.Popen | ForkedJudge:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if self.address:
            try:
                self._process = ForkedJudge(self.address)
                return self._process
            except OSError:  # the kept workers ended: a judge of this run's own, as without
                self.address = None
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "judge"],  # -P: grader/sandbox/rlimits.py says why
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        # Below the kernels: its start (torch's import) and its verdicts take what the grading
        # workers leave, as a submission's verdict does not hold up the next kernel.
        below_the_workers(process.pid)
        self._process = process
        return process

    def close(self) -> None:
        """Stop the judge process (at once: it keeps nothing, and it may still be importing torch
        when a run is interrupted); a verdict asked for after this is refused."""
        self._closed = True
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._process = None


class ForkedJudge:
    """A judge forked by the judge server at ``address`` for this connection, used as
    :class:`Judge` uses its process (lines in, lines out; ``kill`` ends it)."""

    def __init__(self, address: str) -> None:
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.connect(address)
        except OSError:
            self._socket.close()
            raise
        self.stdin = self._socket.makefile("w")
        self.stdout = self._socket.makefile("r")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        """Close the connection: the forked judge reads its end and ends."""
        for part in (self.stdin, self.stdout, self._socket):
            try:
                part.close()
            except OSError:
                pass
        self.returncode = -9

    def wait(self) -> int | None:
        return self.returncode


def judge_notebooks(
    judge: Judge | None, assignment: str, seed: int, folder: Path
) -> dict[str, Verification]:
    """The judge's verdicts on every graded notebook in ``folder``, by notebook name (empty when
    ``seed`` is 0); the observation files are removed from ``folder`` afterwards."""
    verifications = {}
    if seed and judge is not None:
        for name in sorted(p.stem for p in folder.glob("*.ipynb")):
            path = observations_file(folder, name)
            verifications[name] = judge.verify(assignment, seed, path)
    for observed in folder.glob(f"*{SUFFIX}*"):  # the observations and the kernel's log
        observed.unlink()
    return verifications


# The start of a reason that asks an instructor to look, not a flag: the kernel's check and the
# judge's disagree on a check decided by random draws, or on cases the notebook's own test does
# not hold (course.contract.REVIEW_KEYS).
REVIEW = "not graded, for review:"


def apply_verdicts(row: SubmittedNotebook, verification: Verification) -> list[str]:
    """The judge's verdicts stand: every test cell of the gradebook's ``row`` (a submitted notebook)
    whose points they do not uphold earns nothing and the notebook is flagged; a cell they fail on a
    statistical check, or on the grader's cases only (:func:`for_review`), keeps its points as
    needing a manual grade. Returns
    why, one reason per such cell (empty: the notebook keeps its points)."""
    scores = {grade.name: grade.auto_score for grade in row.grades}
    overruled = disagreements(verification, scores)
    review = for_review(verification, scores)
    if overruled:
        row.flagged = True
    for grade in row.grades:
        if grade.name in overruled:
            grade.auto_score = 0.0
        if grade.name in review:
            grade.needs_manual_grade = True
    return [f"{cell} {reason}" for cell, reason in overruled.items()] + [
        f"{REVIEW} {cell} {reason}" for cell, reason in review.items()
    ]


def disagreements(verification: Verification, scores: dict[str, float]) -> dict[str, str]:
    """Test cells whose points cannot stand, with the reason: each cell that earned points in the
    kernel (``scores``: grade id -> points) but fails in the judge, or every cell that earned points
    when the observations are missing or unreadable. Empty when they agree."""
    earned = sorted(cell for cell, points in scores.items() if points and points > 0)
    if verification.refused:
        reason = f"could not be verified ({verification.refused})"
        return {cell: reason for cell in earned if cell in scores}
    found = {}
    for cell in earned:
        reason = verification.verdicts.get(cell)
        # None: passes; absent: not an autograded test the judge knows; a statistical check's
        # failure, or one on the grader's cases only, asks for a review (for_review)
        if reason and not _review(verification, cell):
            found[cell] = f"passed in the notebook but fails the trusted check: {reason}"
    return found


def for_review(verification: Verification, scores: dict[str, float]) -> dict[str, str]:
    """Test cells that earned points in the kernel and fail in the judge on a check decided by
    random draws (the mistake's key starts with :data:`course.contract.STATISTICAL`: chance can
    part the two), or on the grader's cases only, the notebook's own passing in the judge too
    (:data:`course.contract.CASES_DIFFER`): an instructor decides; with the reason."""
    if verification.refused:
        return {}
    return {
        cell: f"passed in the notebook, the trusted check's {what} disagree: {reason}"
        for cell, points in sorted(scores.items())
        if points
        and points > 0
        and (reason := verification.verdicts.get(cell))
        and (what := _review(verification, cell))
    }


def _review(verification: Verification, cell: str) -> str:
    """What parts the kernel and the judge on ``cell`` when its failure asks for a review: "draws"
    or "cases" (empty: a failure that stands)."""
    key = str(verification.mistakes.get(cell, {}).get("key", ""))
    if key.startswith(contract.STATISTICAL):
        return "draws"
    return "cases" if key.startswith(contract.CASES_DIFFER) else ""


def settle(
    row: SubmittedNotebook, tampering: list[str], verification: Verification | None
) -> list[str]:
    """What one graded notebook (the gradebook's ``row``) keeps: nothing when the tampering scan
    found reasons (every grade zeroed, flagged), else the points the judge's verdicts uphold
    (:func:`apply_verdicts`; ``verification`` None: not verified). Returns the reasons to flag it,
    or, those that start with :data:`REVIEW`, to review it (empty: it keeps its points). The one
    rule of every path that grades (`course autograde`, plain `nbgrader autograde`, formgrader's
    button)."""
    if tampering:
        zero(row)
        return tampering
    if verification is None:
        return []
    return apply_verdicts(row, verification)


def zero(row: SubmittedNotebook) -> None:
    """A flagged notebook earns no points: every grade is set to 0 and marked as graded."""
    row.flagged = True
    for grade in row.grades:
        if grade.auto_score is not None:
            grade.auto_score = 0.0
        if grade.needs_manual_grade or grade.manual_score is not None:
            grade.manual_score = 0.0
            grade.needs_manual_grade = False
