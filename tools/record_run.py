"""Run an instructor notebook in full mode and record what its cells printed (instructors only).

    python tools/record_run.py source/d_language_model/language_model.ipynb \
        --out tools/stages/d_full_run.json

The model answers of some written questions quote the numbers of the instructor's full run (D's
perplexities, head scores and attention sinks, B's gradient ratios). This script makes that run
reproducible and its numbers checkable: it executes the notebook as an instructor would, with the
reference solutions, outside grading mode (``COURSE_FAST`` and ``NBGRADER_EXECUTION`` unset;
``--fast``: in grading mode's short form), and writes, per code cell that printed something,
its index and its printed text (figures left out), with the command, the time it took and the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
GRADING_VARIABLES = ("COURSE_FAST", "NBGRADER_EXECUTION")
WIDGET = "application/vnd.jupyter.widget-view+json"  # a progress bar's display in a notebook


def printed(cell: nbformat.NotebookNode) -> str:
    """The text a code cell printed: its standard output and plain-text results, in order
    (progress bars, on standard error or as widgets, left out)."""
    parts = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append(output.get("text", ""))
        elif "text/plain" in data and not {"image/png", WIDGET} & set(data):
            parts.append(output["data"]["text/plain"] + "\n")
    return "".join(parts)


def run(path: Path, timeout: int, fast: bool = False) -> tuple[nbformat.NotebookNode, float]:
    """Execute the notebook in full mode (or, with ``fast``, in grading mode's short form) in a
    scratch folder; return it and the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    for name in GRADING_VARIABLES:
        os.environ.pop(name, None)
    if fast:
        os.environ["COURSE_FAST"] = "1"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(nb, timeout=timeout, resources={"metadata": {"path": scratch}}).execute()
    return nb, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Run the notebook and write the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="the record to write (JSON)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell at most")
    parser.add_argument("--fast", action="store_true", help="grading mode's short run instead")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        raise SystemExit(f"{args.notebook}: no such notebook (give a path under source/)")
    nb, seconds = run(args.notebook, args.timeout, args.fast)
    cells = {
        str(index): text
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (text := printed(cell))
    }
    words = ["python", "tools/record_run.py", *(argv if argv is not None else sys.argv[1:])]
    record = {
        "what": f"What the code cells of {args.notebook} printed in one "
        f"{'grading-mode (COURSE_FAST=1)' if args.fast else 'full-mode'} run with the reference "
        "solutions (cell index: printed text; figures left out).",
        "command": shlex.join(words),
        "seconds": round(seconds),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs)",
        "printed": cells,
    }
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cells)} cells recorded in {args.out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
