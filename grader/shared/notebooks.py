"""Reading notebook files: one clear line when a file is missing or not a notebook."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat import NotebookNode

from grader.shared.paths import CourseError


def read_notebook(path: Path) -> NotebookNode:
    """Read a notebook, or fail with one clear line if it is missing or not a notebook."""
    if not path.is_file():
        raise CourseError(f"no notebook at {path}")
    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as error:  # nbformat raises several kinds for broken JSON
        first_line = (
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        )
        raise CourseError(f"{path} is not a valid notebook ({first_line})") from None
