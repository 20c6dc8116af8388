"""Run an instructor notebook in full mode and record what its cells printed (instructors only).

    python tools/record_run.py source/d_language_model/language_model.ipynb \
        --out tools/stages/d_full_run.json

The model answers of some written questions quote the numbers of the instructor's full run (D's
perplexities, head scores and attention sinks, B's gradient ratios). This script makes that run
reproducible and its numbers checkable: it executes the notebook as an instructor would, with the
reference solutions, outside grading mode (``COURSE_FAST`` and ``NBGRADER_EXECUTION`` unset;
``--fast``: in grading mode's short form), and writes, per code cell that printed something,
its index and its printed text (figures left out), with the command, the time it took, the
machine and the notebook's code hash (:func:`code_hash`), which ``tests/test_record_hashes.py``
compares with the notebook as it is.
"""

from __future__ import annotations

import argparse
import hashlib
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
# The cells a code hash leaves out: the install cell and the check cell, which tools/colab.py
# rewrites with the install address, and which print nothing a text quotes.
UNHASHED_CELLS = ("colab-install", "check-notebook")


def code_hash(nb: nbformat.NotebookNode) -> str:
    """``sha256:`` and the hex digest of the notebook's code cells' sources, in order, all but
    :data:`UNHASHED_CELLS`: a record that carries it was written by this code. A markdown edit
    leaves it as it is; any edit of a code cell, a comment included, changes it."""
    sources = [
        cell.source
        for cell in nb.cells
        if cell.cell_type == "code" and cell.get("id") not in UNHASHED_CELLS
    ]
    digest = hashlib.sha256(json.dumps(sources, ensure_ascii=False).encode()).hexdigest()
    return f"sha256:{digest}"


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
    written_by = code_hash(nbformat.read(args.notebook, as_version=4))
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
        "notebook": args.notebook.resolve().relative_to(REPO).as_posix(),
        "code_hash": written_by,
        "printed": cells,
    }
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cells)} cells recorded in {args.out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
