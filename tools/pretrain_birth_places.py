"""Pretrain the character model that assignment G fine-tunes (instructors only).

    python tools/pretrain_birth_places.py --device cuda --bf16   # the shipped run (6 min, one GPU)
    python tools/pretrain_birth_places.py --steps 40 --d-model 64 --out /tmp/g.pt   # a smoke test

The defaults are the shipped recipe, at CS224N's size and budget: width 256, 8 heads, 4 layers,
batches of 128 lines, 15,000 steps (650 passes over ``wiki.txt``); AdamW at 3e-3 (CS224N: 6e-3).
On a 2-core CPU that budget takes many hours: run it in stages (``--minutes`` and ``--resume``),
or on a GPU.

The model is assignment D's language model as G's notebook gives it (the read-only cell
``given_lm`` of ``source/g_birth_places/``), here over characters. The objective is CS224N's span
corruption with a closing MASK after the span: at every step, random lines of ``wiki.txt`` are
corrupted afresh by the notebook's
reference solution (the cell ``span_corruption_solution``), so the checkpoint always fits the
notebook and the student package holds no copy of a graded answer. The loss skips the PAD targets.

The checkpoint holds the weights (float16; the positional table is rebuilt on loading) and what is
needed to reproduce and judge them: configuration, characters, seed, SHA-256 of ``wiki.txt``,
the budget (steps, seconds, threads, a ``smoke`` flag for short runs) and the loss per character on
a fixed set of corrupted lines, before and after (:mod:`course.g_birth_places.checkpoint`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch
from notebook_code import ModelSizes, notebook_code
from torch import nn

from course.data import load_wiki_lines
from course.g_birth_places import finetune
from course.g_birth_places.chars import IGNORE, CharVocab, corruption_rows
from course.g_birth_places.checkpoint import COMPUTED, SHIPPED, load_pretrained, wiki_sha256
from course.g_birth_places.checks import MASK, PAD

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "source" / "g_birth_places" / "birth_places.ipynb"
SHIPPED_STEPS = 15_000  # the budget of the shipped checkpoint (docs/experiments.md)


# The shipped checkpoint's sizes: CharLMConfig(ntokens, ...) -> ModelSizes
CharLMConfig = partial(ModelSizes, d_model=256, nhead=8, d_hid=1024, nlayers=4)


def notebook_cells(*grade_ids: str, notebook: Path = NOTEBOOK) -> SimpleNamespace:
    """Run the notebook's cells ``grade_ids`` (the course's own code); return what they define."""
    return notebook_code(notebook, *grade_ids, MASK=MASK, PAD=PAD)


def given() -> SimpleNamespace:
    """The notebook's model (``TransformerLM``, ``causal_mask``) and reference
    ``span_corruption``."""
    return notebook_cells("given_lm", "span_corruption_solution")


@torch.no_grad()
def corruption_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, causal_mask) -> float:
    """Mean cross-entropy per target character (PAD targets skipped), in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for bx, by in zip(x.split(128), y.split(128), strict=True):
        bx, by = bx.to(device), by.to(device)
        logits = model(bx, causal_mask(bx.size(1)).to(device))  # (b, L, V)
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1), by.flatten(), ignore_index=IGNORE, reduction="sum"
        )
        total, count = total + float(loss), count + int((by != IGNORE).sum())
    return total / count


