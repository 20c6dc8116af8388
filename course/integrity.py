"""Tampering: what a submission may not do, found in its code and in its outputs.

Two layers, because code running in the kernel can reach anything else in the kernel:

1. At run time, :mod:`course.grading` captures the functions the checks rely on before any
   student code runs (:func:`capture`), and every check first verifies that they are unchanged
   (:func:`replaced`). A failed verification raises an error whose message starts with
   :data:`MARKER`.
2. After grading, :func:`scan_notebook` reads the student's own cells (every cell nbgrader does
   not overwrite) and flags code that patches modules or the course's helpers, edits
   ``sys.modules`` or builtins, reads the hidden tests' names or the grader's frames, or opens
   the course's test and solution files; it also finds the run-time marker in the outputs.

A flagged notebook is marked ``flagged`` in the gradebook and earns no points (see
:mod:`course.pipeline`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable

import numpy
import torch
from nbformat import NotebookNode

MARKER = "TAMPERING DETECTED"

# Functions the checks use to compare values, by dotted name.
GUARDED = {
    "torch.allclose": (torch, "allclose"),
    "torch.isclose": (torch, "isclose"),
    "torch.equal": (torch, "equal"),
    "torch.isnan": (torch, "isnan"),
    "torch.is_tensor": (torch, "is_tensor"),
    "torch.testing.assert_close": (torch.testing, "assert_close"),
    "torch.Tensor.__eq__": (torch.Tensor, "__eq__"),
    "torch.Tensor.all": (torch.Tensor, "all"),
    "torch.Tensor.any": (torch.Tensor, "any"),
    "numpy.allclose": (numpy, "allclose"),
    "math.isclose": (math, "isclose"),
}


def capture() -> dict[str, object]:
    """The current object behind every guarded name."""
    return {name: getattr(owner, attr) for name, (owner, attr) in GUARDED.items()}


def replaced(snapshot: dict[str, object]) -> list[str]:
    """Guarded names whose object is no longer the captured one."""
    return [
        name
        for name, (owner, attr) in GUARDED.items()
        if getattr(owner, attr, None) is not snapshot[name]
    ]


# ----------------------------------------------------------------------------- static scan
MODULE_NAMES = {
    "torch", "nn", "F", "np", "numpy", "math", "sys", "os", "builtins", "course", "checks",
    "grading", "nbgrader", "importlib",
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


def scan_source(source: str, protected: set[str], hidden: set[str]) -> list[str]:
    """Reasons to flag one cell of student code (empty when nothing is suspicious).

    ``protected`` are names the read-only cells bind (imports of helpers); ``hidden`` are the
    names the hidden tests define.
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


def _without_magics(source: str) -> str:
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def protected_names(nb: NotebookNode) -> set[str]:
    """Names bound by the read-only cells' imports (helpers the tests rely on)."""
    names = set()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("locked"):
            continue
        try:
            tree = ast.parse(_without_magics(cell.source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names - {"math", "torch", "nn", "plt", "np"}  # module names are handled separately


def split_hidden(source_nb: NotebookNode) -> tuple[list[str], list[str]]:
    """The code lines of an instructor's notebook: (inside hidden regions, everywhere else)."""
    hidden, visible = [], []
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
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


def student_cells(nb: NotebookNode) -> list[NotebookNode]:
    """The code cells a student wrote or may have added (nbgrader overwrites the locked ones)."""
    return [
        c
        for c in nb.cells
        if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("locked")
    ]


def scan_notebook(
    submitted: NotebookNode, source_nb: NotebookNode, graded: NotebookNode
) -> list[str]:
    """Every reason to flag a submission: its code, and the run-time marker in its outputs.

    Cells identical to a cell of the instructor's notebook are the course's own code, not read.
    """
    protected = protected_names(source_nb)
    hidden = hidden_names(source_nb)
    ours = {c.source.strip() for c in source_nb.cells if c.cell_type == "code"}
    reasons = []
    for cell in student_cells(submitted):
        if cell.source.strip() not in ours:
            reasons += scan_source(cell.source, protected, hidden)
    for cell in graded.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and MARKER in output.get("evalue", ""):
                reasons.append(output["evalue"].splitlines()[0])
    return sorted(set(reasons))
