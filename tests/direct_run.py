"""Run a demo student's test cells in this process: no nbgrader, no kernel, no subprocess.

The student's notebooks are built by :func:`grader.coordinator.demo.build_class` itself, into a
scratch folder that links to the repository's ``source/``, ``release/`` and ``demo/``. Then, as
``nbgrader autograde`` does, every read-only and autograded cell is restored from ``source/`` (so
the hidden tests are back) while the student's solution cells are kept. The code cells run in
notebook order, in one namespace dict per notebook (a fresh kernel each):

- read-only cells (``setup``, given code) and solution cells always run;
- a plain cell (no nbgrader metadata: experiments, plots, training) runs only when a cell that
  runs reads a name that no running cell binds and that plain cell binds
  (:func:`needed_plain_cells`; today no test cell needs one);
- every cell runs as ``exec(compile(source, "<grade_id>", "exec"), namespace)`` and an
  autograded cell is scored as nbgrader scores it (:func:`run_cell`).

IPython magics are dropped, figures are drawn with Agg; the caller sets grading mode
(``COURSE_FAST=1``) and the working folder (the student's submission, as for a kernel).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from nbformat import NotebookNode
from nbgrader.utils import is_grade, is_locked, is_solution

from grader.coordinator import demo
from grader.coordinator.submission import grade_id
from grader.selfstudy.check import error_message
from grader.shared.notebooks import read_notebook

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after choosing the backend)

GIVEN, SOLUTION, TEST, PLAIN = "given", "solution", "test", "plain"
BUILTINS = set(dir(builtins)) | {"__name__", "__file__", "display", "get_ipython"}


@dataclass(frozen=True)
class Cell:
    """One code cell as it runs at grading time."""

    kind: str  # GIVEN (read-only), SOLUTION, TEST (autograded) or PLAIN (no nbgrader metadata)
    name: str  # grade_id, or "cell N" for a plain cell
    source: str  # Python, IPython magics removed


def build_class(scratch: Path, repo: Path, assignment: str) -> Path:
    """Build every demo student of ``assignment`` with grader.coordinator.demo; return the
    submitted/ folder.

    ``scratch`` gets links to the repository's source/, release/ and demo/, so the notebooks are
    made exactly as ``course demo`` makes them, and nothing is written inside the repository.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    for folder in ("source", "release", "demo"):
        link = scratch / folder
        if not link.exists():
            link.symlink_to(repo / folder, target_is_directory=True)
    demo.build_class(scratch, assignment)
    return scratch / "submitted"


def build_classes(scratch: Path, repo: Path, assignments: Iterable[str]) -> Path:
    """:func:`build_class` for each of ``assignments``; return the submitted/ folder."""
    for assignment in assignments:
        build_class(scratch, repo, assignment)
    return scratch / "submitted"