def pretrain(
    steps: int = SHIPPED_STEPS,
    minutes: float | None = None,
    seed: int = 0,
    block_size: int = 128,
    batch_size: int = 128,
    lr: float = 3e-3,
    warmup: int = 500,
    config: dict | None = None,
    resume: Path | None = None,
    bf16: bool = False,
    device: str = "cpu",
) -> dict:
    """Pretrain the notebook's ``TransformerLM`` with span corruption for ``steps`` steps (or
    until ``minutes`` have passed); return the checkpoint (see the module's docstring).

    With ``resume``, training goes on from that checkpoint's weights (its configuration, a new
    warm-up and decay) and the budget recorded is the sum of both stages. ``device`` may be a GPU
    ("cuda"); the corruption stays on the CPU and the checkpoint is saved from the CPU."""
    code = given()
    lines = load_wiki_lines()
    vocab = CharVocab.build()
    torch.manual_seed(seed)
    earlier: dict = {"steps": 0, "seconds": 0, "stages": []}
    first_seed, stage_seed, earlier_losses = seed, seed, []
    if resume is not None:
        model, _, info = load_pretrained(code.TransformerLM, resume)
        cfg = CharLMConfig(**info["config"])
        earlier, first_seed, earlier_losses = info["train"], info["seed"], info["train_losses"]
        stage_seed = first_seed + len(earlier.get("stages", [1])) + 1  # fresh corruptions
    else:
        cfg = CharLMConfig(ntokens=len(vocab), **(config or {}))
        model = code.TransformerLM(**asdict(cfg))
    model = model.to(device)
    held = torch.Generator().manual_seed(12345)  # a fixed set of corrupted lines to measure
    held_x, held_y = corruption_rows(lines, code.span_corruption, vocab, block_size, 512, held)
    untrained = corruption_loss(model, held_x, held_y, code.causal_mask)
    if resume is not None:
        untrained = info["untrained_loss"]  # the loss of the first stage's random weights
    gen = torch.Generator().manual_seed(stage_seed)

    def batches(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        return corruption_rows(lines, code.span_corruption, vocab, block_size, batch_size, gen)

    history = finetune.train_steps(
        model, batches, steps, code.causal_mask, lr=lr, warmup=min(warmup, steps // 10),
        seed=stage_seed, time_budget_s=None if minutes is None else 60 * minutes, report_every=100,
        desc="pretraining", bf16=bf16,
    )  # fmt: skip
    stage = {
        "steps": history.steps,
        "seconds": round(history.seconds),
        "lr": lr,
        "seed": stage_seed,
        "bf16": bf16,
        "threads": torch.get_num_threads(),
        "device": _device_name(device),
    }
    stages = earlier.get("stages") or ([] if resume is None else [_as_stage(earlier)])
    total_steps = earlier["steps"] + history.steps
    return {
        "state_dict": {
            k: v.half().cpu() for k, v in model.state_dict().items() if k not in COMPUTED
        },
        "config": asdict(cfg),
        "itos": vocab.itos,
        "seed": first_seed,
        "data_sha256": wiki_sha256(),
        "data": {"wiki_lines": len(lines), "characters": sum(map(len, lines))},
        "train": {
            "steps": total_steps,
            "seconds": earlier["seconds"] + round(history.seconds),
            "block_size": block_size,
            "batch_size": batch_size,
            "lr": lr,
            "warmup": min(warmup, steps // 10),
            "passes_over_wiki": round(total_steps * batch_size / len(lines), 1),
            "stages": [*stages, stage],
            "threads": torch.get_num_threads(),
            "torch": str(torch.__version__),
            "smoke": total_steps < SHIPPED_STEPS,
        },
        "train_losses": earlier_losses + history.losses,
        "loss": corruption_loss(model, held_x, held_y, code.causal_mask),
        "untrained_loss": untrained,
    }


def _device_name(device: str) -> str:
    """The processor a stage ran on, as the record names it ("cpu", or the GPU's name)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return "cpu"


def _as_stage(train: dict) -> dict:
    """A checkpoint's single training run, as a stage of a resumed one."""
    return {k: train[k] for k in ("steps", "seconds", "lr") if k in train}


def main() -> None:
    parser = argparse.ArgumentParser(description="Pretrain assignment G's character model.")
    parser.add_argument("--steps", type=int, default=SHIPPED_STEPS, help="training steps")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--device", default="cpu", help='"cpu", or "cuda" for a GPU')
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--resume", type=Path, default=None, help="go on from this checkpoint")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast: use it on a GPU; on a CPU 1.4 times faster where torch reports "
        "AVX512 (the course's 2-core machine), 7 times slower where it runs at AVX2 "
        "(benchmarks/g_pretraining_speed.py tells)",
    )
    args = parser.parse_args()
    config = {"d_model": args.d_model, "d_hid": 4 * args.d_model, "nlayers": args.layers}
    config["nhead"] = max(1, args.d_model // 32)
    start = time.perf_counter()
    checkpoint = pretrain(
        steps=args.steps,
        minutes=args.minutes,
        seed=args.seed,
        batch_size=args.batch_size,
        config=config,
        resume=args.resume,
        bf16=args.bf16,
        lr=args.lr,
        device=args.device,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, args.out)
    train = checkpoint["train"]
    print(
        f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) in "
        f"{time.perf_counter() - start:.0f} s: {train['steps']} steps "
        f"({train['steps'] / max(1, train['seconds']):.2f} steps/s, "
        f"{train['passes_over_wiki']} passes over wiki.txt); loss per character "
        f"{checkpoint['loss']:.3f} (untrained {checkpoint['untrained_loss']:.3f})"
        + (" [SMOKE: not the shipped budget]" if train["smoke"] else "")
    )


if __name__ == "__main__":
    main()
