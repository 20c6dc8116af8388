"""The scratch course one submission is graded in, made and removed by one context manager.

It holds only what ``nbgrader autograde`` needs for that student: the configuration, the student's
submitted folder and a private copy of the gradebook. No ``source/``, no course gradebook and no
other student's folder is beside it, so relative paths from the notebook reach nothing of the
course. The folder is removed when the ``with`` block ends, whatever happened;
:func:`remove_all` removes every one still open (an interrupted run).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.shared.paths import is_plain_file
from grader.shared.verification import SUFFIX

OPEN: set[Path] = set()  # scratch courses not yet removed


@contextmanager
def scratch_course(
    root: Path, assignment: str, student: str, gradebook: Path, parent: Path | None = None
) -> Iterator[Path]:
    """A scratch course holding ``student``'s submission of ``assignment`` and a copy of
    ``gradebook`` (as ``gradebook.db``), removed when the block ends. It is made in ``parent``
    (default: the temporary folder; a warm worker's folder, :mod:`grader.warm.pool`)."""
    folder = Path(tempfile.mkdtemp(prefix="course-grade-", dir=parent))
    OPEN.add(folder)
    try:
        shutil.copy(root / "nbgrader_config.py", folder)
        submitted = Path("submitted") / student / assignment
        copy_without_links(root / submitted, folder / submitted)  # never reads a link's target
        shutil.copyfile(gradebook, folder / "gradebook.db")
        for planted in (folder / "submitted").rglob(f"*{SUFFIX}*"):
            planted.unlink()  # only the kernel's own observations are read
        yield folder
    finally:
        _remove(folder)


def remove_all() -> None:
    """Remove every scratch course still open (grading was interrupted)."""
    for folder in list(OPEN):
        _remove(folder)


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    OPEN.discard(folder)


def copy_without_links(source: Path, target: Path) -> None:
    """Copy a folder that student code wrote into, leaving out every entry that is neither a folder
    nor a plain file (never opened, never followed)."""
    shutil.copytree(source, target, ignore=_special)


def _special(folder: str, names: list[str]) -> list[str]:
    paths = {name: Path(folder, name) for name in names}
    return [
        n for n, p in paths.items() if not (p.is_dir() and not p.is_symlink() or is_plain_file(p))
    ]
