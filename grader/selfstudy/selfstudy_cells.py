"""The self-study cells of a learner's own copy: put in when ``work/`` is made from ``release/``.

``tools/student_copy.py`` copies each release notebook into ``work/`` once (never over the
learner's file) and calls :func:`add_cells` on the new copy, in a clone only (``source/`` there):

- under each written question's answer cell, a code cell ``compare("GRADE_ID")``, the control
  that shows the model answer and the rubric once the cell holds an answer
  (:mod:`course.selfstudy`);
- at the end, a note, a button that runs every exercise's visible and hidden tests
  (``course check``), and the learner's progress (``course progress``).

The release's own last cell, the check of the visible tests (``tools/colab.py``), gives way to the
button, which runs the hidden tests too. ``release/`` (what a graded class gets) and ``source/``
stay as they are. The cells carry the tag
``self-study``; where there is no clone or while a notebook is graded they only say that written
answers are graded by the instructor.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

TAG = "self-study"
CHECK_MARKER = "# Check the whole notebook as grading runs it"  # tools/colab.py's last cell
NOTE = (
    "## Studying on your own\n\n"
    "Under each written question, **Compare with the model answer** shows the model answer and "
    "the rubric once your answer is written and saved; tick the points your answer makes (kept "
    "in a small file beside this notebook). The button below runs every exercise's visible "
    "**and hidden** tests on the saved notebook (as `course check` does in a terminal), and the "
    "cell after it shows your progress through A to H (`course progress`)."
)


def _cell(source: str, kind: str = "code") -> nbformat.NotebookNode:
    cell = new_code_cell(source) if kind == "code" else new_markdown_cell(source)
    cell.metadata["tags"] = [TAG]
    return cell


def _written(cell: nbformat.NotebookNode) -> str | None:
    """The grade id of a written answer's cell, else None."""
    meta = cell.metadata.get("nbgrader", {})
    return meta.get("grade_id") if meta.get("grade") and meta.get("solution") else None


def with_cells(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with the self-study cells (none added twice)."""
    if any(TAG in c.metadata.get("tags", []) for c in nb.cells):
        return nb
    cells, first = [], None
    for cell in nb.cells:
        cells.append(cell)
        grade_id = _written(cell)
        if grade_id and cell.cell_type == "markdown":
            cells.append(_cell(f'from course.selfstudy import compare\n\ncompare("{grade_id}");'))
        if first is None and cell.metadata.get("nbgrader", {}).get("grade"):
            first = cell.metadata.nbgrader["grade_id"]
    if first is None:
        return nb
    if cells and "".join(cells[-1].source).startswith(CHECK_MARKER):
        cells.pop()  # the release's check: the button below runs the hidden tests too
    cells += [
        _cell(NOTE, "markdown"),
        _cell(f'from course.selfstudy import check_button\n\ncheck_button("{first}");'),
        _cell("from course.selfstudy import progress\n\nprogress();"),
    ]
    nb.cells = cells
    return nb


def add_cells(path: Path) -> None:
    """Add the self-study cells to the notebook at ``path`` (a learner's new copy)."""
    nb = nbformat.read(str(path), as_version=4)
    nbformat.write(with_cells(nb), str(path))
