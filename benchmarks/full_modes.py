"""Each instructor notebook run top to bottom in full mode, timed; writes docs/speed.md's table.

    python benchmarks/full_modes.py                 # every notebook, A to H
    python benchmarks/full_modes.py --only d,e,h    # some of them
    python benchmarks/full_modes.py --table-only    # the table again from what was recorded
    python benchmarks/full_modes.py --only e --beside avx2   # another machine, kept beside
    python benchmarks/full_modes.py --only e,g --floor       # as on a laptop: float32, AVX2

Full mode is the notebook as an instructor or a self-learner runs it (``COURSE_FAST`` and
``NBGRADER_EXECUTION`` unset: the experiments as the text describes them), executed as
``tools/record_run.py`` does. For each notebook it prints what the cells printed (the figures its
text quotes; ``--quiet``: not), the seconds of each cell over 2 s, the wall-clock seconds, the CPU
seconds of the kernel and its children, the load average before and after (another job on the
machine slows every figure), and writes the cells' printouts and times to
``tools/stages/full_modes/LETTER.json``, with the notebook's code hash (``record_run.code_hash``:
``tests/test_record_hashes.py`` fails when the notebook's code has changed since). Beside each
time it records the machine (its processor's model, its cores, and the GFLOP/s of one second of
square matmuls in float32 and in bfloat16, so that a reader can scale a time to their own
machine: a processor without bfloat16 instructions emulates it, far below its float32 figure).
The latest result of each notebook is kept in ``tools/stages/full_modes.json``; the table in
docs/speed.md (between its two markers) is written from that file, so that the docs quote one
set of full-mode CPU figures, each with its date and load. On a GPU machine,
``COURSE_DEVICE=cuda`` and ``--label`` name the device.

``--floor`` runs the floor machine's kernels on a faster one: float32 only (``COURSE_FLOAT32=1``:
no bfloat16 autocast) and PyTorch's, oneDNN's and MKL's code for AVX2 at most
(``FLOOR_LIMITS``), as on a laptop without AVX-512. The limits are read when PyTorch loads, so
the script starts again with them set; its machine record then names them and gives the GFLOP/s
measured under them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import record_run  # noqa: E402 - tools/ is not a package

RESULTS = REPO / "tools" / "stages" / "full_modes.json"
RECORDS = REPO / "tools" / "stages" / "full_modes"
SPEED = REPO / "docs" / "speed.md"
BEGIN = "<!-- full_modes: begin (written by benchmarks/full_modes.py) -->"
END = "<!-- full_modes: end -->"
FLOOR_LIMITS = {
    "COURSE_FLOAT32": "1",
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}
GOAL_SECONDS = 300  # issue 61: each notebook's full mode in 5 minutes on 2 idle cores
NOTEBOOKS = {
    "a": ("A, masks", "a_masks/masks_and_positions.ipynb"),
    "b": ("B, attention", "b_attention/attention_and_layer.ipynb"),
    "c": ("C, parameters", "c_params/counting_parameters.ipynb"),
    "d": ("D, language model", "d_language_model/language_model.ipynb"),
    "e": ("E, pretraining and fine-tuning", "e_pretraining/pretraining_and_finetuning.ipynb"),
    "f": ("F, attention exploration", "f_attention_exploration/attention_exploration.ipynb"),
    "g": ("G, what a pretrained model knows", "g_birth_places/birth_places.ipynb"),
    "h": ("H, your own GPT", "h_own_gpt/own_gpt.ipynb"),
}


def processor() -> str:
    """The processor's model as the operating system names it (``platform.processor()`` when
    ``/proc/cpuinfo`` is absent or names none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def matmul_gflops(dtype_name: str, seconds: float = 1.0, n: int = 512) -> float:
    """GFLOP/s of ``n`` x ``n`` matmuls in ``dtype_name`` ("float32" or "bfloat16") done for
    ``seconds`` on every core PyTorch uses (2 n^3 FLOPs each, after one warm-up product)."""
    import torch

    a = torch.randn(n, n).to(getattr(torch, dtype_name))
    b = torch.randn(n, n).to(a.dtype)
    torch.matmul(a, b)
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        torch.matmul(a, b)
        done += 1
    return round(2 * n**3 * done / elapsed / 1e9, 1)