def python_source(source: str) -> str:
    """A cell's code without IPython magics and shell escapes (lines starting with % or !)."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def grading_cells(student: NotebookNode, instructor: NotebookNode) -> list[Cell]:
    """The code cells of a student's notebook as autograding sees them.

    Like nbgrader's OverwriteCells, read-only and autograded cells take their source from the
    instructor's notebook (matched by grade_id), so the hidden tests are back; solution cells
    keep the student's code.
    """
    originals = {grade_id(c): c for c in instructor.cells if grade_id(c)}
    cells = []
    for index, cell in enumerate(student.cells):
        if cell.cell_type != "code":
            continue
        gid = grade_id(cell)
        if is_solution(cell):
            kind, source = SOLUTION, cell.source
        elif is_grade(cell):
            kind, source = TEST, originals[gid].source
        elif is_locked(cell):
            kind, source = GIVEN, originals[gid].source
        else:
            kind, source, gid = PLAIN, cell.source, f"cell {index}"
        cells.append(Cell(kind, gid, python_source(source)))
    return cells


def names_read_and_bound(source: str) -> tuple[set[str], set[str]]:
    """Every name a cell reads, and every name it binds anywhere (an over-estimate on purpose)."""
    read, bound = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return read, bound


def needed_plain_cells(cells: list[Cell]) -> set[str]:
    """The plain cells that give a running cell a name that no running cell binds.

    For each such name, the nearest plain cell before the reader that binds it (the binding a
    kernel would see) runs too; repeated until nothing is added, since a needed plain cell may
    read names of an earlier one.
    """
    scanned = [names_read_and_bound(c.source) for c in cells]

    def binder_before(reader: int, name: str) -> int | None:
        plain = (j for j in range(reader - 1, -1, -1) if cells[j].kind == PLAIN)
        return next((j for j in plain if name in scanned[j][1]), None)

    running = {i for i, c in enumerate(cells) if c.kind != PLAIN}
    while True:
        bound = set().union(*(scanned[i][1] for i in running))
        wanted = {binder_before(i, n) for i in running for n in scanned[i][0] - bound - BUILTINS}
        if wanted - {None} <= running:
            return {cells[i].name for i in running if cells[i].kind == PLAIN}
        running |= wanted - {None}


def cells_to_run(cells: list[Cell]) -> list[Cell]:
    """The cells that run, in notebook order: all but the plain cells nobody needs."""
    needed = needed_plain_cells(cells)
    return [c for c in cells if c.kind != PLAIN or c.name in needed]


@dataclass(frozen=True)
class Outcome:
    """What one cell did: ``message`` is empty when it passed (see :func:`run_notebook`)."""

    cell: str
    kind: str
    ename: str = ""  # the exception's class name, "" when it raised nothing
    message: str = ""  # for a test cell, what the student would read; "" when it passed


@contextlib.contextmanager
def like_a_kernel():
    """Python's own warning filters, as in a fresh kernel, with every shown warning recorded.

    One recording spans the whole notebook, so (as in a kernel) a warning already shown at one
    place is not shown again there.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("ignore", category=ResourceWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        yield caught


def run_cell(cell: Cell, namespace: dict, caught: list) -> Outcome:
    """Run one cell in ``namespace`` and score it as nbgrader scores a test cell.

    The cell fails when it raises or writes to stderr; a kernel writes shown warnings (those added
    to ``caught`` meanwhile) to stderr. The message is the one ``course check`` and the feedback
    give (:func:`grader.selfstudy.check.error_message`). Figures are closed afterwards. (A last
    expression, which nbgrader reads as partial credit, is not looked at: the course's test cells
    end with ``passed(...)``.)
    """
    stderr, seen, outputs = io.StringIO(), len(caught), []
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            exec(compile(cell.source, f"<{cell.name}>", "exec"), namespace)
    except Exception as exc:  # any exception fails the cell, as in a kernel
        outputs.append({"output_type": "error", "ename": type(exc).__name__, "evalue": str(exc)})
    finally:
        plt.close("all")
    shown = caught[seen:]
    text = stderr.getvalue() + "".join(
        warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown
    )
    if text:
        outputs.insert(0, {"output_type": "stream", "name": "stderr", "text": text})
    ename = next((o["ename"] for o in outputs if o["output_type"] == "error"), "")
    return Outcome(
        cell.name, cell.kind, ename, error_message({"outputs": outputs}) if outputs else ""
    )


def run_notebook(cells: list[Cell], namespace: dict | None = None) -> list[Outcome]:
    """Run the cells of one notebook in a fresh namespace (or ``namespace``), as one kernel would.

    As in nbgrader, a cell that fails does not stop the run: the next cells run too.
    """
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    with like_a_kernel() as caught:
        return [run_cell(cell, namespace, caught) for cell in cells]


def run_student(
    submitted: Path, repo: Path, assignment: str, student: str, namespaces: list | None = None
) -> list[Outcome]:
    """Run every notebook a student submitted for ``assignment``; one Outcome per cell run.

    The namespace each notebook ran in is appended to ``namespaces`` when one is given.
    """
    outcomes = []
    for path in sorted((submitted / student / assignment).glob("*.ipynb")):
        instructor = read_notebook(repo / "source" / assignment / path.name)
        namespace: dict = {"__name__": "__main__"}
        cells = cells_to_run(grading_cells(read_notebook(path), instructor))
        outcomes += run_notebook(cells, namespace)
        if namespaces is not None:
            namespaces.append(namespace)
    return outcomes
