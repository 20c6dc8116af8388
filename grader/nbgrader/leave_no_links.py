"""No link or special file in a graded folder (an nbgrader step, before the notebook runs and after,
on every path that grades: nbgrader_config.py names it).

Every symbolic link, device, pipe, socket and hard-linked file in the graded folder is removed, and
so is the copy that nbgrader made of one in the submitted folder. nbgrader then sets the permissions
of every file name in the folder with ``os.chmod``, which follows links: a link the student's code
planted there to the gradebook or a source notebook would have made it read-only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nbformat import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.shared.paths import is_plain_file


def graded_folders(config: object, resources: dict) -> tuple[Path, Path]:
    """The submitted and the autograded folder of the notebook being graded."""
    coursedir = CourseDirectory(config=config)
    info = resources["nbgrader"]
    student, assignment = info["student"], info["assignment"]
    submitted = coursedir.format_path(coursedir.submitted_directory, student, assignment)
    graded = coursedir.format_path(coursedir.autograded_directory, student, assignment)
    return Path(submitted), Path(graded)


def special_entries(folder: Path) -> list[Path]:
    """Every entry under ``folder`` that is neither a folder nor a plain file (links to folders are
    not entered)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if not is_plain_file(path):
                found.append(path)
    return found


def remove_special_entries(submitted: Path, graded: Path) -> list[str]:
    """Remove from ``graded`` every special entry and every copy of one of ``submitted``; return
    their names relative to ``graded``."""
    removed = []
    targets = special_entries(graded) if graded.is_dir() else []
    if submitted.is_dir():
        targets += [graded / p.relative_to(submitted) for p in special_entries(submitted)]
    for path in targets:
        if os.path.lexists(path):
            os.unlink(path)
            removed.append(str(path.relative_to(graded)))
    return sorted(set(removed))


class LeaveNoLinks(NbGraderPreprocessor):
    """Remove links and other special files from the graded folder (see the module's text)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        submitted, graded = graded_folders(self.config, resources)
        removed = remove_special_entries(submitted, graded)
        if removed:
            self.log.warning("Removed from the graded folder (links or special files): %s", removed)
            resources.setdefault("course", {}).setdefault("removed", []).extend(removed)
        return nb, resources
