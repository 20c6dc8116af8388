"""nbgrader preprocessors of the course (configured in nbgrader_config.py)."""

from __future__ import annotations

import re

from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor

REMOVED = "a second copy of cell {} was removed before grading"
# nbgrader logs it as "[AutogradeApp | WARNING] a second copy of cell ID was removed ..."
_REMOVED_LINE = re.compile(
    r"WARNING\] (" + re.escape(REMOVED).replace(r"\{\}", "(?:.+)") + r")$", re.M
)


def removed_copies(log: str) -> list[str]:
    """The notes :class:`DropDuplicateCells` logged in the output of ``nbgrader autograde``."""
    return list(dict.fromkeys(match.group(1) for match in _REMOVED_LINE.finditer(log)))


class DropDuplicateCells(NbGraderPreprocessor):
    """Keep the first cell of each grade_id and remove the later copies (replaces DeduplicateIds).

    A student who copies a graded cell (a test cell, say) hands in two cells with one grade_id.
    nbgrader's ``DeduplicateIds`` keeps the last copy and sets the nbgrader metadata of the
    earlier ones to ``{}``. That empty dict has no ``schema_version``, so the next sanitizing
    step, ``CheckCellMetadata``, raises ``SchemaTooOldError`` and nbgrader gives up on the
    whole submission ("One or more notebooks in the assignment use an old version of the
    nbgrader metadata format ... nbgrader update ."): no cell is graded, and the message blames
    the course's files. Were the metadata removed instead, the earlier copy would still run as a
    plain cell, with whatever code the student left in it.

    This preprocessor removes every later copy before nbgrader restores the course's cells
    (``OverwriteCells``), so the submission is graded as if the copy had never been made, and
    logs one warning per removed cell (:data:`REMOVED`), which :mod:`grader.sandbox` reads back
    from nbgrader's output for the grading report. Every cell with a grade_id counts, whatever
    its other flags say: ``OverwriteCells`` restores any cell that has one.
    """

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        seen: set[str] = set()
        kept = []
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id is not None and grade_id in seen:
                self.log.warning(REMOVED.format(grade_id))
                continue
            if grade_id is not None:
                seen.add(grade_id)
            kept.append(cell)
        nb.cells = kept
        return nb, resources


DIED = "the kernel died while cell {} ran; the cells before it keep their points"
NOT_RUN = (
    "not run: the notebook's kernel died in an earlier cell (os._exit, a crash or the memory "
    "limit), so this test earns nothing"
)
_DIED_LINE = re.compile(r"WARNING\] (" + re.escape(DIED).replace(r"\{\}", "(?:.+)") + r")$", re.M)


def kernel_deaths(log: str) -> list[str]:
    """The notes :class:`ExecuteKeepingPoints` logged in the output of ``nbgrader autograde``."""
    return [match.group(1) for match in _DIED_LINE.finditer(log)]


class ExecuteKeepingPoints(Execute):
    """nbgrader's ``Execute``, except that a kernel that dies does not cost the cells that ran.

    When the kernel dies (``os._exit``, a crash, the memory limit), nbclient raises
    ``DeadKernelError`` and nbgrader gives up on the whole notebook: no cell is graded. Here the
    notebook is kept as far as it ran: the cell that was running gets an error output, every
    later test cell gets one too (a test cell without an error output would earn its points),
    and grading goes on with what ran. One warning is logged (:data:`DIED`) for the report.
    """

    _running: int | None = None

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple:
        if cell.cell_type == "code":
            self._running = index  # the cell that was running if the kernel dies now
        return super().preprocess_cell(cell, resources, index)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None) -> tuple[NotebookNode, dict]:
        try:
            return super().preprocess(nb, resources, km=km)
        except DeadKernelError:
            cells = self.nb.cells
            died = self._running if self._running is not None else 0
            name = cells[died].get("metadata", {}).get("nbgrader", {}).get("grade_id", died)
            self.log.warning(DIED.format(name))
            cells[died].setdefault("outputs", []).append(
                _error("DeadKernelError", "the kernel died in this cell")
            )
            for cell in cells[died + 1 :]:
                if cell.cell_type == "code" and utils.is_grade(cell):
                    cell.outputs = [_error("NotRun", NOT_RUN)]
            return self.nb, self.resources


def _error(name: str, message: str) -> NotebookNode:
    return NotebookNode(
        output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"]
    )
