"""``course report ASSIGNMENT``: the class at a glance, gathered from what grading kept.

What it reads (and never the text of an output): the gradebook (every cell's points, the written
answers graded by hand so far), ``grading_report.csv`` (flagged, timed out, over quota, not graded,
with the reason), the records of grading (:mod:`grader.shared.records`: each submission's time, and
the trusted judge's verdict and mistake key of every test cell), the release and the submitted
notebooks (which solution cells were left as given; the solution code compared by
:mod:`grader.report.similarity`). :mod:`grader.report.class_report_html` writes the page.

An *exercise* is a group of autograded test cells ``test_X_visible`` / ``test_X_hidden`` (the
course's naming, checked by ``tests/test_layout.py``'s notebooks) with the code solution cells
before it in the notebook.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import (
    Assignment,
    Gradebook,
    GradeCell,
    Notebook,
    SubmittedAssignment,
    SubmittedNotebook,
)
from nbgrader.api import Grade as GradeRow

from course import contract
from grader.books.gradebook import sqlite_file
from grader.coordinator import submission
from grader.report import similarity
from grader.shared import records, report
from grader.shared.notebooks import read_notebook
from grader.shared.paths import CourseError, db_url, release_notebooks, require_assignment

TEST_ID = re.compile(r"^(?:test_)?(?P<name>.+?)_(?P<kind>visible|hidden)$")
# Mistake keys that no check of the course named, and how the page calls them.
NOT_NAMED = {
    contract.RAISED: "the code raised an error",
    contract.UNNAMED: "a plain assertion failed",
    contract.BROKEN: "the observations had the wrong kind or shape",
}


@dataclass
class Exercise:
    """The test cells of one exercise and the solution cells they test."""

    name: str
    notebook: str
    visible: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    solutions: list[str] = field(default_factory=list)

    @property
    def cells(self) -> list[str]:
        return self.visible + self.hidden


@dataclass
class Mistake:
    """One mistake key in one exercise: its message as the student saw it, and who made it."""

    key: str
    message: str
    named: bool
    students: set[str] = field(default_factory=set)


@dataclass
class ClassData:
    """Everything the page shows, gathered for one assignment."""

    assignment: str
    students: list[str]
    exercises: list[Exercise]
    # (student, notebook, grade id) -> (points, max points, needs a manual grade, cell type)
    grades: dict[tuple[str, str, str], tuple[float | None, float, bool, str]]
    blank: dict[str, set[str]]  # exercise -> students who left its solution cells as given
    mistakes: dict[str, list[Mistake]]  # exercise -> mistakes, the most frequent first
    problems: list[dict[str, str]]  # the report lines that are not "graded"
    seconds: dict[str, float]  # student -> the time grading took
    feedback: dict[str, dict[str, Path]]  # student -> notebook -> feedback file
    pairs: list[similarity.Pair]
    code: dict[str, list[str]]  # student -> the solution text compared (lines)
    threshold: float = similarity.THRESHOLD
    # exercises where a submission is close to the published solution (source/): to review
    published: list[similarity.NearSolution] = field(default_factory=list)


def gather(root: Path, assignment: str, threshold: float = similarity.THRESHOLD) -> ClassData:
    """Read what grading kept of ``assignment`` (see the module's text)."""
    require_assignment(root, assignment)
    notebooks = release_notebooks(root, assignment)
    released = {name: _release(root, assignment, name) for name in notebooks}
    exercises = [e for name in notebooks for e in exercises_of(name, released[name])]
    grades = read_grades(root, assignment)
    kept = records.read_all(root, assignment)
    students = sorted({student for student, _, _ in grades} | set(kept))  # graded, or tried
    code, blank = _solutions(root, assignment, students, released, exercises)
    subs = [similarity.submission(s, "\n".join(code[s])) for s in students if code.get(s)]
    given = similarity.submission("", "\n".join(instructors_code(root, assignment, notebooks)))
    return ClassData(
        assignment=assignment,
        students=students,
        exercises=exercises,
        grades=grades,
        blank=blank,
        mistakes=rank_mistakes(exercises, kept),
        problems=[r for r in report.problems(root) if r["assignment"] == assignment],
        seconds={s: float(r["seconds"]) for s, r in kept.items() if r.get("seconds")},
        feedback=_feedback(root, assignment, students, notebooks),
        pairs=similarity.alike(subs, threshold, given),
        code=code,
        threshold=threshold,
        published=near_published_solution(root, assignment, exercises, released),
    )


def _release(root: Path, assignment: str, name: str) -> list[dict]:
    """The release notebook's cells: (grade id, type, solution?, grade?, source)."""
    path = root / "release" / assignment / f"{name}.ipynb"
    if not path.is_file():
        raise CourseError(f"no release notebook {path}: run `course release {assignment}` first")
    return [_cell(cell) for cell in read_notebook(path).cells]


def _cell(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return {
        "id": meta.get("grade_id", ""),
        "type": cell.get("cell_type"),
        "solution": bool(meta.get("solution")),
        "grade": bool(meta.get("grade")),
        "source": cell.get("source", ""),
    }


def exercises_of(notebook: str, cells: list[dict]) -> list[Exercise]:
    """The exercises of one release notebook, in its order."""
    found: dict[str, Exercise] = {}
    pending: list[str] = []  # code solution cells since the last exercise's tests
    for cell in cells:
        if cell["type"] != "code":
            continue
        if cell["solution"]:
            pending.append(cell["id"])
            continue
        match = TEST_ID.match(cell["id"]) if cell["grade"] else None
        if not match:
            continue
        exercise = found.setdefault(match["name"], Exercise(match["name"], notebook))
        getattr(exercise, match["kind"]).append(cell["id"])
        exercise.solutions += pending
        pending = []
    return list(found.values())


def read_grades(root: Path, assignment: str) -> dict:
    """Every grade of ``assignment`` in the gradebook, in one query (see :class:`ClassData`)."""
    url = db_url(root)
    file = sqlite_file(url)
    if file is not None and not file.exists():
        raise CourseError(f"no gradebook at {file}: run `course autograde {assignment}` first")
    with Gradebook(url) as gb:
        rows = (
            gb.db.query(
                SubmittedAssignment.student_id,
                Notebook.name,
                GradeCell.name,
                GradeCell.max_score,
                GradeCell.cell_type,
                GradeRow.auto_score,
                GradeRow.manual_score,
                GradeRow.needs_manual_grade,
            )
            .select_from(GradeRow)
            .join(SubmittedNotebook, GradeRow.notebook_id == SubmittedNotebook.id)
            .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
            .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
            .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
            .join(GradeCell, GradeRow.cell_id == GradeCell.id)
            .filter(Assignment.name == assignment)
            .all()
        )
    grades = {}
    for student, notebook, cell, most, kind, auto, manual, needs in rows:
        points = manual if manual is not None else auto
        grades[(student, notebook, cell)] = (points, float(most), bool(needs), kind)
    return grades


def _solutions(
    root: Path,
    assignment: str,
    students: list[str],
    released: dict[str, list[dict]],
    exercises: list[Exercise],
) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """Each student's solution code (the stubs' lines left out) and, by exercise, who left every one
    of its solution cells as given."""
    stubs = {
        (name, c["id"]): _lines(c["source"])
        for name, cells in released.items()
        for c in cells
        if c["solution"] and c["type"] == "code"
    }
    code: dict[str, list[str]] = {}
    written: dict[str, set[tuple[str, str]]] = {}
    for student in students:
        code[student], written[student] = solution_code(root, assignment, student, stubs)
    blank = {
        e.name: {s for s in students if not any((e.notebook, c) in written[s] for c in e.solutions)}
        for e in exercises
    }
    return code, blank


def solution_code(
    root: Path, assignment: str, student: str, stubs: dict[tuple[str, str], set[str]]
) -> tuple[list[str], set[tuple[str, str]]]:
    """The lines a student wrote in the solution cells (each cell headed by a comment naming it; the
    lines of the release's stub left out), and the cells where they wrote any."""
    lines: list[str] = []
    written = set()
    for name in sorted({n for n, _ in stubs}):
        path = root / "submitted" / student / assignment / f"{name}.ipynb"
        try:
            cells = [_cell(c) for c in read_notebook(path).cells]
        except CourseError:
            continue  # missing or broken: nothing to compare
        for cell in cells:
            stub = stubs.get((name, cell["id"]))
            if stub is None or cell["type"] != "code":
                continue
            own = [line for line in cell["source"].splitlines() if line.strip() not in stub]
            own = [line for line in own if line.strip()]
            if own:
                written.add((name, cell["id"]))
                lines += [f"# --- {cell['id']}", *own]
    return lines, written


def instructors_code(root: Path, assignment: str, notebooks: list[str]) -> list[str]:
    """The instructor's solutions (``source/``, nbgrader's markers left out), cell by cell."""
    lines: list[str] = []
    for name in notebooks:
        try:
            source = read_notebook(root / "source" / assignment / f"{name}.ipynb")
        except CourseError:
            continue  # a course folder without source/: nothing to leave out
        for cell_id, code in submission.reference_code(source).items():
            lines += [f"# --- {cell_id}", *code.splitlines()]
    return lines


def near_published_solution(
    root: Path, assignment: str, exercises: list[Exercise], released: dict[str, list[dict]]
) -> list[similarity.NearSolution]:
    """The exercises where a student's code is as close to the published solution (``source/``,
    which an open course's upstream repository holds) as a copy is
    (:func:`grader.report.similarity.near_published`); the lines of the release's stubs
    left out of both."""
    solutions: dict[str, list[similarity.Token]] = {}
    code: dict[str, dict[str, list[similarity.Token]]] = defaultdict(dict)
    for name, cells in released.items():
        stubs = {c["id"]: _lines(c["source"]) for c in cells if c["solution"]}
        mine = [e for e in exercises if e.notebook == name]
        try:
            given = submission.reference_code(
                read_notebook(root / "source" / assignment / f"{name}.ipynb")
            )
        except CourseError:
            continue  # a course folder without source/: nothing published to compare with
        for exercise in mine:
            solutions[exercise.name] = similarity.own_tokens(
                [(given.get(c, ""), stubs[c]) for c in exercise.solutions if c in stubs]
            )
        for path in sorted((root / "submitted").glob(f"*/{assignment}/{name}.ipynb")):
            try:
                sources = {c["id"]: c["source"] for c in map(_cell, read_notebook(path).cells)}
            except CourseError:
                continue  # broken: nothing to compare
            student = path.parent.parent.name
            for exercise in mine:
                code[student][exercise.name] = similarity.own_tokens(
                    [(sources.get(c, ""), stubs[c]) for c in exercise.solutions if c in stubs]
                )
    return similarity.near_published(code, solutions)


def _lines(source: str) -> set[str]:
    return {line.strip() for line in source.splitlines() if line.strip()}


def is_generic(key: str) -> bool:
    """Whether a mistake key is a failure that no check of the course named (a generic check of
    :mod:`course.testcells` without a hint, an error raised, a plain assertion)."""
    return key in NOT_NAMED or key.startswith(("generic:", f"{contract.RAISED}:"))


def exercise_of_cells(exercises: list[Exercise]) -> dict[tuple[str, str], str]:
    """(notebook, grade id) -> the exercise it belongs to."""
    return {(e.notebook, cell): e.name for e in exercises for cell in e.cells}


def rank_mistakes(exercises: list[Exercise], kept: dict[str, dict]) -> dict[str, list[Mistake]]:
    """By exercise, the mistakes recorded by the judge, the most frequent first (the ones a check of
    the course named before those it did not). The message kept is a visible cell's, as the student
    saw it, when one recorded it."""
    where = exercise_of_cells(exercises)
    visible = {(e.notebook, c) for e in exercises for c in e.visible}
    found: dict[str, dict[str, Mistake]] = defaultdict(dict)
    for student, record in kept.items():
        for notebook, verdicts in (record.get("notebooks") or {}).items():
            for cell, mistake in (verdicts.get("mistakes") or {}).items():
                exercise = where.get((notebook, cell))
                if exercise is None or not isinstance(mistake, dict):
                    continue
                key = str(mistake.get("key") or contract.UNNAMED)
                named = not is_generic(key)
                entry = found[exercise].setdefault(key, Mistake(key, "", named))
                entry.students.add(student)
                text = str(mistake.get("message") or "")
                if text and (not entry.message or (notebook, cell) in visible):
                    entry.message = text
    order = [e.name for e in exercises]
    return {
        name: sorted(found[name].values(), key=lambda m: (not m.named, -len(m.students), m.key))
        for name in order
        if name in found
    }


def _feedback(
    root: Path, assignment: str, students: list[str], notebooks: list[str]
) -> dict[str, dict[str, Path]]:
    files: dict[str, dict[str, Path]] = {}
    for student in students:
        for name in notebooks:
            path = root / "feedback" / student / assignment / f"{name}.html"
            if path.is_file():
                files.setdefault(student, {})[name] = path
    return files
