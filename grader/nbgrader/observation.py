"""The grader's side of the kernel's observation for the trusted judge.

After a notebook's last cell, :class:`grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints`
asks the kernel to observe the student's code (:func:`course.verify.observe`, with the code of
:func:`course.contract.observe_code`): the kernel calls it on inputs drawn from the grader's
seed and saves what it returned next to the notebook, for the judge
(:mod:`grader.shared.verification`).
:class:`KernelObservation` drives that:

- in the notebook's own kernel (:meth:`KernelObservation.in_this_kernel`);
- when the kernel died in a cell, in a fresh kernel that first re-runs the code cells that are
  not tests, up to the one that killed it (:meth:`KernelObservation.in_fresh_kernels`);
- when an item of the observation killed the kernel, the kernel's log names it
  (:func:`course.contract.read_log`): a fresh kernel re-runs the code cells and observes again, that
  item counted as failed, at most ``observation_restarts`` times and only while the submission's
  deadline leaves time, so that one item costs that item only
  (:meth:`KernelObservation.after_death`).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute

from course import contract
from grader.nbgrader import processes

OBSERVATION_DIED = (
    "the kernel died while the trusted check observed {}: that test counts as failed, the others "
    "were observed in a fresh kernel"
)
KILLED_ITEM = (
    "KernelDied: the kernel died or was stopped while this was observed (os._exit, a crash, the "
    "memory limit, or a loop that ignored the interrupt)"
)
NOT_OBSERVED = "NotRun: the test did not run in the notebook (its kernel died or was stopped)"
INTERRUPTED_ITEM = "KeyboardInterrupt: ran past the time limit while it was observed"
NO_TIME = (
    "no time was left within the submission's time limit to run the trusted check in a fresh "
    "kernel: the points earned could not be verified"
)
LOG_BYTES = 64 * 1024  # the most of the log the grader reads


class KernelObservation:
    """The observation of one graded notebook, run through ``client``'s kernels (see the module's
    text); ``seed`` 0: nothing is observed."""

    def __init__(
        self,
        client: Execute,  # grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints
        path: Path,
        seed: int,
        note: Callable[[str, str], None] = lambda kind, note: None,
    ) -> None:
        self.client = client
        self.path = path
        self.seed = seed
        self._note = note  # a note for the report: (kind, text)
        self.failed: dict[str, str] = {}  # items not called: saved as errors with these reasons

    def not_observed(self, tests: list[NotebookNode]) -> None:
        """The items of these test cells are not called (their cells did not run)."""
        for cell in tests:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id:
                self.failed[str(grade_id)] = NOT_OBSERVED

    def in_this_kernel(self) -> bool:
        """Observe in the client's current kernel. False when the kernel died while observing (its
        log names the item); True otherwise (observed, or no observations)."""
        if not self.seed:
            return True
        info = self.client.resources.get("nbgrader", {})
        assignment = str(info.get("assignment"))
        code = contract.observe_code(assignment, self.seed, str(self.path), self.failed)
        try:
            self.run_aside([code])
        except DeadKernelError:
            return False
        except Exception as error:  # noqa: BLE001 - no observations: the grader flags points
            self.client.log.warning("the observation for the trusted check failed: %s", error)
        return True

    def after_death(self, cells: list[NotebookNode], seconds: float) -> None:
        """An item of the observation killed the kernel: observe the others in fresh kernels (or,
        when the log names no item, leave no observations: every point is checked)."""
        if self.learn_from_log():
            self.in_fresh_kernels(cells, seconds)
        else:
            self.path.unlink(missing_ok=True)

    def in_fresh_kernels(self, before: list[NotebookNode], seconds: float) -> None:
        """Observe in fresh kernels, each re-running the code cells of ``before`` that are not tests
        (``seconds``: about what that takes)."""
        if not self.seed:
            return
        code = [c.source for c in before if c.cell_type == "code" and not utils.is_grade(c)]
        client, deadline = self.client, self.client.deadline
        for _attempt in range(client.observation_restarts + 1):
            if deadline and time.time() + max(seconds, 10.0) > deadline:
                self._note("died", NO_TIME)
                break
            self.path.unlink(missing_ok=True)  # only observations of this kernel are read
            Path(contract.log_path(self.path)).unlink(missing_ok=True)
            client.km = client.kc = None
            start = time.monotonic()
            try:
                with client.setup_kernel():
                    processes.watch(client)
                    self.run_aside(code)
                    if self.in_this_kernel():
                        return
            except DeadKernelError:
                pass  # the kernel died in the notebook's code: no observation
            except Exception as error:  # noqa: BLE001 - no observations: the grader flags points
                client.log.warning(
                    "the trusted check could not run after the kernel died: %s", error
                )
                return
            seconds = time.monotonic() - start
            if not self.learn_from_log():
                break
        self.path.unlink(missing_ok=True)  # no complete observation: every point is checked

    def learn_from_log(self) -> bool:
        """Add the items that killed the kernel or were interrupted (the kernel's log) to the failed
        ones; False when the log names none that was not failed yet (no progress)."""
        log = read_log_file(Path(contract.log_path(self.path)))
        _started, interrupted, died_in = contract.read_log(log)
        new = {name: INTERRUPTED_ITEM for name in interrupted if name not in self.failed}
        if died_in and died_in not in self.failed:
            new[died_in] = KILLED_ITEM
        killed = [name for name, why in new.items() if why == KILLED_ITEM]
        if killed:
            self._note("died", OBSERVATION_DIED.format(killed[0]))
        self.failed.update(new)
        return bool(new)

    def run_aside(self, sources: list[str]) -> None:
        """Run code in the kernel without touching the graded notebook (its own scratch copy)."""
        client = self.client
        graded = client.nb
        client.nb = NotebookNode(graded.copy())
        client.nb.cells = [
            NotebookNode(cell_type="code", source=source, metadata={}, outputs=[])
            for source in sources
        ]
        try:
            for index, cell in enumerate(client.nb.cells):
                client.execute_cell(cell, index, store_history=False)
        finally:
            client.nb = graded


def read_log_file(path: Path) -> list[str]:
    """The lines of the kernel's observation log (a regular file, no link, its start only); the
    names are kept to plain characters (the kernel wrote them)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return []
        text = handle.read(LOG_BYTES).decode("ascii", errors="replace")
    lines = [line.strip() for line in text.splitlines()]
    return [line[:200] for line in lines if line and re.fullmatch(r"[\w .-]+", line)]
