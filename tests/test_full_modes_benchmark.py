"""benchmarks/full_modes.py writes docs/speed.md's one table of full-mode times (no notebook is run
here: the table is made from given figures)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "full_modes.py"
spec = importlib.util.spec_from_file_location("full_modes", SCRIPT)
full_modes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(full_modes)

FIGURES = {"notebook": "E, pretraining", "cpu_seconds": 700.0, "load": [0.1, 1.9]}


def test_the_table_says_each_time_and_which_miss_the_goal() -> None:
    results = {
        "e": FIGURES | {"seconds": 412.4, "date": "28 Nov 2026 23:00 UTC"},
        "d": FIGURES | {"notebook": "D, language model", "seconds": 59.6, "date": "x"},
    }
    text = full_modes.table(results)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith("| D, language model | 1 min 00 s | 11 min 40 s | 0.1, 1.9 |")
    assert rows[2].startswith("| E, pretraining | 6 min 52 s (over the goal) |")
    assert rows[2].endswith("| 2026-11-28 |") and rows[1].endswith("| x |")  # the day only


def test_only_the_part_between_the_markers_is_rewritten() -> None:
    text = f"before\n{full_modes.BEGIN}\nold table\n{full_modes.END}\nafter\n"
    new = full_modes.rewritten(text, "new table")
    assert new == f"before\n{full_modes.BEGIN}\nnew table\n{full_modes.END}\nafter\n"
    with pytest.raises(SystemExit, match="markers"):
        full_modes.rewritten("no markers here", "new table")


def test_the_docs_hold_the_markers_and_an_unknown_notebook_is_refused() -> None:
    speed = (REPO / "docs" / "speed.md").read_text()
    assert speed.count(full_modes.BEGIN) == 1 and speed.count(full_modes.END) == 1
    with pytest.raises(SystemExit, match="no notebook z"):
        full_modes.main(["--only", "z"])


def test_the_figures_are_printed_cell_by_cell_with_the_slow_cells() -> None:
    record = {
        "printed": {"6": "ppl 109\nok\n", "29": "seed 0 67.8\n"},
        "seconds of the cells over 2 s": {"29": 56.2},
    }
    assert full_modes.figures(record).splitlines() == [
        "  cell 6:", "    ppl 109", "    ok", "  cell 29:", "    seed 0 67.8", "  cell 29 ran 56 s",
    ]  # fmt: skip


def test_each_time_is_shown_with_the_machine_it_was_measured_on() -> None:
    box = {"processor": "AMD EPYC", "cores": 2, "float32_gflops": 92.5, "bfloat16_gflops": 1.2}
    results = {
        "e": FIGURES | {"seconds": 250.0, "date": "x", "machine": box},
        "g": FIGURES | {"notebook": "G, birth places", "seconds": 270.0, "date": "y"},
    }
    rows = [line for line in full_modes.table(results).splitlines() if line.startswith("| ")]
    assert "| AMD EPYC, 2 cores: 92 / 1 | x |" in rows[1]
    assert "| not recorded | y |" in rows[2]
    gpu = full_modes.described(box | {"label": "one H200"})
    assert gpu.startswith("one H200 with AMD EPYC, 2 cores")


def test_the_machine_record_measures_both_matmuls() -> None:
    box = full_modes.machine(seconds=0.05)
    assert box["processor"] and box["cores"] >= 1
    assert box["float32_gflops"] > 0 and box["bfloat16_gflops"] > 0


def test_a_run_on_another_machine_is_kept_beside_the_main_record() -> None:
    assert full_modes.key("e") == "e" and full_modes.key("e", "avx2") == "e-avx2"
    results = {
        "e": FIGURES | {"seconds": 250.0, "date": "x"},
        "e-avx2": FIGURES | {"notebook": "E, pretraining (avx2)", "seconds": 700.0, "date": "y"},
    }
    rows = [line for line in full_modes.table(results).splitlines() if line.startswith("| E")]
    assert [row.split(" | ")[0] for row in rows] == ["| E, pretraining", "| E, pretraining (avx2)"]
    with pytest.raises(SystemExit, match="letters, digits and _ only"):
        full_modes.main(["--only", "e", "--beside", "../x"])


def test_the_floor_runs_float32_on_avx2_kernels_and_says_so() -> None:
    """--floor's limits reach PyTorch (read when it loads) and the course (no bfloat16), and the
    machine record names them, so a floor time is never mistaken for the machine's own."""
    script = (
        "import importlib.util, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location('fm', {str(SCRIPT)!r})\n"
        "fm = importlib.util.module_from_spec(spec); spec.loader.exec_module(fm)\n"
        "from course.device import bf16_helps\n"
        "box = fm.machine(0.05)\n"
        "print(torch.backends.cpu.get_cpu_capability(), bf16_helps('cpu'), box.get('limits'))\n"
        "print(fm.described(box))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in full_modes.FLOOR_LIMITS}
    run = subprocess.run(
        [sys.executable, "-c", script],
        env=env | full_modes.FLOOR_LIMITS,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    first, second = run.stdout.splitlines()
    assert first.split(" ", 2) == ["AVX2", "False", "float32 only, AVX2 kernels (--floor)"]
    assert re.search(r", \d+ cores, floor: \d+ / \d+$", second), second
    mine = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert mine.stdout.splitlines()[0].endswith(" None")  # no limits: none named
