"""Steps per second of assignment G's pretraining, one lever at a time (a benchmark, not a test).

    python benchmarks/g_pretraining_speed.py                 # every lever, 40 timed steps each
    python benchmarks/g_pretraining_speed.py --steps 100 --threads 2

Each row times the same training step (the notebook's ``TransformerLM``, span corruption of
wiki.txt by the notebook's reference, AdamW, clipping at 1) with one thing changed:

- ``corrupt only``: making one batch of corrupted lines, no model (the cost the loop pays inline);
- ``inline, float32``: the step as ``tools/pretrain_birth_places.py`` ran it before (batch made in
  the loop, float32);
- ``model only, float32``: batches made beforehand, so only the model's step is timed;
- ``model only, bf16 autocast``: the same under ``torch.autocast("cpu", dtype=torch.bfloat16)``;
- ``model only, float32, fused AdamW``: float32 with AdamW's fused kernel;
- the same rows for CS224N's size (``--d-model 256``: width 256, 8 heads, 4 layers).

Figures depend on what else runs on the machine: compare rows of one run. The first line printed
says which vector instructions torch uses: bfloat16 is fast only where it reports AVX-512 (with
BF16) or AMX.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from pretrain_birth_places import CharLMConfig, given  # noqa: E402

from course.data import load_wiki_lines  # noqa: E402
from course.g_birth_places import finetune  # noqa: E402
from course.g_birth_places.chars import CharVocab, corruption_rows  # noqa: E402


def timed(step: Callable[[], None], steps: int, warmup: int = 5) -> float:
    """Steps per second of ``step`` over ``steps`` calls, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def trainer(model: nn.Module, causal_mask, bf16: bool, fused: bool) -> Callable:
    """One optimizer step on a batch (x, y), as the pretraining loop takes it
    (:func:`course.g_birth_places.finetune.train_step`)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=fused)
    cpu = torch.device("cpu")

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        finetune.train_step(model, optimizer, (x, y), causal_mask, cpu, bf16)

    return step


def rows_for(d_model: int, steps: int, batch_size: int) -> list[tuple[str, float]]:
    """(lever, steps per second) for one model size."""
    code, lines, vocab = given(), load_wiki_lines(), CharVocab.build()
    gen = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        return corruption_rows(lines, code.span_corruption, vocab, 128, batch_size, gen)

    ready = [batch() for _ in range(16)]
    cfg = CharLMConfig(len(vocab), d_model=d_model, nhead=d_model // 32, d_hid=4 * d_model)
    out: list[tuple[str, float]] = [(f"corrupt only (batch {batch_size})", timed(batch, steps))]

    def model_rows(name: str, bf16: bool, fused: bool, source: Callable) -> None:
        torch.manual_seed(0)
        step = trainer(code.TransformerLM(**vars(cfg)), code.causal_mask, bf16, fused)
        out.append((name, timed(lambda: step(*source()), steps)))

    cycle = iter(lambda: ready[int(torch.randint(16, ()))], None)
    model_rows("inline, float32", False, False, batch)
    model_rows("model only, float32", False, False, lambda: next(cycle))
    model_rows("model only, bf16 autocast", True, False, lambda: next(cycle))
    model_rows("model only, float32, fused AdamW", False, True, lambda: next(cycle))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, batch {args.batch_size}, block 128")
    print(f"torch's CPU capability: {torch.backends.cpu.get_cpu_capability()}")
    for d_model in args.sizes:
        print(f"\nwidth {d_model}, {d_model // 32} heads, 4 layers")
        for name, rate in rows_for(d_model, args.steps, args.batch_size):
            print(f"  {name:<36} {rate:6.2f} steps/s")


if __name__ == "__main__":
    main()
