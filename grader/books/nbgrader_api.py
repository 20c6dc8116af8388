"""nbgrader's Python API on the course, for the steps that call nbgrader in this process (``course
release`` and ``course feedback``; autograding starts nbgrader processes instead).
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config

from grader.shared.paths import CourseError, load_config, use_this_python


def nbgrader_api(root: Path, extra: Config | None = None) -> NbGraderAPI:
    """nbgrader's Python API for the course at ``root`` (optionally with extra configuration)."""
    use_this_python()
    config = load_config(root)
    if extra is not None:
        config.merge(extra)
    Path(config.Exchange.root).mkdir(parents=True, exist_ok=True)
    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


def check_result(result: dict, what: str) -> None:
    """Raise :class:`CourseError` naming ``what`` unless an nbgrader API call succeeded."""
    if not result.get("success"):
        detail = (result.get("error") or result.get("log") or "").strip().splitlines()
        last = detail[-1] if detail else "no details"
        raise CourseError(f"{what} failed: {last}")
