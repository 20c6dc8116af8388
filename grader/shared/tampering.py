"""Tampering: what a submission may not do, found in the code that ran and in its outputs.

Two layers, because code running in the kernel can reach anything else in the kernel:

1. At run time, the notebook side (``course/guard.py``) captures the functions the checks rely
   on before any student code runs, and every check verifies that they are unchanged. A failed
   verification raises an error whose message starts with :data:`MARKER`.
2. After grading, :func:`scan_notebook` reads every code cell of the graded notebook that is not
   the course's own (whatever its metadata says) and flags code that patches modules or the course's
   helpers, edits ``sys.modules`` or builtins, reads the hidden tests' names or the grader's frames,
   opens the course's test and solution files, or imports the module of another assignment
   (``course.d_language_model`` in assignment A, say); it also finds the run-time marker in the
   outputs.

A flagged notebook is marked ``flagged`` in the gradebook and earns no points (see
:func:`grader.shared.finish.finish_notebook`, on every path that grades).
"""

from __future__ import annotations

import ast
import functools
import threading
from collections.abc import Iterable
from pathlib import Path

from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests
from traitlets.config import Config

from grader.shared.notebooks import read_notebook
from grader.shared.paths import assignments

MARKER = "TAMPERING DETECTED"  # what course.guard writes when a check finds a patched function


# ----------------------------------------------------------------------------- static scan
MODULE_NAMES = {
    "torch", "nn", "F", "np", "numpy", "math", "sys", "os", "builtins", "course", "checks",
    "testcells", "guard", "nbgrader", "importlib",
}  # fmt: skip
FRAME_ATTRS = {"_getframe", "f_back", "f_globals", "f_locals", "tb_frame", "gi_frame"}
INSPECT_MODULES = {"inspect", "gc", "traceback", "sys"}
FORBIDDEN_PATHS = ("gradebook", "source/", "autograded", "submitted/", ".db", "feedback/")
FILE_READERS = {
    "open",
    "read_text",
    "read_bytes",
    "read",
    "listdir",
    "glob",
    "rglob",
    "walk",
    "connect",
}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> Iterable[ast.AST]:
    if isinstance(node, (ast.Assign, ast.Delete)):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def scan_source(
    source: str, protected: set[str], hidden: set[str], foreign: Iterable[str] = ()
) -> list[str]:
    """Reasons to flag one cell of student code (empty when nothing is suspicious).

    ``protected`` are names the read-only cells bind (imports of helpers); ``hidden`` are the names
    the hidden tests define; ``foreign`` are the other assignments, whose modules
    (``course.<assignment>``) this notebook may not import.
    """
    try:
        tree = ast.parse(_without_magics(source))
    except SyntaxError:
        return []  # a syntax error costs points on its own; nothing ran
    reasons = []
    for node in ast.walk(tree):
        for target in _targets(node):
            root = _root_name(target)
            if isinstance(target, (ast.Attribute, ast.Subscript)) and root in MODULE_NAMES:
                reasons.append(f"changes {ast.unparse(target)} (patching a module)")
            elif isinstance(target, ast.Name) and target.id in protected:
                reasons.append(f"rebinds {target.id}, a helper the tests use")
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in protected:
            reasons.append(f"redefines {node.name}, a helper the tests use")
        if isinstance(node, ast.Call):
            reasons += _call_reasons(node)
        reasons += _foreign_imports(node, foreign)
        if isinstance(node, ast.Name) and (node.id in hidden or node.id == "__builtins__"):
            reasons.append(f"uses {node.id}, a name of the hidden tests or of the interpreter")
        if isinstance(node, ast.Attribute) and (
            node.attr in FRAME_ATTRS or _root_name(node) in INSPECT_MODULES - {"sys"}
        ):
            reasons.append(f"inspects the grader's frames or objects ({ast.unparse(node)})")
    return sorted(set(reasons))


def _call_reasons(node: ast.Call) -> list[str]:
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    reasons = []
    if name in {"setattr", "delattr"} and node.args and _root_name(node.args[0]) in MODULE_NAMES:
        reasons.append(f"{name} on {ast.unparse(node.args[0])} (patching a module)")
    if name in {"globals", "vars", "locals"} and not node.args:
        reasons.append(f"uses {name}() to reach the notebook's names")
    if isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "sys.modules":
        if name in {"pop", "update", "clear", "setdefault", "__setitem__", "__delitem__"}:
            reasons.append("edits sys.modules")
    if name in FILE_READERS:
        text = " ".join(
            a.value
            for a in ast.walk(node)
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        )
        if any(p in text for p in FORBIDDEN_PATHS):
            reasons.append("reads the course's test, solution or grade files")
    return reasons


