"""Sanitizing a submission: a second copy of a graded cell is removed before grading, the first kept
(nbgrader_config.py puts this in place of nbgrader's DeduplicateIds, which refuses the whole
notebook over one copied cell). Each removal goes into the notes file of the run
(:class:`grader.shared.notes.Notes`) for the grading report, and is logged.
"""

from __future__ import annotations

from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.shared.notes import Notes

REMOVED = "a second copy of cell {} was removed before grading"


class DropDuplicateCells(NbGraderPreprocessor):
    """Keep the first cell of each grade_id and remove the later copies (replaces DeduplicateIds).

    A student who copies a graded cell (a test cell, say) hands in two cells with one grade_id.
    nbgrader's ``DeduplicateIds`` keeps the last copy and sets the nbgrader metadata of the earlier
    ones to ``{}``. That empty dict has no ``schema_version``, so the next sanitizing step,
    ``CheckCellMetadata``, raises ``SchemaTooOldError`` and nbgrader gives up on the whole
    submission ("One or more notebooks in the assignment use an old version of the nbgrader metadata
    format ... nbgrader update ."): no cell is graded, and the message blames the course's files.
    Were the metadata removed instead, the earlier copy would still run as a plain cell, with
    whatever code the student left in it.

    This preprocessor removes every later copy before nbgrader restores the course's cells
    (``OverwriteCells``), so the submission is graded as if the copy had never been made, and notes
    one line per removed cell (:data:`REMOVED`) for the grading report. Every cell with a grade_id
    counts, whatever its other flags say: ``OverwriteCells`` restores any cell that has one.
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
