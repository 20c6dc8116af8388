"""A term with a learning management system: one class per LMS, looked up by name.

Each LMS is a module of :mod:`grader.lms.systems` holding one subclass of
:class:`grader.lms.base.LmsSystem` (how its download names a student, a resubmission and
lateness; how its roster is matched; its gradebook export and import; its feedback upload). The
commands name an LMS (``--lms NAME``) and ask :func:`system` for it; nothing else knows which
LMSs exist. Adding an LMS is adding its module (CONTRIBUTING.md, "Adding an LMS").

- :mod:`grader.lms.base`: the abstract class, and what a download's file is (:class:`LmsFile`).
- :mod:`grader.lms.archive`: an LMS download (a zip) checked and extracted with nbgrader's
  ``ExtractorPlugin``.
- :mod:`grader.lms.collect`: ``course collect``, each student's notebook into ``submitted/``.
- :mod:`grader.lms.export`: ``course grades --lms``, nbgrader export plugins.
- :mod:`grader.lms.fill`: ``course grades --lms --gradebook``, the LMS's own gradebook export
  filled in for import as it is.
- :mod:`grader.lms.feedback_zip`: ``course feedback --zip``, the feedback named for upload.
- :mod:`grader.lms.worksheet`: Moodle's grading worksheet, in the teacher's language and zone.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the classes load nbgrader: imported once an LMS is chosen
    from grader.lms.base import LmsSystem

SYSTEMS = Path(__file__).with_name("systems")

LMS_NAMES = tuple(
    sorted(m.name for m in pkgutil.iter_modules([str(SYSTEMS)]) if not m.name.startswith("_"))
)
"""Every LMS, by the name of its module (read from the folder: nothing is imported)."""


def system(name: str) -> LmsSystem:
    """The LMS called ``name`` (its module's one :class:`~grader.lms.base.LmsSystem`)."""
    if name not in LMS_NAMES:
        from grader.shared.paths import CourseError  # lazy: `course --help` loads this module

        raise CourseError(f"no LMS {name!r}: choose one of {', '.join(LMS_NAMES)}.")
    from grader.lms.base import LmsSystem  # loads nbgrader: once an LMS is chosen

    module = importlib.import_module(f"grader.lms.systems.{name}")
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, LmsSystem)
        and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise TypeError(f"grader/lms/systems/{name}.py must define one LmsSystem, not {found}")
    return found[0]()