def machine(seconds: float = 1.0) -> dict:
    """The machine a time was measured on: processor, cores, and its matmul GFLOP/s in float32
    and bfloat16 (``seconds`` of each), with the floor's limits when they are set."""
    box = {
        "processor": processor(),
        "cores": os.cpu_count(),
        "float32_gflops": matmul_gflops("float32", seconds),
        "bfloat16_gflops": matmul_gflops("bfloat16", seconds),
    }
    if floor_limits_set():
        box["limits"] = "float32 only, AVX2 kernels (--floor)"
    return box


def floor_limits_set() -> bool:
    """Whether this process runs under every one of ``FLOOR_LIMITS``."""
    return all(os.environ.get(name) == value for name, value in FLOOR_LIMITS.items())


def under_floor_limits(argv: list[str]) -> None:
    """Start this script again with ``FLOOR_LIMITS`` set (PyTorch reads them when it loads)."""
    env = os.environ | FLOOR_LIMITS
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)


def described(box: dict | None) -> str:
    """A machine record in a few words, for the table ("not recorded" for old results):
    processor, cores, ``floor`` where its limits were set, GFLOP/s in float32 / bfloat16."""
    if not box:
        return "not recorded"
    label = f"{box['label']} with " if box.get("label") else ""
    limits = ", floor" if box.get("limits") else ""
    return (
        f"{label}{box['processor']}, {box['cores']} cores{limits}: "
        f"{box['float32_gflops']:.0f} / {box['bfloat16_gflops']:.0f}"
    )


def key(letter: str, beside: str = "") -> str:
    """The name of a run's record and row: the letter, or ``LETTER-NAME`` for a run kept beside
    the main one (``--beside NAME``: another machine), which the notebooks' texts do not quote."""
    return f"{letter}-{beside}" if beside else letter


def measure(letter: str, timeout: int, label: str = "", beside: str = "") -> tuple[dict, dict]:
    """Run one notebook in full mode; its figures, and its record (what its cells printed, the
    seconds of its slow cells)."""
    title, path = NOTEBOOKS[letter]
    title += f" ({beside})" if beside else ""
    box = machine() | ({"label": label} if label else {})
    before = os.getloadavg()[0]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    source = REPO / "source" / path
    written_by = record_run.code_hash(nbformat.read(source, as_version=4))
    nb, seconds = record_run.run(source, timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    printed = {
        str(index): text
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (text := record_run.printed(cell))
    }
    slow = slow_cells(nb)
    RECORDS.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": box,
        "notebook": f"source/{path}",
        "code_hash": written_by,
        "printed": printed,
        "seconds of the cells over 2 s": slow,
    }
    text = json.dumps(record, indent=1, ensure_ascii=False)
    (RECORDS / f"{key(letter, beside)}.json").write_text(text)
    return record, {
        "notebook": title,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "load": [round(before, 2), round(os.getloadavg()[0], 2)],
        "date": dt.datetime.now(dt.UTC).strftime("%d %b %Y %H:%M UTC"),
        "machine": box,
    }


def slow_cells(nb, at_least: float = 2.0) -> dict[str, float]:
    """Seconds of each code cell that ran ``at_least`` seconds (nbclient's timestamps)."""
    slow = {}
    for index, cell in enumerate(nb.cells):
        timing = cell.get("metadata", {}).get("execution", {})
        began, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and began and ended:
            seconds = dt.datetime.fromisoformat(ended) - dt.datetime.fromisoformat(began)
            if seconds.total_seconds() >= at_least:
                slow[str(index)] = round(seconds.total_seconds(), 1)
    return slow


