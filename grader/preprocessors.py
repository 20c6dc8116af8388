"""nbgrader preprocessors of the course (configured in nbgrader_config.py).

Each says what it did in the notes file (:class:`Notes`), which the grader names on nbgrader's
command line (``--Notes.path=...``, in the scratch course, where the kernel cannot write) and
reads back for the grading report (:func:`read_notes`); each also logs it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer, Unicode
from traitlets.config import Configurable

from grader.verification import observations_file

REMOVED = "a second copy of cell {} was removed before grading"
KINDS = ("removed", "died")  # the kinds of notes, in the order the report gives them


class Notes(Configurable):
    """The notes file of one ``nbgrader autograde`` run: JSON, kind -> notes in the order made."""

    path = Unicode("", help="Where the course's preprocessors write their notes ('': none).").tag(
        config=True
    )

    def add(self, kind: str, note: str) -> None:
        """Append ``note`` under ``kind`` (one of :data:`KINDS`)."""
        if not self.path:
            return
        file = Path(self.path)
        notes = json.loads(file.read_text()) if file.is_file() else {}
        notes.setdefault(kind, []).append(note)
        file.write_text(json.dumps(notes))


def read_notes(path: Path) -> list[str]:
    """The notes at ``path`` for the report: the removed copies (each once), then the kernels
    that died (empty without a file)."""
    notes = json.loads(path.read_text()) if path.is_file() else {}
    removed = list(dict.fromkeys(notes.get("removed", [])))
    return removed + list(notes.get("died", []))


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
    notes one line per removed cell (:data:`REMOVED`) for the grading report. Every cell with a
    grade_id counts, whatever its other flags say: ``OverwriteCells`` restores any cell that has
    one.
    """

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        seen: set[str] = set()
        kept = []
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id is not None and grade_id in seen:
                self.log.warning(REMOVED.format(grade_id))
                Notes(parent=self).add("removed", REMOVED.format(grade_id))
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


class ExecuteKeepingPoints(Execute):
    """nbgrader's ``Execute``, except that a kernel that dies does not cost the cells that ran,
    and that the student's code is observed for the trusted judge after the last cell.

    When the kernel dies (``os._exit``, a crash, the memory limit), nbclient raises
    ``DeadKernelError`` and nbgrader gives up on the whole notebook: no cell is graded. Here the
    notebook is kept as far as it ran: the cell that was running gets an error output, every
    later test cell gets one too (a test cell without an error output would earn its points),
    and grading goes on with what ran. One note is made (:data:`DIED`) for the report.

    With :attr:`verification_seed` set (the grader sets it per submission), the kernel then runs
    :func:`course.verify.observe` (:mod:`grader.verification`); if the kernel died, a fresh one
    first re-runs the code cells that are not tests, up to the one that killed it.
    """

    verification_seed = Integer(
        0, help="Seed of the trusted verification's inputs (0: no verification)."
    ).tag(config=True)

    _running: int | None = None

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple:
        if cell.cell_type == "code":
            self._running = index  # the cell that was running if the kernel dies now
        return super().preprocess_cell(cell, resources, index)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None) -> tuple[NotebookNode, dict]:
        # nbconvert's ExecutePreprocessor.preprocess, with the observation before the kernel
        # stops and the dead kernel handled.
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        try:
            with self.setup_kernel():
                info = self.wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                for index, cell in enumerate(self.nb.cells):
                    self.preprocess_cell(cell, resources, index)
                self._observe()
        except DeadKernelError:
            self._keep_what_ran()
        self.set_widgets_metadata()
        return self.nb, self.resources

    def _keep_what_ran(self) -> None:
        cells = self.nb.cells
        died = self._running if self._running is not None else 0
        name = cells[died].get("metadata", {}).get("nbgrader", {}).get("grade_id", died)
        self.log.warning(DIED.format(name))
        Notes(parent=self).add("died", DIED.format(name))
        cells[died].setdefault("outputs", []).append(
            _error("DeadKernelError", "the kernel died in this cell")
        )
        for cell in cells[died + 1 :]:
            if cell.cell_type == "code" and utils.is_grade(cell):
                cell.outputs = [_error("NotRun", NOT_RUN)]
        self._observe_in_fresh_kernel(cells[:died])

    def _observe(self) -> None:
        """Run the course's observation in the current kernel (see the class docstring)."""
        if not self.verification_seed:
            return
        info = self.resources.get("nbgrader", {})
        folder = self.resources.get("metadata", {}).get("path") or os.getcwd()
        path = observations_file(Path(folder).absolute(), info.get("notebook", "notebook"))
        code = (
            "import course.verify as _course_verify\n"
            f"_course_verify.observe({info.get('assignment')!r}, {self.verification_seed}, "
            f"{str(path)!r})"
        )
        try:
            self._run_aside([code])
        except Exception as error:  # noqa: BLE001 - no observations: the grader flags points
            self.log.warning("the observation for the trusted check failed: %s", error)

    def _observe_in_fresh_kernel(self, before: list[NotebookNode]) -> None:
        """Observe after a dead kernel: a new kernel re-runs the cells that are not tests."""
        if not self.verification_seed:
            return
        self.km = self.kc = None
        code = [c.source for c in before if c.cell_type == "code" and not utils.is_grade(c)]
        try:
            with self.setup_kernel():
                self._run_aside(code)
                self._observe()
        except Exception as error:  # noqa: BLE001 - no observations: the grader flags points
            self.log.warning("the trusted check could not run after the kernel died: %s", error)

    def _run_aside(self, sources: list[str]) -> None:
        """Run code in the kernel without touching the graded notebook (its own scratch copy)."""
        graded = self.nb
        self.nb = NotebookNode(graded.copy())
        self.nb.cells = [
            NotebookNode(cell_type="code", source=source, metadata={}, outputs=[])
            for source in sources
        ]
        try:
            for index, cell in enumerate(self.nb.cells):
                self.execute_cell(cell, index, store_history=False)
        finally:
            self.nb = graded


def _error(name: str, message: str) -> NotebookNode:
    return NotebookNode(
        output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"]
    )
