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
  paths that are plain nbgrader: a judge's verdicts for this notebook
  (:func:`grader.finish.judge_alone`), the disk quota of its folder (:mod:`grader.quota`), then
  the rule after a run that both paths call (:func:`grader.finish.finish_notebook`: tampering
  scan, settled points, the report's line), written to the grading report at once
  (:mod:`grader.report`).
  ``course autograde`` turns it off on its own command line (``--VerifyPoints.enabled=False``)
  because it calls the same rule after nbgrader, with one judge for all its workers.

This module runs in nbgrader's process: it imports none of the coordinator's modules.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from grader import quota, records, report
from grader.finish import finish_notebook, judge_alone
from grader.limits import Limits
from grader.paths import is_plain_file


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
        checked = judge_alone(assignment, int(course.get("seed", 0)), folder, name)
        if checked is not None:  # for the class report (course report)
            records.add_notebook(root, assignment, student, name, checked)
        # After the judge, as on the `course` path: the observations are read and gone, so the
        # quota neither counts them nor removes them before they are read.
        over = quota.enforce(folder, disk_mb, [f"{name}.ipynb"])
        stopped = course.get("stopped", "")  # this notebook's run: grader.preprocessors
        event = finish_notebook(
            info["db_url"], root, assignment, student, name, nb,
            verdict=checked, over=over, stopped=bool(stopped), note=stopped,
        )  # fmt: skip
        report.update(root, [event])
        return nb, resources
