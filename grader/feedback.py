"""``course feedback``: nbgrader's feedback without the hidden tests.

nbgrader's feedback shows every test cell as it was graded, hidden tests included, and a failed
hidden test shows its code again in the traceback. :class:`HideHiddenTests` removes the hidden
region from each cell and reduces the traceback of a cell that had one to its last line (the
error's name and message, which our checks write for the student).
"""

from __future__ import annotations

from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets.config import Config

from grader.nbgrader_api import check_result, nbgrader_api
from grader.paths import require_assignment

HIDDEN_NOTE = "# (hidden tests were run here; their code is not shown)"


class HideHiddenTests(ClearHiddenTests):
    """Remove hidden test code from the sources and the tracebacks of the feedback."""

    def preprocess_cell(
        self, cell: NotebookNode, resources: dict, cell_index: int
    ) -> tuple[NotebookNode, dict]:
        if cell.cell_type != "code" or self.begin_test_delimeter not in cell.source:
            return cell, resources
        self._remove_hidden_test_region(cell)
        cell.source = cell.source.rstrip("\n") + "\n" + HIDDEN_NOTE
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [
                    f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                ]
        return cell, resources


def feedback_config() -> Config:
    """nbgrader configuration that puts :class:`HideHiddenTests` first in generate_feedback."""
    config = Config()
    config.GenerateFeedback.preprocessors = [HideHiddenTests, GetGrades, CSSHTMLHeaderPreprocessor]
    return config


def feedback(root: Path, assignment: str) -> Path:
    """Write ``feedback/STUDENT/ASSIGNMENT/*.html`` without hidden tests (cells or tracebacks)."""
    require_assignment(root, assignment)
    api = nbgrader_api(root, feedback_config())
    result = api.generate_feedback(assignment, force=True)
    check_result(result, f"generating feedback for '{assignment}'")
    return root / "feedback"
