"""Edit nbgrader notebooks as plain text, then turn them back into notebooks.

    python tools/nbtext.py dump source/a_masks/masks.ipynb > /tmp/masks.txt
    python tools/nbtext.py build /tmp/masks.txt source/a_masks/masks.ipynb

In the text form each cell starts with a header line:

    %% markdown                              a plain markdown cell
    %% code                                  a plain code cell
    %% code solution id=NAME                 the student writes code here (### BEGIN/END SOLUTION)
    %% code tests id=NAME points=P           an autograded test cell (read-only for students)
    %% code readonly id=NAME                 a read-only cell (setup the tests rely on)
    %% markdown written id=NAME points=P     a manually graded answer (### BEGIN/END SOLUTION)
    %% markdown readonly id=NAME             read-only text (e.g. a question)

The notebooks stay the source of truth (instructors may edit them in JupyterLab with nbgrader's
toolbar); this tool is a convenience for authors who prefer a text editor and readable diffs.

Why not jupytext's percent format: it carries nbgrader's metadata, but only as a raw JSON dict in
each cell's header (``# %% nbgrader={"grade": true, "grade_id": "t", "locked": true, "points": 2,
"schema_version": 3, "solution": false, "task": false}``), which the author must keep valid by
hand and which reads far worse than a role (``%% code tests id=t points=2``). A new dependency
would buy less readable sources, so this small tool stays; the notebooks it writes are ordinary
nbgrader notebooks that jupytext or JupyterLab open like any other.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROLES = {
    # role: (solution, grade, locked)
    "solution": (True, False, False),
    "tests": (False, True, True),
    "readonly": (False, False, True),
    "written": (True, True, False),
}


def _metadata(role: str, fields: dict[str, str]) -> dict:
    solution, grade, locked = ROLES[role]
    meta = {
        "grade": grade,
        "grade_id": fields["id"],
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = (
            float(fields["points"]) if "." in fields["points"] else int(fields["points"])
        )
    return {"nbgrader": meta}


def build(text: str) -> nbformat.NotebookNode:
    """Turn the text form into a notebook without outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    header, body = None, []

    def flush() -> None:
        if header is None:
            return
        kind, *rest = header.split()
        role = rest[0] if rest and "=" not in rest[0] else None
        fields = dict(item.split("=", 1) for item in rest if "=" in item)
        source = "\n".join(body).strip("\n")
        cell = (
            nbformat.v4.new_markdown_cell(source)
            if kind == "markdown"
            else nbformat.v4.new_code_cell(source)
        )
        if role:
            cell.metadata.update(_metadata(role, fields))
        cell.pop("id", None)
        nb.cells.append(cell)

    for line in text.splitlines():
        if line.startswith("%% "):
            flush()
            header, body = line[3:], []
        else:
            body.append(line)
    flush()
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{index:03d}"
    return nb


def dump(nb: nbformat.NotebookNode) -> str:
    """Turn a notebook into the text form."""
    parts = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        header = cell.cell_type
        if meta:
            flags = (meta["solution"], meta["grade"], meta["locked"])
            role = next(r for r, f in ROLES.items() if f == flags)
            header += f" {role} id={meta['grade_id']}"
            if meta.get("grade"):
                header += f" points={meta['points']}"
        parts.append(f"%% {header}\n{cell.source}\n")
    return "\n".join(parts)


def main(argv: list[str]) -> None:
    command, *paths = argv
    if command == "build":
        nbformat.write(build(Path(paths[0]).read_text()), paths[1])
    elif command == "dump":
        sys.stdout.write(dump(nbformat.read(paths[0], as_version=4)))
    else:
        raise SystemExit("usage: nbtext.py build TEXT NOTEBOOK | dump NOTEBOOK")


if __name__ == "__main__":
    main(sys.argv[1:])
