"""The student part's command: ``course check NOTEBOOK`` and ``course progress``.

Installed with the student part (``pip install``, the notebooks' first cell). In a clone of the
course the ``course`` command is the clone's (``grader/command/cli.py``): the same two
commands, where ``check`` also runs the hidden tests on your own copy, and many more for an
instructor.

- ``course check NOTEBOOK.ipynb``: the saved notebook run top to bottom as grading runs it; each
  test passed or its message, each written answer still empty (:mod:`course.check`).
- ``course progress [FOLDER]``: for each notebook in ``FOLDER`` (default: here) and its
  subfolders, the exercises still to write and the written answers still empty. It only reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from course import check

STUB = "raise NotImplementedError"


def _cells(path: Path) -> list[dict]:
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return cells if isinstance(cells, list) else []


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def left_to_do(path: Path) -> tuple[list[str], list[str]]:
    """The exercises of the notebook at ``path`` still raising ``NotImplementedError`` (by the
    function or class they define) and its written answers still empty ("Question N")."""
    exercises, answers, previous = [], [], ""
    for cell in _cells(path):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and cell.get("cell_type") == "code" and STUB in _source(cell):
            exercises.append(check.label(cell, previous))
        elif meta.get("solution") and meta.get("grade"):
            if _source(cell).strip() in check.EMPTY_ANSWERS:
                answers.append(check.label(cell, previous))
        elif cell.get("cell_type") == "markdown":
            previous = _source(cell)  # the text above the next answer: its question
    return exercises, answers


def notebooks(folder: Path) -> list[Path]:
    """The course's notebooks in ``folder`` and its subfolders (nbgrader's cells in them)."""
    found = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return [p for p in found if any("nbgrader" in c.get("metadata", {}) for c in _cells(p))]


def progress(folder: Path) -> str:
    """The text ``course progress`` prints."""
    found = notebooks(folder)
    if not found:
        return f"No notebook of the course in {folder}: give the folder that holds yours."
    lines = []
    for path in found:
        exercises, answers = left_to_do(path)
        if not exercises and not answers:
            lines.append(f"{path}: every exercise and written answer has something in it")
            continue
        lines.append(f"{path}:")
        if exercises:
            lines.append(f"  exercises to write: {', '.join(exercises)}")
        if answers:
            lines.append(f"  written answers still empty: {', '.join(answers)}")
    lines.append("Whether the exercises pass: `course check NOTEBOOK.ipynb` (or its last cell).")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The command line: ``check NOTEBOOK`` and ``progress [FOLDER]``."""
    top = argparse.ArgumentParser(prog="course", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="run a notebook's visible tests, as grading runs them")
    p.add_argument("notebook", type=Path, help="the saved notebook (.ipynb)")
    p = sub.add_parser("progress", help="what is left to do in your notebooks (read only)")
    p.add_argument("folder", type=Path, nargs="?", default=Path("."), help="default: here")
    return top


def main(argv: list[str] | None = None) -> int:
    """``course check NOTEBOOK`` or ``course progress [FOLDER]``."""
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "check":
        return check.check(args.notebook)
    print(progress(args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
