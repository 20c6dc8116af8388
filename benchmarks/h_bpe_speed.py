"""Seconds of assignment H's ``bpe_merges`` on the notebook's comparison (a benchmark, not a test).

    python benchmarks/h_bpe_speed.py              # 300 merges, Tiny Shakespeare's training words
    python benchmarks/h_bpe_speed.py --merges 50  # a quicker look

Two ways to learn the same merges (plain Python), each timed once:

- ``recount every pair``: after each merge, count every pair of every word again (the simple way
  that exercise 8 calls right and slow);
- ``notebook's reference``: the model answer of ``source/h_own_gpt/own_gpt.ipynb`` (its
  ``bpe_solution`` cell, read from the notebook), which updates only the words holding the merged
  pair.

The words are those of the notebook's full mode (``experiment.word_counts`` of every training
line). The last line says whether both ways learned the same merges. Each row gives the wall time
and the CPU time of this process: on a busy machine the wall time grows with the load (printed
first), the CPU time much less; compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from course.h_own_gpt import experiment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
from notebook_code import notebook_code  # noqa: E402 - tools/ is not a package

NOTEBOOK = REPO / "source/h_own_gpt/own_gpt.ipynb"
Merges = Callable[[dict[str, int], int], list[tuple[str, str]]]


def recount_merges(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """BPE's merges, every pair counted again after each merge (ties: the smallest pair)."""
    words = {tuple(word): count for word, count in word_counts.items()}
    merges = []
    for _ in range(num_merges):
        pairs: dict[tuple[str, str], int] = {}
        for symbols, count in words.items():
            for pair in zip(symbols, symbols[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged: dict[tuple[str, ...], int] = {}
        for symbols, count in words.items():
            out, i = [], 0
            while i < len(symbols):
                if symbols[i : i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        words = merged
    return merges


def reference_merges() -> Merges:
    """The notebook's model answer of exercise 8, executed from its ``bpe_solution`` cell (the
    course's own source: no student code runs here)."""
    return notebook_code(NOTEBOOK, "bpe_solution").bpe_merges


def timed(function: Merges, counts: dict[str, int], merges: int) -> tuple[list, float, float]:
    """The merges learned, the wall seconds and the CPU seconds they took."""
    wall, cpu = time.perf_counter(), time.process_time()
    learned = function(counts, merges)
    return learned, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=300)
    args = parser.parse_args()
    train_lines, _ = experiment.shakespeare_lines(None)
    counts = experiment.word_counts(train_lines)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print(f"{len(counts):,} distinct words, {args.merges} merges")
    results = {}
    for name, function in (
        ("recount every pair", recount_merges),
        ("notebook's reference", reference_merges()),
    ):
        results[name], wall, cpu = timed(function, counts, args.merges)
        print(f"{name:<22} {wall:6.1f} s wall, {cpu:6.1f} s CPU")
    same = results["recount every pair"] == results["notebook's reference"]
    print("the same merges in the same order" if same else "the merges DIFFER")


if __name__ == "__main__":
    main()
