"""``course feedback``: nbgrader's feedback without the hidden tests.

The course's nbgrader_config.py puts :class:`HideHiddenTests` first in
``c.GenerateFeedback.preprocessors``, so formgrader's button and ``nbgrader generate_feedback`` hide
them too; ``course feedback`` refuses to run with a configuration that does not.

nbgrader's feedback shows every test cell as it was graded, hidden tests included, and a failed
hidden test shows its code again in the traceback. :class:`HideHiddenTests` removes the hidden
region from each cell and reduces the traceback of a cell that had one to its last line (the error's
name and message, which our checks write for the student).
"""

from __future__ import annotations

from pathlib import Path

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

from grader.books.nbgrader_api import check_result, nbgrader_api
from grader.shared.paths import CourseError, load_config, require_assignment

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


HIDING = "grader.coordinator.feedback.HideHiddenTests"


def hides_hidden_tests(root: Path) -> bool:
    """Whether the course's configuration puts :class:`HideHiddenTests` first in nbgrader's feedback
    (``c.GenerateFeedback.preprocessors`` in nbgrader_config.py), so that every way of making
    feedback (this command, ``nbgrader generate_feedback``, formgrader) hides them."""
    steps = load_config(root).GenerateFeedback.get("preprocessors", [])
    first = steps[0] if steps else None
    return first is HideHiddenTests or first == HIDING


def feedback(root: Path, assignment: str) -> Path:
    """Write ``feedback/STUDENT/ASSIGNMENT/*.html`` without hidden tests (cells or tracebacks)."""
    require_assignment(root, assignment)
    if not hides_hidden_tests(root):
        raise CourseError(
            f"{root / 'nbgrader_config.py'} does not hide the hidden tests from feedback: set "
            f'c.GenerateFeedback.preprocessors = ["{HIDING}", '
            '"nbgrader.preprocessors.GetGrades", '
            '"nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"] (as the course\'s own file does).'
        )
    api = nbgrader_api(root)
    result = api.generate_feedback(assignment, force=True)
    check_result(result, f"generating feedback for '{assignment}'")
    return root / "feedback"
