"""``course publish DIR``: the public copy of a graded class, the part students may see.

A graded class keeps the course in a private repository (the solutions and hidden tests of
``source/``, the gradebook's neighbours) and gives students one public address (docs/term.md).
This writes that public part into ``DIR``, a work tree of the public repository: ``course/`` (the
package the notebooks import), ``student/`` (what pip builds from the repository,
``#subdirectory=student``), ``release/`` (the notebooks, for Colab's links) and the licence, and a
short README. Nothing else is copied: no ``source/``, ``grader/``, ``judge/``, ``demo/``, tests or
personal data. ``DIR``'s own files (``.git``) are kept; what an earlier publish wrote is replaced.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.shared.paths import CourseError

PUBLIC = ("course", "student", "release")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
README = """# {name}: the student part

The notebooks are in `release/`: open one on Colab (`release/colab.md`) or in JupyterLab; its first
cell installs what it needs. To install the course into your own Python:

    pip install "{line}" jupyterlab

Code: MIT. Course text: CC BY 4.0 (`student/LICENSE`).
"""


def publish(root: Path, target: Path, line: str) -> list[str]:
    """Write the public part of the course at ``root`` into ``target`` (its README names the
    install ``line``); return what was written."""
    target = target.resolve()
    if target == root or root in target.parents:
        raise CourseError(f"{target} is inside the course: give the public repository's folder")
    if (target / "source").exists() or (target / "nbgrader_config.py").exists():
        raise CourseError(f"{target} holds a course (source/ or nbgrader_config.py): not public")
    if not any((root / "release").glob("*/*.ipynb")):
        raise CourseError("release/ is empty: `course release` first")
    target.mkdir(parents=True, exist_ok=True)
    for name in PUBLIC:
        shutil.rmtree(target / name, ignore_errors=True)
        shutil.copytree(root / name, target / name, ignore=IGNORED)
    shutil.copy(root / "LICENSE", target / "LICENSE")
    (target / "README.md").write_text(README.format(name=root.name, line=line))
    return [*PUBLIC, "LICENSE", "README.md"]
