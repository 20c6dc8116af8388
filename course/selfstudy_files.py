"""What the self-study controls read and write: the learner's notebook, the clone's model answers,
the self-marks beside the notebook.

Standard library only. A model answer and its rubric are read at run time from the instructor's
notebook, ``source/ASSIGNMENT/NOTEBOOK.ipynb`` of a clone of the course; this package holds none.
Where no clone is found (the student part alone, a JupyterHub class) or while the notebook is
graded, :func:`clone_source` answers None and the controls say that written answers are graded
by the instructor.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from course import mode

TEMPLATE = "YOUR ANSWER HERE"  # what nbgrader leaves in a written answer's cell
MARKS_SUFFIX = ".marks.json"
# Folders of nbgrader's pipeline: the controls are for the learner's own copy, not these.
NBGRADER_FOLDERS = {"source", "release", "submitted", "autograded", "feedback"}
# nbgrader's region markers (a line "### BEGIN ..." or "### END ..."), left out of a model answer.
_MARKER = re.compile(r"^\s*###\s+(BEGIN|END)\s+[A-Z ]+$", re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_RUBRIC = re.compile(r"\*\*Rubric[^*]*\*\*")
# A rubric item opens with its points: "0.5: ...", "(a) 1: ...", "1 (a): ...", "(a) 1 point: ...".
_ITEM = re.compile(
    r"(?:^|(?<=\s))(?:\([a-z]\)\s+)?(\d+(?:\.\d+)?)(?:\s+points?)?(?:\s+\([a-z]\))?:\s"
)


@dataclass
class Question:
    """A written question of the instructor's notebook: the model answer and the rubric."""

    grade_id: str
    points: float
    model: str  # markdown
    rubric: str  # the rubric's heading, e.g. "**Rubric (2 points).**"
    items: list[tuple[float, str]] = field(default_factory=list)  # (points, what earns them)


def learner_notebook(grade_id: str, folder: Path | None = None) -> Path | None:
    """The notebook this kernel runs: the one JupyterLab names (``JPY_SESSION_NAME``), else the
    notebook of the kernel's folder that holds the cell ``grade_id`` (newest first)."""
    named = os.environ.get("JPY_SESSION_NAME", "")
    if named.endswith(".ipynb") and Path(named).is_file():
        return Path(named).resolve()
    folder = folder or Path.cwd()
    for path in sorted(folder.glob("*.ipynb"), key=lambda p: -p.stat().st_mtime):
        if grade_id in _grade_ids(path):
            return path.resolve()
    return None


def _grade_ids(path: Path) -> set[str]:
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return set()
    return {c["metadata"].get("nbgrader", {}).get("grade_id", "") for c in cells}


def clone_source(notebook: Path) -> Path | None:
    """``source/ASSIGNMENT/NOTEBOOK.ipynb`` of the clone the learner's notebook sits in, or None
    (no clone; a notebook of nbgrader's own folders; a grading run)."""
    if mode.under_nbgrader():
        return None
    notebook = notebook.resolve()
    for folder in notebook.parents:
        source = folder / "source" / notebook.parent.name / notebook.name
        if source.is_file():
            inside = notebook.relative_to(folder).parts
            return None if inside[0] in NBGRADER_FOLDERS else source
    return None


def cell_text(path: Path, grade_id: str) -> str | None:
    """The saved text of the cell ``grade_id`` of a notebook, or None when it has none."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            source = cell["source"]
            return "".join(source) if isinstance(source, list) else source
    return None


def attempted(text: str | None) -> bool:
    """True when an answer cell holds an answer: neither empty nor nbgrader's template."""
    return bool(text and text.strip() and text.strip() != TEMPLATE)


def read_question(source: Path, grade_id: str) -> Question | None:
    """The model answer and rubric of the written question ``grade_id``, from the instructor's
    notebook; None when it has no such question."""
    for cell in json.loads(source.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade_id") == grade_id and meta.get("solution") and meta.get("grade"):
            text = "".join(cell["source"])
            return parse_answer(grade_id, float(meta.get("points", 0)), text)
    return None


def parse_answer(grade_id: str, points: float, text: str) -> Question:
    """Split an answer cell of the instructor's notebook into model answer, rubric, items."""
    text = _COMMENT.sub("", _MARKER.sub("", text)).strip()
    head = _RUBRIC.search(text)
    if head is None:
        return Question(grade_id, points, text, "", [(points, "the model answer's points")])
    model, body = text[: head.start()].strip(), text[head.end() :].strip()
    starts = list(_ITEM.finditer(body))
    ends = [m.start() for m in starts[1:]] + [len(body)] if starts else []
    items = [(float(m[1]), body[m.start() : end]) for m, end in zip(starts, ends, strict=True)]
    rubric = head.group(0)
    if len(items) < 2:  # a rubric that is not a list of points: one item, the whole
        items = [(points, body)]
    elif starts[0].start() > 0:  # words before the first item say what every item is about
        rubric += " " + body[: starts[0].start()].strip()
    return Question(grade_id, points, model, rubric, [(p, t.strip()) for p, t in items])


def marks_path(notebook: Path) -> Path:
    """The learner's self-marks: a small JSON file beside the notebook (never in it)."""
    return notebook.with_name(notebook.stem + MARKS_SUFFIX)


def read_marks(notebook: Path) -> dict[str, dict]:
    """Every self-mark of a notebook, by grade id: ``{"ticked": [...], "points": x, "of": y}``."""
    path = marks_path(notebook)
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        return {}


def save_marks(notebook: Path, question: Question, ticked: list[int]) -> float:
    """Keep the rubric items the learner ticked for ``question``; return the points they make
    (at most the question's)."""
    points = min(question.points, sum(question.items[i][0] for i in ticked))
    marks = read_marks(notebook)
    marks[question.grade_id] = {"ticked": sorted(ticked), "points": points, "of": question.points}
    marks_path(notebook).write_text(json.dumps(marks, indent=1, sort_keys=True) + "\n")
    return points
