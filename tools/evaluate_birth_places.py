"""Measure a pretraining stage of assignment G as the notebook's experiment does (instructors only).

    python tools/evaluate_birth_places.py tools/stages/some_stage.pt          # 3 seeds, CPU
    python tools/evaluate_birth_places.py a.pt b.pt --seeds 0 --device cuda   # several, a GPU

For each checkpoint and seed: the notebook's fine-tuning (10 epochs over the 2,000 training pairs
in batches of 64, AdamW at 6e-4 with a 10% warm-up, the seed's shuffling), then greedy answers to
the 500 development questions, scored by exact match as ``dev_accuracy`` asks. With
``--scratch`` the same model with random weights is measured too. The numbers match the
notebook's full mode on the same device (a GPU's sums differ in the last bits, so its answers may
differ from the CPU's by a question or two).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from pretrain_birth_places import given

from course.data import load_birth_places
from course.g_birth_places import finetune
from course.g_birth_places.chars import CharVocab, question_rows
from course.g_birth_places.checkpoint import load_pretrained

EPOCHS, BATCH, LR = 10, 64, 6e-4  # the notebook's experiment cell


def accuracy(predictions: list[str], answers: list[str]) -> float:
    """Fraction of exact matches, spaces around either ignored (the notebook's definition)."""
    return sum(p.strip() == a.strip() for p, a in zip(predictions, answers, strict=True)) / len(
        answers
    )


def measure(
    path: Path, seed: int, scratch: bool, device: str, epochs: int = EPOCHS, n_dev: int = 500
) -> tuple[float, float]:
    """Fine-tune the checkpoint (or its configuration from random weights) with ``seed``;
    return (development accuracy, seconds)."""
    code = given()
    train_pairs, dev_pairs = load_birth_places("train"), load_birth_places("dev")
    vocab = CharVocab.build()
    torch.manual_seed(seed)
    model, _, info = load_pretrained(code.TransformerLM, path)
    if scratch:
        model = code.TransformerLM(**info["config"])
    model = model.to(device)
    block = info["train"]["block_size"]
    train_x, train_y = question_rows(train_pairs, vocab, block)
    steps = epochs * math.ceil(len(train_pairs) / BATCH)
    start = time.perf_counter()
    finetune.train_steps(
        model, finetune.epoch_batches(train_x, train_y, BATCH, seed), steps, code.causal_mask,
        lr=LR, warmup=steps // 10, seed=seed, desc=f"seed {seed}",
    )  # fmt: skip
    questions = [q for q, _ in dev_pairs[:n_dev]]
    predictions = finetune.answer(model, vocab, questions, code.causal_mask, block)
    answers = [a for _, a in dev_pairs[:n_dev]]
    return accuracy(predictions, answers), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description="Dev accuracy of G's pretraining stages.")
    parser.add_argument("checkpoints", type=Path, nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--scratch", action="store_true", help="also from random weights")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="fewer for a smoke test")
    parser.add_argument("--dev", type=int, default=500, help="development questions to answer")
    args = parser.parse_args()
    for path in args.checkpoints:
        info = torch.load(path, map_location="cpu", weights_only=False)
        train = info["train"]
        print(
            f"{path}: {info['config']}, {train['steps']} steps, "
            f"{train['passes_over_wiki']} passes, loss per character {info['loss']:.3f}"
        )
        for setup in ["pretrained", "scratch"] if args.scratch else ["pretrained"]:
            for seed in args.seeds:
                acc, seconds = measure(
                    path, seed, setup == "scratch", args.device, args.epochs, args.dev
                )
                share = f"{100 * acc:.1f}% of {args.dev}"
                print(f"  {setup:<10} seed {seed}: {share} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