def _foreign_imports(node: ast.AST, foreign: Iterable[str]) -> list[str]:
    """An import (or a string naming a module) of another assignment's package."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        names = [node.value.replace("/", ".")]
    else:
        return []
    return [
        f"imports course.{other}, the module of another assignment"
        for other in foreign
        if any(f"course.{other}" in name for name in names)
    ]


def _without_magics(source: str) -> str:
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def protected_names(nb: NotebookNode) -> set[str]:
    """Names the course's read-only cells bind: imported helpers and the code it gives."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code" or not utils.is_locked(cell):
            continue
        try:
            tree = ast.parse(_without_magics(cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        if not utils.is_grade(cell):  # given code (an earlier assignment's answer), not tests
            names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names - {"math", "torch", "nn", "plt", "np"}  # module names are handled separately


def hidden_markers(config: Config | None = None) -> tuple[str, str]:
    """nbgrader's delimiters of hidden tests (``ClearHiddenTests``), as the course configures."""
    clear = ClearHiddenTests(config=config or Config())
    return clear.begin_test_delimeter, clear.end_test_delimeter


def split_hidden(
    source_nb: NotebookNode, config: Config | None = None
) -> tuple[list[str], list[str]]:
    """The code lines of an instructor's notebook: (inside hidden regions, everywhere else)."""
    begin, end = hidden_markers(config)
    hidden, visible = [], []
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            if begin in line:
                inside = True
            elif end in line:
                inside = False
            else:
                (hidden if inside else visible).append(line)
    return hidden, visible


def hidden_names(source_nb: NotebookNode) -> set[str]:
    """Private names that only the hidden tests of an instructor's notebook use."""
    hidden, visible = split_hidden(source_nb)
    names = _names("\n".join(hidden)) - _names("\n".join(visible))
    return {n for n in names if n.startswith("_") and len(n) > 2}


def _names(code: str) -> set[str]:
    try:
        tree = ast.parse(_without_magics(code))
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name):
            found.add(node.id)
    return found


def student_cells(graded: NotebookNode, source_nb: NotebookNode) -> list[NotebookNode]:
    """The code cells of a graded notebook that are not the course's own code.

    A cell is the course's when its text is exactly that of a code cell of the instructor's notebook
    (nbgrader restored it from the gradebook); the metadata of a submitted notebook (``locked``,
    ``grade_id``) is the student's to edit, so it decides nothing here.
    """
    ours = {c.source.strip() for c in source_nb.cells if c.cell_type == "code"}
    return [c for c in graded.cells if c.cell_type == "code" and c.source.strip() not in ours]


def scan_notebook(
    graded: NotebookNode,
    source_nb: NotebookNode,
    assignment: str = "",
    assignments: Iterable[str] = (),
    names: tuple[set[str], set[str]] | None = None,
) -> list[str]:
    """Every reason to flag a graded notebook: the code that ran, and the marker in its outputs.

    ``assignment`` is the notebook's own assignment and ``assignments`` all of the course's:
    importing the module of another one is flagged. ``names``: the source notebook's
    :func:`protected_names` and :func:`hidden_names`, if already known.
    """
    protected, hidden = names or (protected_names(source_nb), hidden_names(source_nb))
    foreign = sorted(set(assignments) - {assignment})
    reasons = []
    for cell in student_cells(graded, source_nb):
        reasons += scan_source(cell.source, protected, hidden, foreign)
    for cell in graded.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and MARKER in output.get("evalue", ""):
                reasons.append(output["evalue"].splitlines()[0])
    return sorted(set(reasons))


# CPython 3.11 can fail `ast.parse` run in two threads at once with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905); grading threads scan one at a time.
_PARSING = threading.Lock()


def scan_against_source(
    root: Path, assignment: str, notebook: str, graded: NotebookNode
) -> list[str]:
    """:func:`scan_notebook` on ``graded`` (notebook ``notebook`` as graded), against its source
    notebook in the course at ``root`` (read and parsed once per version of the file)."""
    path = root / "source" / assignment / f"{notebook}.ipynb"
    info = path.stat()
    with _PARSING:
        source, protected, hidden = _source(str(path), info.st_mtime_ns, info.st_size)
        names = (protected, hidden)
        return scan_notebook(graded, source, assignment, assignments(root), names)


@functools.lru_cache(maxsize=32)
def _source(path: str, mtime_ns: int, size: int) -> tuple[NotebookNode, set[str], set[str]]:
    """The source notebook at ``path`` and the names it binds, read and parsed once per version of
    the file, not once per submission (the grading threads only read them)."""
    source = read_notebook(Path(path))
    return source, protected_names(source), hidden_names(source)
