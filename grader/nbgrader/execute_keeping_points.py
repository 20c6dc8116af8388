"""Running a submission (nbgrader's Execute, replaced in nbgrader_config.py): a kernel that dies
keeps the points of the cells that ran before it, a cell that runs away is stopped, each cell and
the whole notebook run within the limits derived from the reference run, the output of a cell is cut
at its limit, and the kernel is observed for the trusted judge after the last cell.

What it did goes into the notes file of the run (:class:`grader.shared.notes.Notes`), which the
grader names on nbgrader's command line and reads back for the grading report; it is logged too.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from queue import Empty

from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import ensure_async
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from traitlets import Float, Integer

from course import contract
from grader.nbgrader import processes
from grader.nbgrader.observation import KernelObservation
from grader.shared import limits, verification
from grader.shared.kernel_check import check_course_importable
from grader.shared.notes import Notes
from grader.shared.verification import observations_file

CUT = "[the grader kept the first {} KB of this cell's output; the rest was left out]\n"


DIED = "the kernel died while cell {} ran; the cells before it keep their points"
STOPPED = (
    "cell {} ran past the time limit ({} s) and ignored the interrupt: its kernel was stopped; the "
    "cells before it keep their points, the tests after it did not run (a loop that never ends?)"
)
OUT_OF_TIME = (
    "the submission's time limit was spent before cell {}: the cells before it keep their "
    "points (checked by the judge), the tests from it did not run"
)
NOT_RUN_OUT_OF_TIME = (
    "not run: the submission's time limit was spent before this cell, so this test earns nothing"
)
OBSERVATION_TIME = 30.0  # seconds kept at most before the deadline for the judge's observation
NOT_RUN = (
    "not run: the notebook's kernel died in an earlier cell (os._exit, a crash or the memory "
    "limit), so this test earns nothing"
)
NOT_RUN_STOPPED = (
    "not run: an earlier cell ran past the time limit and ignored the interrupt, so its kernel "
    "was stopped and this test earns nothing"
)


class RunawayCell(DeadKernelError):
    """A cell ran past its timeout and ignored the interrupt: its kernel was stopped."""


class ExecuteKeepingPoints(Execute):
    """nbgrader's ``Execute``, except that a kernel that dies or runs away does not cost the cells
    that ran, and that the student's code is observed for the trusted judge after the last cell.

    When the kernel dies (``os._exit``, a crash, the memory limit), nbclient raises
    ``DeadKernelError`` and nbgrader gives up on the whole notebook: no cell is graded. Here the
    notebook is kept as far as it ran: the cell that was running gets an error output, every later
    test cell gets one too (a test cell without an error output would earn its points), and grading
    goes on with what ran. One note is made (:data:`DIED`) for the report.

    A cell past its timeout is interrupted (nbclient; the next cell runs). One that ignores the
    interrupt (SIGINT ignored, a C loop) would hold the kernel until the submission's time limit
    stops the whole grading: here, after :attr:`interrupt_grace` seconds without a reply, its kernel
    is stopped and the notebook is kept as far as it ran, as for a dead kernel (:data:`STOPPED`,
    :class:`RunawayCell`).

    Then, with a seed (:attr:`verification_seed`), the student's code is observed for the trusted
    judge: :class:`grader.nbgrader.observation.KernelObservation` drives that, in this kernel or in
    fresh ones.

    This class re-implements nbconvert's ``ExecutePreprocessor.preprocess`` and overrides nbclient's
    ``_async_handle_timeout``; ``tests/test_verification.py`` pins both, so that the day either
    changes a test says what to re-read.
    """

    verification_seed = Integer(
        -1,
        help="Seed of the trusted verification's inputs: `course autograde` sets one per "
        "submission (0: no verification); -1, the default (plain `nbgrader autograde`, "
        "formgrader's button), draws one here when the assignment has a judge.",
    ).tag(config=True)
    interrupt_grace = Integer(
        10, help="Seconds an interrupted cell has to stop before its kernel is stopped."
    ).tag(config=True)
    observation_restarts = Integer(
        4, help="Fresh kernels the observation may use after items that killed the kernel."
    ).tag(config=True)
    cell_output_kb = Integer(
        1024,
        help="Output a cell may keep in the graded notebook, in KB (the largest of the course's "
        "own is under 100 KB): beyond it, what the cell shows is left out, said in the cell; its "
        "error, if it ends in one, is kept, shortened (a test cell with an error earns nothing).",
    ).tag(config=True)
    deadline = Float(
        0.0,
        help="Time (epoch seconds) the submission's time limit ends (0: from the limits of "
        "the assignment, counted from the notebook's start): no cell runs past it, and no "
        "fresh kernel is started for the observation unless it can finish before.",
    ).tag(config=True)

    _running: int | None = None
    _running_since = 0.0
    _seed = 0
    _interrupted = False  # the last cell was interrupted at its time limit
    _spent = False  # the last cell's limit was the time left before the deadline
    _cells_until = _until = 0.0  # epoch seconds: the notebook's cells, the current run
    _observation: KernelObservation
    _kept: dict[int, int]  # cell index -> characters of output shown (since its last clear)
    _cut: set[int]  # cells whose output was cut
    _graded: NotebookNode | None = None  # the notebook graded (the observation runs others)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple:
        if cell.cell_type == "code":
            self._running = index  # the cell that was running if the kernel dies now
            self._running_since = time.monotonic()
        return super().preprocess_cell(cell, resources, index)

    def _set_limits(self, resources: dict) -> None:
        """The seed and the time limits of this run, where the grader has not set them (plain
        `nbgrader autograde`): a seed when the assignment has a judge, the cell limit derived from
        the reference run (the configured timeout stays the ceiling) and the deadline of the
        submission's time limit. Each cell gets at most what is left before the deadline."""
        assignment = str(resources.get("nbgrader", {}).get("assignment", ""))
        self._seed = self.verification_seed
        if self._seed < 0:
            self._seed = verification.new_seed() if verification.has_judge(assignment) else 0
        root = Path(CourseDirectory(config=self.config).root)
        ceiling = limits.Limits(config=self.config).submission_seconds
        cell_ceiling = self.timeout or limits.DEFAULT_CELL_SECONDS
        times = limits.time_limits(root, assignment, cell_ceiling, ceiling)
        if times.cell_seconds:
            self.timeout = times.cell_seconds
        if not self.deadline:
            self.deadline = time.time() + times.submission_seconds
        # The notebook's cells stop a little before the deadline: the observation for the judge
        # still runs in the time kept, so a submission out of time keeps its points.
        kept = min(OBSERVATION_TIME, max(5.0, 0.1 * (self.deadline - time.time())))
        self._cells_until = self._until = self.deadline - kept
        self.timeout_func = self._cell_timeout
        resources.setdefault("course", {})["seed"] = self._seed

    def _cell_timeout(self, cell: NotebookNode) -> int | None:
        """The cell's time limit: the cell limit, or less when the deadline is nearer."""
        if not self._until:
            return self.timeout
        left = math.ceil(self._until - time.time())
        # A cell cut short by the deadline spends the submission's time: no cell runs after it.
        self._spent = not self.timeout or left < self.timeout
        return max(1, min(self.timeout, left)) if self.timeout else max(1, left)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None) -> tuple[NotebookNode, dict]:
        # nbconvert's ExecutePreprocessor.preprocess, with the observation before the kernel stops
        # and the dead kernel handled.
        NotebookClient.__init__(self, nb, km)
        self._graded = self.nb  # not a scratch notebook the observation runs aside
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._set_limits(resources)
        path = self._observation_path()
        self._observation = KernelObservation(self, path, self._seed, self._note)
        start = time.monotonic()
        observed = False
        try:
            with self.setup_kernel():
                info = self.wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                # Before any student cell: a kernel without the course grades nothing (the
                # submission "not graded", never a student's zero; grader/shared/kernel_check.py).
                check_course_importable(
                    self, str(resources.get("nbgrader", {}).get("assignment", ""))
                )
                processes.watch(self)  # what a cell leaves running is ended after it
                spent = False  # a cell was cut short by the deadline
                for index, cell in enumerate(self.nb.cells):
                    if cell.cell_type == "code" and (spent or time.time() >= self._cells_until):
                        self._out_of_time(index)
                        break
                    self.preprocess_cell(cell, resources, index)
                    spent = self._interrupted and self._spent
                    self._stop_runaways()
                self._until = self.deadline  # the observation may use the time kept for it
                # False: the kernel died in the observation
                observed = self._observation.in_this_kernel()
        except DeadKernelError as error:  # in a cell of the notebook (or before the first)
            self._until = self.deadline
            # A fresh kernel re-runs the cells before: about as long as they took.
            self._keep_what_ran(error, self._running_since - start)
            observed = True
        if not observed:  # an item of the observation killed the kernel: observe the others
            self._observation.after_death(self.nb.cells, time.monotonic() - start)
        self.set_widgets_metadata()
        return self.nb, self.resources

    async def _async_handle_timeout(
        self, timeout: int, cell: NotebookNode | None = None
    ) -> None | dict:
        """Interrupt the cell (nbclient); stop its kernel if it ignores the interrupt."""
        self._interrupted = True
        reply = await super()._async_handle_timeout(timeout, cell)
        if not self.interrupt_on_timeout:
            return reply
        end = time.monotonic() + self.interrupt_grace
        while (left := end - time.monotonic()) > 0:
            try:
                message = await ensure_async(self.kc.shell_channel.get_msg(timeout=left))
            except Empty:
                break
            if message.get("msg_type") == "execute_reply":  # the interrupted cell has stopped
                return reply or message
        self.log.error("The cell ignored the interrupt: stopping its kernel")
        try:
            await ensure_async(self.km.shutdown_kernel(now=True))
        finally:
            raise RunawayCell(f"a cell ran past {timeout} s and ignored the interrupt")

    def _keep_what_ran(self, error: DeadKernelError, seconds: float) -> None:
        cells = self.nb.cells
        died = self._running if self._running is not None else 0
        name = cells[died].get("metadata", {}).get("nbgrader", {}).get("grade_id", died)
        stopped = isinstance(error, RunawayCell)
        if stopped:
            note = STOPPED.format(name, self.timeout)
            self._stopped(note)
            error, not_run = _error("CellTimeoutError", note), NOT_RUN_STOPPED
        else:
            note = DIED.format(name)
            Notes(parent=self).add("died", note)
            error, not_run = _error("DeadKernelError", "the kernel died in this cell"), NOT_RUN
        self.log.warning(note)
        cells[died].setdefault("outputs", []).append(error)
        self._not_run(died, not_run, ran=True)
        self._observation.in_fresh_kernels(cells[:died], seconds)

    def _not_run(self, first: int, why: str, ran: bool) -> None:
        """The tests from cell ``first`` on earn nothing: those that did not run (from ``first``, or
        after it when it ``ran``) get an error output (``why``), and their items of the observation
        (one per test cell, by grade_id) are not called, so that the code that stopped the notebook
        does not stop the observation too."""
        tests = [c for c in self.nb.cells[first:] if c.cell_type == "code" and utils.is_grade(c)]
        for cell in tests:
            if not (ran and cell is self.nb.cells[first]):  # its own output says what happened
                cell.outputs = [_error("NotRun", why)]
        self._observation.not_observed(tests)

    def _stopped(self, note: str) -> None:
        """A note that the notebook stopped before its end (the report's TIMED OUT)."""
        self.resources.setdefault("course", {})["stopped"] = note
        Notes(parent=self).add("stopped", note)
        Notes(parent=self).add("stopped_in", self.resources.get("nbgrader", {}).get("notebook", ""))

    def _out_of_time(self, index: int) -> None:
        """The submission's time is spent before cell ``index``: it and the cells after it are not
        run; the observation runs in this kernel, in the time kept for it."""
        cell = self.nb.cells[index]
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", index)
        note = OUT_OF_TIME.format(name)
        self._stopped(note)
        self.log.warning(note)
        self._not_run(index, NOT_RUN_OUT_OF_TIME, ran=False)

    def _stop_runaways(self) -> None:
        """After a cell was interrupted at its time limit: the notebook's function that was running
        then is stopped at once wherever it is called again (course.verify)."""
        if not self._interrupted:
            return
        self._interrupted = False
        try:
            self._observation.run_aside([contract.stop_runaways_code()])
        except DeadKernelError:
            raise
        except Exception as error:  # noqa: BLE001 - the next cells run as they would have
            self.log.warning("could not stop the function that ran away: %s", error)

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self._kept, self._cut = {}, set()

    def output(
        self, outs: list[NotebookNode], msg: dict, display_id: str | None, cell_index: int
    ) -> NotebookNode | None:
        """nbclient's, within :attr:`cell_output_kb` a cell: a flood of output (an honest print in a
        loop, or a hostile one) would fill the graded notebook, the feedback and the grading
        process's memory. Beyond it a stream keeps its beginning, other outputs are left out (one
        that a later update names keeps its place, emptied), an error is kept; what goes to an
        Output widget counts too, and is left out beyond it."""
        if msg["msg_type"] == "stream" and self.nb is self._graded:
            self._processes_ended(msg["content"].get("text", ""), cell_index)
        limit = self.cell_output_kb * 1024
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:  # to an Output widget
            self._kept[cell_index] = self._kept.get(cell_index, 0) + len(str(msg["content"]))
            if self._kept[cell_index] > limit:
                return self._cut_here(outs, cell_index)
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not outs or outs[-1] is not out:
            return out
        before = self._kept.get(cell_index, 0) if len(outs) > 1 else 0  # 1: the first, or cleared
        self._kept[cell_index] = before + _size(out)
        if self._kept[cell_index] <= limit:
            return out
        if out.output_type == "error":  # kept, shortened: the cell must not pass
            out.evalue = str(out.get("evalue", ""))[:limit]
            out.traceback = [line[:limit] for line in out.get("traceback", [])[-20:]]
            return out
        if out.output_type == "stream" and before < limit:
            out.text = out.text[: limit - before]
        elif display_id:
            out.data, out.metadata = {"text/plain": ""}, {}
        else:
            outs.pop()
        return self._cut_here(outs, cell_index)

    def _cut_here(self, outs: list[NotebookNode], cell_index: int) -> None:
        """Say once, in the cell and in the report, that the cell's output was cut."""
        if cell_index in self._cut:
            return
        self._cut.add(cell_index)
        outs.append(
            NotebookNode(output_type="stream", name="stderr", text=CUT.format(self.cell_output_kb))
        )
        cell = self.nb.cells[cell_index].get("metadata", {}).get("nbgrader", {})
        name = cell.get("grade_id") or f"number {cell_index + 1}"
        self._note("cut", f"cell {name} showed more than {self.cell_output_kb} KB: cut")

    def _processes_ended(self, text: str, cell_index: int) -> None:
        """The kernel's hook said in this cell's output that it ended processes the cell left
        running (grader/nbgrader/processes.py): a note for the report, on every path."""
        found = processes.read_line(text)
        if not found:
            return
        cell = self.nb.cells[cell_index].get("metadata", {}).get("nbgrader", {})
        note = processes.note(cell.get("grade_id") or f"number {cell_index + 1}", *found)
        self.resources.setdefault("course", {}).setdefault("processes", []).append(note)
        self._note("processes", note)

    def _note(self, kind: str, note: str) -> None:
        """A note for the grading report (:class:`Notes`), logged too."""
        Notes(parent=self).add(kind, note)
        self.log.warning(note)

    def _observation_path(self) -> Path:
        info = self.resources.get("nbgrader", {})
        folder = self.resources.get("metadata", {}).get("path") or os.getcwd()
        return observations_file(Path(folder).absolute(), info.get("notebook", "notebook"))


def _size(output: NotebookNode) -> int:
    """About the characters ``output`` takes in the notebook."""
    data = output.get("data", {})
    values = [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", [])]
    values += [v if isinstance(v, str) else json.dumps(v) for v in data.values()]
    return sum(len(v) for v in values if isinstance(v, str))


def _error(name: str, message: str) -> NotebookNode:
    return NotebookNode(
        output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"]
    )
