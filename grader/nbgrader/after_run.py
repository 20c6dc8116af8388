"""The course's steps of nbgrader's own autograde, on every path that grades.

``nbgrader autograde``, formgrader's Autograde button and ``NbGraderAPI.autograde`` all run the
preprocessors that ``nbgrader_config.py`` lists, in the kernel manager it names (the bubblewrap
sandbox, :class:`grader.nbgrader.kernels.SandboxedKernelManager`). Two steps of the course sit
there:

- :class:`LeaveNoLinks` (before the notebook runs and after): every symbolic link, device,
  pipe, socket and hard-linked file in the graded folder is removed, and so is the copy that
  nbgrader made of one in the submitted folder. nbgrader then sets the permissions of every file
  name in the folder with ``os.chmod``, which follows links: a link the student's code planted there
  to the gradebook or a source notebook would have made it read-only.
- :class:`VerifyPoints` (last): what ``course autograde`` does once nbgrader is done, for the
  paths that are plain nbgrader: the disk quota (:mod:`grader.shared.quota`), the trusted judge's
  verdicts (:mod:`grader.shared.verification`), the tampering scan (:mod:`grader.shared.tampering`),
  the rule that settles the points (:func:`grader.shared.verification.settle`) and the grading
  report's line (:mod:`grader.shared.report`). ``course autograde`` turns it off on its own command
  line (``--VerifyPoints.enabled=False``) because it does the same after nbgrader, with one judge
  for all its workers (:func:`grader.coordinator.grading.grade_one`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from grader.coordinator.grading import TIMED_OUT
from grader.coordinator.scratch import is_plain_file
from grader.shared import quota, records, report, tampering, verification
from grader.shared.limits import Limits
from grader.shared.notebooks import read_notebook
from grader.shared.paths import assignments
from grader.shared.report import Event


def _folders(config: object, resources: dict) -> tuple[Path, Path]:
    """The submitted and the autograded folder of the notebook being graded."""
    coursedir = CourseDirectory(config=config)
    info = resources["nbgrader"]
    student, assignment = info["student"], info["assignment"]
    submitted = coursedir.format_path(coursedir.submitted_directory, student, assignment)
    graded = coursedir.format_path(coursedir.autograded_directory, student, assignment)
    return Path(submitted), Path(graded)


def special_entries(folder: Path) -> list[Path]:
    """Every entry under ``folder`` that is neither a folder nor a plain file (links to folders are
    not entered)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not is_plain_file(path):
                found.append(path)
    return found


def remove_special_entries(submitted: Path, graded: Path) -> list[str]:
    """Remove from ``graded`` every special entry and every copy of one of ``submitted``; return
    their names relative to ``graded``."""
    removed = []
    targets = special_entries(graded) if graded.is_dir() else []
    if submitted.is_dir():
        targets += [graded / p.relative_to(submitted) for p in special_entries(submitted)]
    for path in targets:
        if os.path.lexists(path):
            os.unlink(path)
            removed.append(str(path.relative_to(graded)))
    return sorted(set(removed))


class LeaveNoLinks(NbGraderPreprocessor):
    """Remove links and other special files from the graded folder (see the module's text)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        submitted, graded = _folders(self.config, resources)
        removed = remove_special_entries(submitted, graded)
        if removed:
            self.log.warning("Removed from the graded folder (links or special files): %s", removed)
            resources.setdefault("course", {}).setdefault("removed", []).extend(removed)
        return nb, resources


class VerifyPoints(NbGraderPreprocessor):
    """Quota, judge, tampering scan and report line of one graded notebook (plain nbgrader)."""

    enabled = Bool(
        True,
        help="Verify here. `course autograde` sets False: it does the same after nbgrader.",
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        if not self.enabled:
            return nb, resources
        info, course = resources["nbgrader"], resources.get("course", {})
        assignment, student, name = info["assignment"], info["student"], info["notebook"]
        root = Path(CourseDirectory(config=self.config).root)
        folder = _folders(self.config, resources)[1]
        disk_mb = Limits(config=self.config).disk_mb
        over = quota.enforce(folder, disk_mb, [f"{name}.ipynb"])
        checked = self._judged(assignment, int(course.get("seed", 0)), folder, name)
        if checked is not None:  # for the class report (course report)
            records.add_notebook(root, assignment, student, name, checked)
        source = read_notebook(root / "source" / assignment / f"{name}.ipynb")
        scanned = tampering.scan_notebook(nb, source, assignment, assignments(root))
        with Gradebook(info["db_url"]) as gb:
            row = gb.find_submission_notebook(name, assignment, student)
            reasons = verification.settle(row, scanned, checked)
            gb.db.commit()
            points, max_points = row.score, row.max_score
        status = "flagged" if reasons else _status(course, over)
        notes = [*reasons, course.get("stopped", ""), over]
        detail = "; ".join(n for n in notes if n)
        report.update(root, [Event(assignment, student, name, status, points, max_points, detail)])
        return nb, resources

    def _judged(
        self, assignment: str, seed: int, folder: Path, name: str
    ) -> verification.Verification | None:
        """The judge's verdicts on this notebook (None: the assignment is not verified)."""
        if not seed:
            return None
        path = verification.observations_file(folder, name)
        judge = verification.Judge()
        try:
            return judge.verify(assignment, seed, path)
        finally:
            judge.close()
            for observed in folder.glob(f"{name}{verification.SUFFIX}*"):  # and the log
                observed.unlink()


def _status(course: dict, over: str) -> str:
    """The report's status of a notebook that keeps its points."""
    if course.get("stopped"):
        return TIMED_OUT
    return quota.STATUS if over else "graded"
