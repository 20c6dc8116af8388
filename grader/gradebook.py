"""The course gradebook on any database nbgrader supports, and the workers' private copies.

Each submission is graded by its own ``nbgrader autograde`` against a private sqlite gradebook
(:mod:`grader.sandbox`); its scores are then merged into the course gradebook
(:func:`grader.pipeline.copy_submission`). With an sqlite course gradebook the private copy is a
copy of its file. With a database server (``COURSE_DB=postgresql+psycopg2://...``) the grader
writes, once per run, a snapshot of the one assignment being graded (its notebooks and cells,
as ``course release`` recorded them) into an sqlite file that each worker copies: workers never
hold the database's credentials, and only the coordinator writes to the server.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from nbgrader.api import Gradebook


def sqlite_file(url: str) -> Path | None:
    """The file of an sqlite gradebook URL, or None for a database server."""
    prefix = "sqlite:///"
    return Path(url[len(prefix) :]) if url.startswith(prefix) else None


def snapshot(url: str, assignment: str, path: Path) -> Path:
    """Write to ``path`` an sqlite gradebook holding ``assignment`` as the gradebook at ``url``
    has it (notebooks, grade, solution, task and source cells); return ``path``."""
    path.unlink(missing_ok=True)
    with warnings.catch_warnings(), Gradebook(url) as src, Gradebook(f"sqlite:///{path}") as dst:
        warnings.simplefilter("ignore")  # nbgrader's harmless SQLAlchemy autoflush warnings
        original = src.find_assignment(assignment)
        dst.update_or_create_assignment(assignment, duedate=original.duedate)
        for notebook in original.notebooks:
            dst.update_or_create_notebook(notebook.name, assignment)
            graded = [(notebook.grade_cells, dst.update_or_create_grade_cell)]
            graded += [(notebook.task_cells, dst.update_or_create_task_cell)]
            for cells, create in graded:
                for cell in cells:
                    create(
                        cell.name, notebook.name, assignment,
                        max_score=cell.max_score, cell_type=cell.cell_type,
                    )  # fmt: skip
            for cell in notebook.solution_cells:
                dst.update_or_create_solution_cell(cell.name, notebook.name, assignment)
            for cell in notebook.source_cells:
                dst.update_or_create_source_cell(
                    cell.name, notebook.name, assignment,
                    cell_type=cell.cell_type, locked=cell.locked,
                    source=cell.source, checksum=cell.checksum,
                )  # fmt: skip
    return path
