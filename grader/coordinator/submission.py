"""A student's submission, built from a short description: what the student wrote.

A description is a YAML file::

    about: The causal mask is transposed (the future visible, the past hidden). expect: # what
    grading must show (checked by the test suite)
      fail: [test_mask_visible, test_mask_hidden] message: transposed # a word the failure message
      must contain
    code: # per graded name (or grade_id): the code of that cell
      generate_square_subsequent_mask: |
        def generate_square_subsequent_mask(sz):
            return torch.tril(torch.full((sz, sz), float("-inf")), diagonal=-1)

Each key of ``code`` names a function or class that a solution cell of the release notebook defines
(or that cell's grade_id); the whole cell is replaced by the given code. Cells the description does
not name keep the release stub.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import yaml
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearSolutions
from nbgrader.utils import is_solution
from traitlets.config import Config

from grader.shared.notebooks import read_notebook
from grader.shared.paths import CourseError


def read_description(path: Path) -> dict:
    """Read a submission description (YAML) and check its form."""
    if not path.is_file():
        raise CourseError(f"no description at {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise CourseError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from None
    code = data.get("code", {})
    if not isinstance(data, dict) or not isinstance(code, dict):
        raise CourseError(f"{path}: expected a mapping with a 'code' mapping (name -> code)")
    return data


def grade_id(cell: NotebookNode) -> str:
    """The nbgrader grade_id of a cell ('' for a cell nbgrader does not track)."""
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def defined_names(source: str) -> list[str]:
    """The functions, classes and variables a cell defines at top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def solution_cells(nb: NotebookNode) -> dict[str, NotebookNode]:
    """Map every name (grade_id and defined names) to its solution cell."""
    cells = {}
    for cell in nb.cells:
        if not is_solution(cell):
            continue
        cells[grade_id(cell)] = cell
        if cell.cell_type == "code":
            for name in defined_names(cell.source):
                cells[name] = cell
    return cells


def fill(nb: NotebookNode, code: dict[str, str]) -> list[str]:
    """Replace the solution cells named in ``code``; return the names not found in ``nb``."""
    cells = solution_cells(nb)
    missing = []
    for name, text in code.items():
        if name in cells:
            cells[name].source = str(text).rstrip("\n")
        else:
            missing.append(name)
    return missing


def solution_markers(config: Config | None = None) -> tuple[str, str]:
    """nbgrader's delimiters of solutions (``ClearSolutions``), as ``config`` sets them."""
    clear = ClearSolutions(config=config or Config())
    return clear.begin_solution_delimeter, clear.end_solution_delimeter


def strip_markers(source: str, markers: tuple[str, str]) -> str:
    """Remove the lines of ``source`` that hold a marker (as ``ClearSolutions`` finds them)."""
    begin, end = markers
    return "\n".join(line for line in source.splitlines() if begin not in line and end not in line)


def reference_code(source_nb: NotebookNode, config: Config | None = None) -> dict[str, str]:
    """The solution of every solution cell of an instructor's notebook, by grade_id.

    ``config`` is the course's nbgrader configuration, whose ``ClearSolutions`` delimiters mark the
    solutions (nbgrader's defaults without it).
    """
    markers = solution_markers(config)
    return {
        grade_id(cell): strip_markers(cell.source, markers)
        for cell in source_nb.cells
        if is_solution(cell)
    }


def build(release_path: Path, description_path: Path, out_path: Path) -> Path:
    """Write the submission that ``description_path`` describes for ``release_path``."""
    nb = read_notebook(release_path)
    code = read_description(description_path).get("code", {})
    missing = fill(nb, code)
    if missing:
        known = sorted(n for n in solution_cells(nb) if n)
        raise CourseError(
            f"{description_path} names {', '.join(missing)}, which no solution cell of "
            f"{release_path.name} defines (it defines: {', '.join(known)})"
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out_path))
    return out_path
