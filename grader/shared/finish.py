"""The rule after a graded run, for one notebook, on every path that grades.

Two paths grade a submission: `course autograde` (:func:`grader.coordinator.grading.grade_one`, in
the coordinator's process, after its ``nbgrader autograde`` is done) and plain nbgrader (``nbgrader
autograde``, formgrader's Autograde button: :class:`grader.nbgrader.verify_points.VerifyPoints`,
inside nbgrader's process). Both call :func:`finish_notebook`, which holds the rule itself: the
tampering scan of the code that ran, the points the scan and the trusted judge's verdict let stand
(:func:`grader.shared.verification.settle`, written to the gradebook), and the report's line (its
status: flagged, else for review, else timed out, else over quota, else graded; its detail: the
reasons, then the run's note, the quota's words and the other notes, each left out when empty).

What differs between the paths is in the arguments, not here:

- the quota is enforced by the caller (:func:`grader.shared.quota.enforce`), once per submission
  folder on the `course` path (every notebook of the submission gets its words) and once per
  notebook on the plain path (nbgrader finishes one notebook at a time); ``over`` is its words;
- the verdict: one judge for every worker on the `course` path
  (:func:`grader.shared.verification.judge_notebooks`), one per notebook on the plain path
  (:func:`judge_alone`);
- ``stopped`` and ``note``: the run's notes, for the whole run on the `course` path (read from
  nbgrader's notes file), for this notebook on the plain path (nbgrader's resources);
- ``notes``: what only one path adds (`course autograde --unsafe-no-sandbox`'s warning);
- the report: the `course` path merges its lines with the student's gradebook
  (:func:`grader.coordinator.grading.merge`); the plain path writes its line at once.

This module imports only what both processes hold (the gradebook, the judge's client, the scan, the
quota's status, the report's line): nbgrader's process must not load the coordinator's modules
(``grader.coordinator.grading``, ``grader.coordinator.scratch``...).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.api import Gradebook

from grader.shared import quota, tampering, verification
from grader.shared.report import Event

# A notebook graded with the points of the cells that finished: a cell ran past the time limit and
# ignored the interrupt, so its kernel was stopped
# (grader.nbgrader.execute_keeping_points.RunawayCell).
TIMED_OUT = "timed out"
GRADED = "graded"
FLAGGED = "flagged"
# The kernel's and the judge's checks disagree on a statistical check only: points kept, an
# instructor asked to look (grader.shared.verification.REVIEW).
FOR_REVIEW = "for review"


def finish_notebook(
    url: str,
    root: Path,
    assignment: str,
    student: str,
    name: str,
    graded: NotebookNode | None,
    *,
    verdict: verification.Verification | None,
    over: str,
    stopped: bool,
    note: str,
    notes: Sequence[str] = (),
) -> Event:
    """Settle notebook ``name`` of ``student``'s submission in the gradebook at ``url`` and return
    its report line (not written: the caller writes it, see the module's text).

    ``graded``: the notebook as graded (None: nbgrader wrote none, nothing to scan); ``verdict``:
    the judge's (None: not verified); ``over``: the disk quota's words ("" within it); ``stopped``:
    a cell of this notebook ran away; ``note``: the run's words for the report; ``notes``: more
    words, after the others."""
    scanned = tampering.scan_against_source(root, assignment, name, graded) if graded else []
    with Gradebook(url) as gb:
        row = gb.find_submission_notebook(name, assignment, student)
        reasons = verification.settle(row, scanned, verdict)
        if reasons:  # settle changed the row only then
            gb.db.commit()
        points, max_points = row.score, row.max_score
    status = status_of(reasons, stopped, over)
    detail = "; ".join(n for n in [*reasons, note, over, *notes] if n)
    return Event(assignment, student, name, status, points, max_points, detail)


def status_of(reasons: Sequence[str], stopped: bool, over: str) -> str:
    """The report's status of a graded notebook: flagged (``reasons``) beats for review (reasons
    that all ask for a review) beats timed out (``stopped``) beats over quota (``over``) beats
    graded."""
    if any(not reason.startswith(verification.REVIEW) for reason in reasons):
        return FLAGGED
    if reasons:
        return FOR_REVIEW
    if stopped:
        return TIMED_OUT
    return quota.STATUS if over else GRADED


def judge_alone(
    assignment: str, seed: int, folder: Path, name: str
) -> verification.Verification | None:
    """The verdicts of a judge started for notebook ``name`` alone (the plain path: nbgrader's
    process has no judge of its own); None when ``seed`` is 0 (the assignment is not verified). The
    observations (and the kernel's log) are removed from ``folder`` afterwards."""
    if not seed:
        return None
    path = verification.observations_file(folder, name)
    judge = verification.Judge()
    try:
        return judge.verify(assignment, seed, path)
    finally:
        judge.close()
        for observed in folder.glob(f"{name}{verification.SUFFIX}*"):
            observed.unlink()