def figures(record: dict) -> str:
    """What each cell printed (the figures the notebook's text quotes, to set beside it), and
    the seconds of its slow cells."""
    lines = []
    for index, text in record["printed"].items():
        lines.append(f"  cell {index}:")
        lines.extend(f"    {line}" for line in text.rstrip("\n").splitlines())
    for index, seconds in record["seconds of the cells over 2 s"].items():
        lines.append(f"  cell {index} ran {seconds:.0f} s")
    return "\n".join(lines)


def minutes(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


def day(date: str) -> str:
    """The day of a recorded date ("29 Nov 2026 01:36 UTC" -> "2026-11-29"); another text as is."""
    try:
        return dt.datetime.strptime(date, "%d %b %Y %H:%M UTC").date().isoformat()
    except ValueError:
        return date


def table(results: dict[str, dict]) -> str:
    """The markdown table of ``results`` (letter -> figures), A to H, each with its machine."""
    rows = [
        f"Goal: at most {minutes(GOAL_SECONDS)} each on 2 idle cores. Machine: processor, cores "
        "(floor: float32 and AVX2 only, `--floor`), GFLOP/s of matmuls in float32 / bfloat16; a "
        "time scales with the float32 figure (G's with the larger).",
        "",
        "| notebook | full mode, wall clock | CPU (kernel) | load before, after | machine "
        "| measured |",
        "|---|---|---|---|---|---|",
    ]
    for letter in sorted(results):
        r = results[letter]
        mark = "" if r["seconds"] <= GOAL_SECONDS else " (over the goal)"
        rows.append(
            f"| {r['notebook']} | {minutes(r['seconds'])}{mark} | {minutes(r['cpu_seconds'])} "
            f"| {r['load'][0]}, {r['load'][1]} | {described(r.get('machine'))} | {day(r['date'])} |"
        )
    return "\n".join(rows)


def rewritten(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block``."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"docs/speed.md has no markers {BEGIN!r} ... {END!r}: put them back")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="abcdefgh", help="letters, e.g. d,e,h (default: all)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell at most")
    parser.add_argument("--table-only", action="store_true", help="rewrite the table, run none")
    parser.add_argument("--label", default="", help="the machine, if not this CPU (a GPU's name)")
    parser.add_argument(
        "--beside",
        default="",
        metavar="NAME",
        help="keep the run beside the main record, as "
        "LETTER-NAME (another machine; the texts quote the main one)",
    )
    parser.add_argument("--quiet", action="store_true", help="times only, not what cells printed")
    parser.add_argument(
        "--floor", action="store_true", help="float32 only and AVX2 kernels, as on a laptop"
    )
    args = parser.parse_args(argv)
    if args.floor and not floor_limits_set():
        under_floor_limits(sys.argv[1:] if argv is None else argv)
    letters = [c for c in args.only.lower() if c.isalpha()]
    if args.beside and not args.beside.replace("_", "").isalnum():
        raise SystemExit(f"--beside {args.beside!r}: letters, digits and _ only")
    unknown = sorted(set(letters) - set(NOTEBOOKS))
    if unknown:
        raise SystemExit(f"no notebook {', '.join(unknown)}: choose among {''.join(NOTEBOOKS)}")
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    for letter in [] if args.table_only else letters:
        print(f"{NOTEBOOKS[letter][0]}: running in full mode ...", flush=True)
        name = key(letter, args.beside)
        record, results[name] = measure(letter, args.timeout, args.label, args.beside)
        r = results[name]
        if not args.quiet:
            print(figures(record))
        print(f"  {r['seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s CPU, load {r['load']}")
        print(f"  on {described(r['machine'])}")
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    SPEED.write_text(rewritten(SPEED.read_text(), table(results)))
    print(f"wrote the table of {len(results)} notebooks into {SPEED.relative_to(REPO)}")


if __name__ == "__main__":
    main()
