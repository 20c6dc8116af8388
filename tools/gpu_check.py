"""Run the training notebooks in full mode on one GPU; print their numbers and times.

    python tools/gpu_check.py                          # D, E, G, H; G pretrains 15,000 steps
    python tools/gpu_check.py --only g --pretrain-steps 1500 --out /tmp/gpu
    python tools/gpu_check.py --device cpu --only h    # the same run on the CPU, to compare

For a session on a machine with a GPU: install the course there (``pip install -e .`` with a CUDA
build of torch), then run this one script. Each instructor notebook (solutions included) runs
once from the top in full mode (no ``COURSE_FAST``, not under nbgrader), in a scratch folder, with
``COURSE_DEVICE`` set so that its setup cell trains on the device asked for. The script prints,
per notebook: the device line of its setup cell, the wall time, its slowest cells, and every line
the notebook printed that holds a number (accuracies, perplexities, losses, steps per second).
The executed notebooks and a JSON summary go to ``--out``. Numbers and times are the ones
measured in that run: record them with the card's name, never from memory.

``--graphs`` sets ``COURSE_CUDA_GRAPHS=1``: E's runs trained together are then captured in CUDA
graphs (``course.e_pretraining.together``), a trial to compare with a run without it.

G's last section pretrains a model of its own on a CUDA GPU (``--pretrain-steps``: 15,000 is the
course's recipe, about 6 minutes on one H100; fewer for a quick check).

The test suite runs on CPUs: it checks the device choice and E's CUDA-graph step with stand-ins
for ``torch.cuda`` (``tests/test_devices.py``, ``tests/test_cuda_graph_step.py``). What only this
run on a GPU proves is :data:`ONLY_ON_A_GPU`, printed at its start; a notebook whose setup cell
did not train on the device asked for fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = {
    "d": "d_language_model/language_model.ipynb",
    "e": "e_pretraining/pretraining_and_finetuning.ipynb",
    "g": "g_birth_places/birth_places.ipynb",
    "h": "h_own_gpt/own_gpt.ipynb",
}
NUMBER = re.compile(r"\d+\.\d+|\d{2,}")
# What the test suite, on CPUs with torch.cuda replaced, cannot prove; this run on a GPU does.
ONLY_ON_A_GPU = (
    "pick_device() chooses the GPU and each notebook's setup line says so (checked: FAILED if not)",
    "the notebooks' models, batches and masks train on it in full mode: no tensor left on the CPU "
    "(the suite looks for strays on the meta device)",
    "with --graphs, E's batched steps are captured and replayed in real CUDA graphs (a refused "
    "capture prints 'cannot be trained together', shown below with a '!')",
    "bfloat16 autocast on the card, and the times and numbers printed here, for this card only",
)
PRETRAIN_LINE = "PRETRAIN_STEPS = 15_000"


def cell_seconds(cell: nbformat.NotebookNode) -> float:
    """How long a code cell ran, from the timing nbclient records in its metadata."""
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def printed(cell: nbformat.NotebookNode, stream: str = "stdout") -> list[str]:
    """The lines a code cell printed on ``stream`` (stdout or stderr)."""
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == stream:
            lines += [line for line in output["text"].splitlines() if line.strip()]
    return lines


def full_mode_on(device: str, graphs: bool = False) -> None:
    """This process's environment (the kernels inherit it): full mode, trained on ``device``;
    with ``graphs``, E's runs trained together are captured in CUDA graphs (on trial)."""
    for name in ("COURSE_FAST", "NBGRADER_EXECUTION", "COURSE_CUDA_GRAPHS"):
        os.environ.pop(name, None)
    os.environ["COURSE_DEVICE"] = device
    if graphs:
        os.environ["COURSE_CUDA_GRAPHS"] = "1"


