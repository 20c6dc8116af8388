"""A fix mid-term: what a new release of an assignment changes, and whose points a
regrade moved.

``course release ASSIGNMENT`` on an assignment that has submissions first says what the new release
would change (:func:`changes`: each cell, as a student sees it in release/, or a test's hidden part
as the gradebook keeps it) and releases only with ``--force``. Each release with changes is logged
in ``releases.json`` (the time and the cells), so that the term's guide can say who handed in
before a fix. ``course regrade ASSIGNMENT`` grades every submission again: hand grades and comments
are kept (nbgrader keeps them; :mod:`grader.books.gradebook` copies them), and
:func:`moved` reports each student whose points changed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from datetime import UTC, datetime
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from traitlets.config import Config

from grader.books.nbgrader_api import check_result, nbgrader_api
from grader.shared.notebooks import read_notebook
from grader.shared.paths import CONFIG_FILE, db_url, submitted_students
from grader.term.address import address_notebooks

LOG = "releases.json"


def has_submissions(root: Path, assignment: str) -> list[str]:
    """The students who handed in ``assignment`` (submitted/ or the gradebook)."""
    students = set(submitted_students(root, assignment))
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        try:
            students |= {s.student.id for s in gb.find_assignment(assignment).submissions}
        except MissingEntry:
            pass
    return sorted(students)


def changes(root: Path, assignment: str, address: str = "clone") -> list[str]:
    """What releasing ``assignment`` again would change, a line per cell ([] when nothing). The
    scratch release gets the students' ``address`` in its first cell, as the release itself does,
    so that the install cell is reported only when the address changed."""
    with tempfile.TemporaryDirectory(prefix="course-release-") as folder:
        scratch = Path(folder)
        shutil.copy(root / CONFIG_FILE, scratch / CONFIG_FILE)
        shutil.copytree(root / "source" / assignment, scratch / "source" / assignment)
        extra = Config()
        extra.CourseDirectory.root = str(scratch)
        extra.CourseDirectory.db_url = f"sqlite:///{scratch / 'gradebook.db'}"
        extra.Exchange.root = str(scratch / "exchange")
        result = nbgrader_api(scratch, extra).generate_assignment(assignment, force=True)
        check_result(result, f"generating the new release of '{assignment}'")
        address_notebooks(scratch / "release" / assignment, address)
        lines = _release_changes(root / "release" / assignment, scratch / "release" / assignment)
        lines += _hidden_changes(db_url(root), extra.CourseDirectory.db_url, assignment, lines)
    return lines


def _cells(path: Path) -> dict[str, tuple[str, str]]:
    """A notebook's cells by nbgrader's grade_id (or the cell's id): (kind, source)."""
    if not path.is_file():
        return {}
    cells = {}
    for cell in read_notebook(path).cells:
        meta = cell.metadata.get("nbgrader", {})
        key = meta.get("grade_id") or cell.get("id") or str(len(cells))
        cells[key] = (_kind(cell.cell_type, meta), cell.source)
    return cells


def _kind(cell_type: str, meta: dict) -> str:
    if meta.get("grade") and not meta.get("solution") and cell_type == "code":
        return "test"
    if meta.get("solution") or meta.get("task"):
        return "exercise" if cell_type == "code" else "written question"
    return "text" if cell_type == "markdown" else "code"


def _release_changes(old_dir: Path, new_dir: Path) -> list[str]:
    lines = []
    for new_path in sorted(new_dir.glob("*.ipynb")):
        old, new = _cells(old_dir / new_path.name), _cells(new_path)
        for key in new:
            if key not in old:
                lines.append(f"{new_path.name}: {new[key][0]} cell {key} added")
            elif old[key][1] != new[key][1]:
                lines.append(f"{new_path.name}: {new[key][0]} cell {key} changed")
        lines += [f"{new_path.name}: {old[k][0]} cell {k} removed" for k in old if k not in new]
    return lines


def _hidden_changes(old_url: str, new_url: str, assignment: str, seen: list[str]) -> list[str]:
    """Test cells whose hidden part changed (the gradebook keeps each test cell whole)."""
    lines = []
    with warnings.catch_warnings(), Gradebook(old_url) as old, Gradebook(new_url) as new:
        warnings.simplefilter("ignore")
        try:
            before = old.find_assignment(assignment)
        except MissingEntry:
            return []
        kept = {(n.name, c.name): c.source for n in before.notebooks for c in n.source_cells}
        for notebook in new.find_assignment(assignment).notebooks:
            for cell in notebook.source_cells:
                said = any(f"cell {cell.name} " in line for line in seen)
                old_source = kept.get((notebook.name, cell.name))
                if old_source is not None and old_source != cell.source and not said:
                    lines.append(f"{notebook.name}.ipynb: test cell {cell.name} changed (hidden)")
    return lines


def log_release(root: Path, assignment: str, lines: list[str]) -> None:
    """Add a release with changes to ``releases.json`` (time in UTC, the changed cells)."""
    path = root / LOG
    log = json.loads(path.read_text()) if path.is_file() else []
    when = datetime.now(UTC).isoformat(timespec="seconds")
    log.append({"assignment": assignment, "released": when, "changes": lines})
    path.write_text(json.dumps(log, indent=1) + "\n")


def scores(root: Path, assignment: str) -> dict[str, float]:
    """Each graded student's score on ``assignment`` (hand grades included)."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return {}
        return {s.student.id: float(s.score) for s in found.submissions}


def hand_graded(root: Path, assignment: str) -> set[tuple[str, str, str]]:
    """The written answers of ``assignment`` already graded by hand: (student, notebook, cell)."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return set()
        return {
            (submission.student.id, notebook.name, grade.name)
            for submission in found.submissions
            for notebook in submission.notebooks
            for grade in notebook.grades
            if grade.manual_score is not None and not grade.needs_manual_grade
        }


def keep_hand_graded(root: Path, assignment: str, graded: set[tuple[str, str, str]]) -> int:
    """After a regrade of the same submissions, mark the written answers in ``graded`` as graded
    again (nbgrader marks every cell with a hand grade for review when it autogrades again; the
    answers did not change, only the tests). Cells the autograder scores keep nbgrader's rule.
    Return how many were kept."""
    kept = 0
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        for student, notebook, cell in sorted(graded):
            try:
                grade = gb.find_grade(cell, notebook, assignment, student)
            except MissingEntry:
                continue
            if grade.auto_score is None and grade.manual_score is not None:
                grade.needs_manual_grade, kept = False, kept + 1
        gb.db.commit()
    return kept


def moved(before: dict[str, float], after: dict[str, float]) -> list[str]:
    """A line per student whose points changed between two :func:`scores`."""
    lines = []
    for student in sorted(set(before) | set(after)):
        old, new = before.get(student), after.get(student)
        if old is None or new is None:
            lines.append(f"{student}: {'new' if old is None else 'no longer graded'}")
        elif abs(new - old) > 1e-9:
            lines.append(f"{student}: {old:g} -> {new:g} ({new - old:+g})")
    return lines
