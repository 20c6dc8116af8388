"""Run a plan of notebook cells in this environment and write what each cell did (standard
library only: it runs in the student part's own virtual environment, see
``tests/student_install.py``).

``python -I visible_runner.py PLAN REPORT``: PLAN maps assignment -> notebook -> cells
(``kind``, ``name``, ``source``). Each notebook's cells run in order in a fresh namespace, in
grading mode (``COURSE_FAST=1``, figures drawn with Agg), from a folder of their own; a cell that
raises does not stop the next ones. REPORT gets where ``course`` was imported from and one entry
per cell: its error (``""`` when it raised nothing) and the warnings it showed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

os.environ["COURSE_FAST"] = "1"
os.environ["MPLBACKEND"] = "Agg"


def run_cell(source: str, name: str, namespace: dict) -> tuple[str, list[str]]:
    """Run one cell; return its error ("" when none) and the warnings it showed."""
    import matplotlib.pyplot as plt

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{name}>", "exec"), namespace)
            error = ""
        except Exception as exc:  # any exception fails the cell, as in a kernel
            last = traceback.extract_tb(exc.__traceback__)[-1]
            error = f"{type(exc).__name__}: {str(exc)[:300]} ({last.filename}:{last.lineno})"
        finally:
            plt.close("all")
    return error, [f"{w.category.__name__}: {str(w.message)[:200]}" for w in shown]


def main(plan_path: str, report_path: str) -> None:
    import course

    plan = json.loads(Path(plan_path).read_text())
    cells = []
    home = Path.cwd()
    for assignment, notebooks in plan.items():
        for notebook, notebook_cells in notebooks.items():
            folder = home / assignment
            folder.mkdir(exist_ok=True)
            os.chdir(folder)
            namespace: dict = {"__name__": "__main__"}
            for cell in notebook_cells:
                error, shown = run_cell(cell["source"], cell["name"], namespace)
                cells.append(
                    {
                        "assignment": assignment,
                        "notebook": notebook,
                        "cell": cell["name"],
                        "kind": cell["kind"],
                        "error": error,
                        "warnings": shown,
                    }
                )
            os.chdir(home)
    report = {"course": str(Path(course.__file__).parent), "python": sys.executable}
    Path(report_path).write_text(json.dumps({**report, "cells": cells}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
