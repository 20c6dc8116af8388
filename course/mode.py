"""Grading mode: long cells (training, timing sweeps) shrink while nbgrader grades.

nbgrader sets ``NBGRADER_EXECUTION`` to ``autograde`` while it grades and to ``validate`` while
it validates; ``course check`` uses ``validate`` too. ``COURSE_FAST=1`` forces the same short mode
by hand (useful on a slow laptop).
"""

from __future__ import annotations

import os


def under_nbgrader() -> bool:
    """True while nbgrader runs the notebook headless (autograde, validate, ``course check``)."""
    return os.environ.get("NBGRADER_EXECUTION", "") in {"autograde", "validate"}


def is_grading() -> bool:
    """True while a notebook runs under nbgrader (autograde, validate) or with COURSE_FAST=1."""
    return os.environ.get("COURSE_FAST") == "1" or under_nbgrader()


def pick(full: int, grading: int) -> int:
    """Return ``grading`` in grading mode and ``full`` otherwise (steps, epochs, sizes)."""
    return grading if is_grading() else full
