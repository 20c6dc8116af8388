"""The course folder: where it is, its configuration, what it holds.

The course is the folder with ``nbgrader_config.py`` and nbgrader's sub-folders (``source/``,
``release/``, ``submitted/``, ``autograded/``, ``feedback/``).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

CONFIG_FILE = "nbgrader_config.py"


class CourseError(Exception):
    """A problem the user can fix; the command line prints its message as one line."""


def find_root(start: Path | None = None) -> Path:
    """The nearest folder, from ``start`` (default: cwd) upwards, that holds nbgrader_config.py."""
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise CourseError(
        f"no {CONFIG_FILE} in {here} or its parents: run this command inside the course "
        "repository (or pass --root PATH)."
    )


def load_config(root: Path) -> Config:
    """nbgrader's configuration of the course, with the root folder fixed to ``root``."""
    config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    return config


def use_this_python() -> None:
    """Put this interpreter's folder first on PATH.

    nbgrader runs helper programs (``alembic``) and kernels by name; they must come from the same
    environment as the ``course`` command, not from whatever is first on PATH.
    """
    bin_dir = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if parts[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, *parts])


def assignments(root: Path) -> list[str]:
    """The assignments of the course: the folders of ``source/`` that hold notebooks."""
    source = root / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def require_assignment(root: Path, assignment: str) -> None:
    """Fail with a clear message if ``assignment`` is not one of the course's assignments."""
    known = assignments(root)
    if assignment not in known:
        raise CourseError(
            f"unknown assignment '{assignment}': the course has {', '.join(known) or 'none'} "
            f"(folders of {root / 'source'})."
        )


def submitted_students(root: Path, assignment: str) -> list[str]:
    """Students with a folder ``submitted/STUDENT/ASSIGNMENT``."""
    submitted = root / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())


def release_notebooks(root: Path, assignment: str) -> list[str]:
    """The notebook names (without .ipynb) of an assignment."""
    return sorted(p.stem for p in (root / "source" / assignment).glob("*.ipynb"))


def db_url(root: Path) -> str:
    """The gradebook's database URL from the course configuration."""
    return load_config(root).CourseDirectory.db_url


def is_plain_file(path: Path) -> bool:
    """A regular file with one name (no link, device, pipe, socket or second hard link)."""
    info = os.lstat(path)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1
