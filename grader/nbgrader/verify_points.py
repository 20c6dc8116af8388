"""The rule after a graded run, inside nbgrader's process, for the paths that are plain nbgrader
(``nbgrader autograde``, formgrader's Autograde button, ``NbGraderAPI.autograde``): the last step
of nbgrader_config.py's autograde steps.

What ``course autograde`` does once nbgrader is done: a judge's verdicts for this notebook
(:func:`grader.shared.finish.judge_alone`), the disk quota of its folder
(:mod:`grader.shared.quota`), then the rule after a run that both paths call
(:func:`grader.shared.finish.finish_notebook`: tampering scan, settled points, the report's line),
written to the grading report at once (:mod:`grader.shared.report`). ``course autograde`` turns it
off on its own command line (``--VerifyPoints.enabled=False``) because it calls the same rule after
nbgrader, with one judge for all its workers. Like every module of :mod:`grader.nbgrader`, it
imports none of the coordinator's.
"""

from __future__ import annotations

from pathlib import Path

from nbformat import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from grader.nbgrader.leave_no_links import graded_folders
from grader.shared import quota, records, report
from grader.shared.finish import finish_notebook, judge_alone
from grader.shared.limits import Limits


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
        folder = graded_folders(self.config, resources)[1]
        disk_mb = Limits(config=self.config).disk_mb
        checked = judge_alone(assignment, int(course.get("seed", 0)), folder, name)
        if checked is not None:  # for the class report (course report)
            records.add_notebook(root, assignment, student, name, checked)
        # After the judge, as on the `course` path: the observations are read and gone, so the quota
        # neither counts them nor removes them before they are read.
        over = quota.enforce(folder, disk_mb, [f"{name}.ipynb"])
        stopped = course.get("stopped", "")  # this notebook's run (execute_keeping_points.py)
        # then the processes its cells left running, as the `course` path's notes order them
        note = "; ".join(n for n in [stopped, *course.get("processes", [])] if n)
        event = finish_notebook(
            info["db_url"], root, assignment, student, name, nb,
            verdict=checked, over=over, stopped=bool(stopped), note=note,
        )  # fmt: skip
        report.update(root, [event])
        return nb, resources
