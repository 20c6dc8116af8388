"""``course progress``: a self-learner's progress through A to H, from their own copy, ``work/``.

For each assignment: each exercise passed or not, visible and hidden tests (from the last
``course check`` of the learner's notebook, ``NOTEBOOK.check.json``; stale when an answer changed
since), each written question attempted (its cell no longer nbgrader's template) and self-marked
(``NOTEBOOK.marks.json``, the rubric points ticked under the question's "compare" control); then
what to do next. It only reads: the notebooks, those two files and ``source/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader import utils

from grader.selfstudy import selfcheck
from grader.shared.notebooks import read_notebook
from grader.shared.paths import CourseError, assignments

WORK = "work"
TEMPLATE = "YOUR ANSWER HERE"
_QUESTION = re.compile(r"\*\*Question (\d+)")


@dataclass
class Assignment:
    """What a learner has done of one assignment."""

    name: str
    notebook: Path
    exercises: dict[str, str] = field(default_factory=dict)  # name -> "passed" or what is wrong
    questions: dict[str, tuple[str, bool, str]] = field(default_factory=dict)  # id -> (label,
    # attempted, self-marked as "1.5 of 2" or "")
    started: bool = True
    stale: bool = False


def letter(assignment: str) -> str:
    """``a_masks`` -> ``A``."""
    return assignment.split("_")[0].upper()


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        return {}


def read_assignment(root: Path, assignment: str, notebook_name: str) -> Assignment:
    """The learner's state of one notebook of ``assignment`` (read only)."""
    path = root / WORK / assignment / notebook_name
    found = Assignment(assignment, path)
    source = read_notebook(root / "source" / assignment / notebook_name)
    tests = [
        c.metadata.nbgrader["grade_id"]
        for c in source.cells
        if utils.is_grade(c) and c.cell_type == "code" and not utils.is_solution(c)
    ]
    names = list(dict.fromkeys(selfcheck.exercise_of(t) for t in tests))
    if not path.is_file():
        found.started = False
        found.exercises = {n: "not started" for n in names}
        return found
    nb = read_notebook(path)
    checked = _json(selfcheck.record_path(path))
    found.stale = bool(checked) and checked.get("answers") != selfcheck.answers_digest(nb)
    results = checked.get("exercises", {})
    for name in names:
        entry = results.get(name)
        if entry is None:
            found.exercises[name] = "not checked"
        elif entry["visible"] and entry["hidden"]:
            found.exercises[name] = "passed"
        else:
            which = "visible" if not entry["visible"] else "hidden"
            found.exercises[name] = f"fails its {which} tests: {entry['message'].splitlines()[0]}"
    marks = _json(path.with_name(path.stem + ".marks.json"))
    label = ""
    for cell in nb.cells:
        match = _QUESTION.search(cell.source) if cell.cell_type == "markdown" else None
        label = f"question {match.group(1)}" if match else label
        if not (utils.is_grade(cell) and utils.is_solution(cell)):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        text = cell.source.strip()
        mark = marks.get(grade_id)
        marked = f"{mark['points']:g} of {mark['of']:g}" if mark else ""
        found.questions[grade_id] = (label or grade_id, bool(text) and text != TEMPLATE, marked)
    return found


def read_all(root: Path) -> list[Assignment]:
    """Every notebook of every assignment, in order (A to H)."""
    return [
        read_assignment(root, a, p.name)
        for a in assignments(root)
        for p in sorted((root / "source" / a).glob("*.ipynb"))
    ]


def next_step(done: list[Assignment], root: Path) -> str:
    """What to do next: the first thing left, in the course's order."""
    for a in done:
        where = a.notebook.relative_to(root)
        if not a.started:
            return f"start {letter(a.name)}: open {where} (`make lab` copies it into {WORK}/)"
        for name, state in a.exercises.items():
            if state.startswith("fails"):
                return f"{letter(a.name)}, exercise {name}: it {state}; then `course check {where}`"
        if a.stale or any(s == "not checked" for s in a.exercises.values()):
            return f"{letter(a.name)}: run every test, `course check {where}` (or its button)"
        for label, tried, marked in a.questions.values():
            if not tried:
                return f"{letter(a.name)}: answer {label} in {where}"
            if not marked:
                return f"{letter(a.name)}: compare your answer to {label} and tick the rubric"
    return "everything is done: every exercise passes and every written answer is self-marked"


def format_progress(root: Path, done: list[Assignment]) -> str:
    """The text ``course progress`` prints."""
    lines = [f"Your progress ({root / WORK}):"]
    for a in done:
        passed = sum(s == "passed" for s in a.exercises.values())
        tried = sum(t for _, t, _ in a.questions.values())
        marked = sum(bool(m) for _, _, m in a.questions.values())
        head = f"{letter(a.name)} {a.name}: "
        if not a.started:
            lines.append(head + "not started")
            continue
        lines.append(
            head + f"exercises {passed}/{len(a.exercises)} passed (visible and hidden tests), "
            f"written questions {tried}/{len(a.questions)} attempted, {marked} self-marked"
            + (" (answers changed since the last check)" if a.stale else "")
        )
        lines.append("    exercises: " + "; ".join(f"{n} {s}" for n, s in a.exercises.items()))
        states = [
            f"{label.removeprefix('question ')} "
            + (f"self-marked {mark}" if mark else "attempted" if tried_one else "not attempted")
            for label, tried_one, mark in a.questions.values()
        ]
        lines.append("    questions: " + "; ".join(states))
    lines.append(f"Next: {next_step(done, root)}")
    return "\n".join(lines)


def progress(root: Path) -> str:
    """``course progress``: the learner's progress in the clone at ``root``."""
    if not (root / "source").is_dir():
        raise CourseError(f"no source/ in {root}: progress needs a clone of the course")
    if not (root / WORK).is_dir():
        raise CourseError(f"no {WORK}/ in {root}: `make lab` makes your copy of the notebooks")
    return format_progress(root, read_all(root))
