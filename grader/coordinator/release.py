"""``course release``: the student notebooks generated from the instructor's.

``nbgrader generate_assignment`` writes ``release/ASSIGNMENT`` from ``source/ASSIGNMENT`` and
records the assignment in the gradebook; the first release of a changed notebook also records its
reference run, which the time limits of grading come from (:mod:`grader.shared.reference_run`).
"""

from __future__ import annotations

from pathlib import Path

from grader.books.nbgrader_api import check_result, nbgrader_api
from grader.shared import reference_run
from grader.shared.notebooks import read_notebook
from grader.shared.paths import require_assignment


def release(root: Path, assignment: str) -> Path:
    """Generate ``release/ASSIGNMENT`` from ``source/ASSIGNMENT``; record it in the gradebook."""
    require_assignment(root, assignment)
    result = nbgrader_api(root).generate_assignment(assignment, force=True, create=True)
    check_result(result, f"generating the release of '{assignment}'")
    if reference_run.current(root, assignment) is None:
        reference_run.record(root, assignment)  # the time limits of grading come from it
    return root / "release" / assignment


def notebook_points(path: Path) -> tuple[float, float, int]:
    """A source notebook's points: autograded (its test cells), graded by hand, and how many
    written answers carry the latter."""
    auto = manual = 0.0
    questions = 0
    for cell in read_notebook(path).cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade"):
            continue
        if cell.cell_type == "code" and not meta.get("solution"):
            auto += meta.get("points", 0)
        else:
            manual, questions = manual + meta.get("points", 0), questions + 1
    return auto, manual, questions


def worth(root: Path, assignment: str) -> str:
    """What ``assignment`` is worth, in words: its points, autograded and graded by hand."""
    auto = manual = questions = 0.0
    for path in sorted((root / "source" / assignment).glob("*.ipynb")):
        a, m, q = notebook_points(path)
        auto, manual, questions = auto + a, manual + m, questions + q
    return (
        f"{auto + manual:g} points: {auto:g} autograded, {manual:g} for {questions:g} written "
        "answers graded by hand"
    )
