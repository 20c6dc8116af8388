"""The hidden tests for a self-learner: ``course check`` on the learner's own copy, in a clone.

A clone of the course holds ``source/``, the instructor's notebooks, hidden tests included. When
``course check`` is given a learner's notebook (``work/ASSIGNMENT/NOTEBOOK.ipynb``, or any copy
outside nbgrader's folders) and the clone holds ``source/ASSIGNMENT/NOTEBOOK.ipynb``, each test
cell of the learner's copy is replaced by the instructor's (visible and hidden tests, as grading
does) before the run; the report shows each hidden test's message, never its code. It never runs
in a grading process (``NBGRADER_EXECUTION`` set: a graded kernel), and the student part alone
cannot run it (it has no ``source/`` and no grader).

The outcome is recorded beside the learner's notebook in ``NOTEBOOK.check.json``, which
``course progress`` reads: per exercise, visible and hidden passed or the message, and a digest
of the learner's answer cells, so that a record older than the answers is called stale.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from nbformat import NotebookNode
from nbgrader import utils

HIDDEN_MARK = "BEGIN HIDDEN TESTS"
# nbgrader's folders: a notebook there is checked as before (visible tests only).
NBGRADER_FOLDERS = {"source", "release", "submitted", "autograded", "feedback"}
RECORD_SUFFIX = ".check.json"
BY_INSTRUCTOR = "graded by the instructor."
BY_YOURSELF = "compare each with the model answer (the control under each question)."


@dataclass
class Clone:
    """Where a learner's notebook sits in a clone: the clone and the instructor's notebook."""

    root: Path
    source: Path


def graded_process() -> bool:
    """True inside a grading run (nbgrader's autograde or validate set NBGRADER_EXECUTION)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def find_clone(notebook: Path, cwd: Path | None = None) -> Clone | None:
    """The clone whose ``source/`` holds the instructor's copy of ``notebook``, or None.

    Searched from the notebook's folder upwards, then from ``cwd`` upwards. None for a notebook
    inside nbgrader's own folders (release, submissions, the sources), in a grading process, or
    where no ``source/ASSIGNMENT/NOTEBOOK.ipynb`` is found (the student part alone, a hub).
    """
    if graded_process():
        return None
    notebook = notebook.resolve()
    assignment, name = notebook.parent.name, notebook.name
    starts = [notebook.parent, (cwd or Path.cwd()).resolve()]
    for folder in [p for start in starts for p in [start, *start.parents]]:
        source = folder / "source" / assignment / name
        if source.is_file():
            inside = notebook.relative_to(folder).parts if notebook.is_relative_to(folder) else ()
            if inside and inside[0] in NBGRADER_FOLDERS:
                return None
            return Clone(folder, source)
    return None


def with_hidden_tests(nb: NotebookNode, source: NotebookNode) -> set[str]:
    """Put the instructor's test cells (visible and hidden tests) in the place of ``nb``'s, by
    grade id; return the ids of the cells that hold hidden tests."""
    tests = {
        c.metadata.nbgrader["grade_id"]: c
        for c in source.cells
        if utils.is_grade(c) and c.cell_type == "code" and not utils.is_solution(c)
    }
    hidden = set()
    for cell in nb.cells:
        if not utils.is_grade(cell) or cell.cell_type != "code" or utils.is_solution(cell):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        if grade_id in tests:
            cell.source = tests[grade_id].source
            if HIDDEN_MARK in cell.source:
                hidden.add(grade_id)
    return hidden


def exercise_of(grade_id: str) -> str:
    """``test_mask_hidden`` -> ``mask``: the exercise a test cell belongs to."""
    name = grade_id.removeprefix("test_")
    for suffix in ("_visible", "_hidden"):
        name = name.removesuffix(suffix)
    return name


def answers_digest(nb: NotebookNode) -> str:
    """A digest of the learner's code answer cells: it changes when an answer changes."""
    digest = hashlib.sha256()
    for cell in nb.cells:
        if utils.is_solution(cell) and cell.cell_type == "code":
            digest.update(cell.source.encode() + b"\0")
    return digest.hexdigest()[:16]


def exercises(reports: list, hidden: set[str]) -> dict[str, dict]:
    """Per exercise: whether its visible and its hidden tests passed, and the first message."""
    found: dict[str, dict] = {}
    for r in reports:
        if r.kind != "test":
            continue
        entry = found.setdefault(exercise_of(r.grade_id), {"visible": True, "hidden": True})
        part = "hidden" if r.grade_id in hidden else "visible"
        if r.message:
            entry[part] = False
            entry.setdefault("message", r.message)
    return found


def format_exercises(found: dict[str, dict]) -> list[str]:
    """The per-exercise lines ``course check`` prints for a self-learner."""
    lines = ["Per exercise (visible and hidden tests):"]
    for name, entry in found.items():
        if entry["visible"] and entry["hidden"]:
            lines.append(f"  {name}: passed")
            continue
        which = "visible" if not entry["visible"] else "hidden"
        lines.append(f"  {name}: fails its {which} tests: {entry['message'].splitlines()[0]}")
    return lines


def record_path(notebook: Path) -> Path:
    """The record of the last check, beside the notebook."""
    return notebook.with_name(notebook.stem + RECORD_SUFFIX)


def record(notebook: Path, nb: NotebookNode, found: dict[str, dict]) -> Path:
    """Write the outcome of a check beside the learner's notebook; return the file."""
    path = record_path(notebook)
    data = {"answers": answers_digest(nb), "exercises": found}
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