def run_notebook(source: Path, pretrain_steps: int, timeout: int, out: Path) -> dict:
    """Execute one notebook as the environment says (:func:`full_mode_on`); return its summary."""
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:  # G's own pretraining: the budget asked for
        cell.source = cell.source.replace(PRETRAIN_LINE, f"PRETRAIN_STEPS = {pretrain_steps}")
    error = None
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": scratch}}
        )
        try:
            client.execute()
        except CellExecutionError as failure:
            error = str(failure).strip().splitlines()[-1]
        seconds = time.perf_counter() - start
    nbformat.write(nb, out / source.name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    slowest = sorted(((cell_seconds(c), i) for i, c in enumerate(code)), reverse=True)[:5]
    setup = [c for c in code if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
    return {
        "notebook": f"{source.parent.name}/{source.name}",
        "device_line": next((x for c in setup for x in printed(c) if "training on" in x), None),
        "seconds": round(seconds, 1),
        "error": error,
        "slowest_cells": [
            {"cell": i, "seconds": round(s, 1), "starts": code[i].source.splitlines()[0][:70]}
            for s, i in slowest
        ],
        "numbers": [line for c in code for line in printed(c) if NUMBER.search(line)],
        "warnings": [x for c in code for x in printed(c, "stderr") if "Warning" in x],
        "untrained_together": [x for c in code for x in printed(c) if "cannot be trained" in x],
    }


def wrong_device(summary: dict, device: str) -> str | None:
    """Why a notebook's run did not train on ``device`` (None: it did, by its setup cell's
    line "training on DEVICE ...")."""
    line = summary["device_line"]
    if line is None:
        return "its setup cell printed no 'training on' line"
    if not re.match(rf"training on {re.escape(device)}\b", line):
        return f"asked for {device}, it trained elsewhere: {line}"
    return None


def report(summary: dict) -> None:
    """Print one notebook's summary."""
    print(f"\n=== {summary['notebook']}: {summary['seconds']} s; {summary['device_line']}")
    if summary["error"]:
        print(f"FAILED: {summary['error']}")
    for cell in summary["slowest_cells"]:
        print(f"  {cell['seconds']:>7.1f} s  cell {cell['cell']}: {cell['starts']}")
    for line in summary["numbers"]:
        print(f"  | {line[:150]}")
    for line in summary["warnings"] + summary["untrained_together"]:
        print(f"  ! {line[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="d,e,g,h", help="notebooks to run, e.g. e,h")
    parser.add_argument("--device", default="cuda", help="cuda (default), mps or cpu")
    parser.add_argument("--pretrain-steps", type=int, default=15_000, help="G's own pretraining")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds a cell may run")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "gpu_check")
    parser.add_argument("--graphs", action="store_true", help="E's batched steps in CUDA graphs")
    args = parser.parse_args()
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = set(keys) - set(NOTEBOOKS)
    if unknown or args.pretrain_steps < 10:
        parser.error(f"--only takes some of {','.join(NOTEBOOKS)}; --pretrain-steps at least 10")
    import torch  # after the arguments: --help answers at once

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU here: run on a machine with one, or pass --device cpu", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    graphs = ", E's steps in CUDA graphs" if args.graphs else ""
    print(
        f"torch {torch.__version__}, device {args.device} ({name}), {os.cpu_count()} CPUs{graphs}"
    )
    if args.device != "cpu":
        print("What only this run proves (the test suite uses torch.cuda stand-ins on CPUs):")
        for fact in ONLY_ON_A_GPU:
            print(f"  - {fact}")
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    full_mode_on(args.device, args.graphs)
    summaries = []
    for key in keys:
        source = REPO / "source" / NOTEBOOKS[key]
        summary = run_notebook(source, args.pretrain_steps, args.timeout, args.out)
        summary["error"] = summary["error"] or wrong_device(summary, args.device)
        summaries.append(summary)
        report(summary)
    record = {
        "device": name,
        "torch": torch.__version__,
        "graphs": args.graphs,
        "notebooks": summaries,
    }
    (args.out / "summary.json").write_text(json.dumps(record, indent=1))
    print(f"\nexecuted notebooks and summary.json in {args.out}")
    return 1 if any(s["error"] for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
