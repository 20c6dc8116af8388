"""Pretrain the small Transformer language model that assignment E fine-tunes (instructors only).

    python tools/pretrain_review_lm.py        # 4,000 steps: course/e_pretraining/review_lm.pt
    python tools/pretrain_review_lm.py --minutes 1 --out /tmp/lm.pt     # a quick try

The model is assignment D's language model, exactly as E's notebook gives it to the students:
its code is read from the read-only cell ``given_lm`` of ``source/e_pretraining/`` (see
:func:`given_lm`), so the checkpoint always fits the class the notebook defines, and the
student package holds no copy of D's answers. The text is :mod:`course.e_pretraining.text`
(training-split review sentences, labels never read, six novels and WikiText-2's validation
and test articles; no line containing a classification validation or test sentence). The
vocabulary is built from the review sentences only, since they are the text the classifier will
read.

The checkpoint holds the weights (float16; the positional table is rebuilt on loading) and what
is needed to reproduce and judge them: configuration, vocabulary, seed, SHA-256 of the text,
training budget and the validation loss reached (:mod:`course.e_pretraining.checkpoint`).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch
from notebook_code import ModelSizes, notebook_code

from course import training
from course.data import WordTokenizer
from course.e_pretraining.checkpoint import COMPUTED, SHIPPED
from course.e_pretraining.text import SPLIT_SEED, pretraining_texts, text_hash

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "source" / "e_pretraining" / "pretraining_and_finetuning.ipynb"
GIVEN_CELL = "given_lm"
EXTRA_PARTS = ("novels", "wikitext")  # unlabelled text besides the training-split reviews


# The shipped checkpoint's sizes: LMConfig(ntokens, ...) -> ModelSizes
LMConfig = partial(ModelSizes, d_model=128, nhead=4, d_hid=256, nlayers=2)


def given_lm(notebook: Path = NOTEBOOK) -> SimpleNamespace:
    """Run the notebook's read-only cell ``given_lm``; return what it defines.

    That cell gives the students D's answers that E needs: ``causal_mask``,
    ``PositionalEncoding``, ``TransformerLM`` and ``make_lm_batches``.
    """
    return notebook_code(notebook, GIVEN_CELL)


def pretrain(
    steps: int | None = 4000,
    minutes: float | None = None,
    seed: int = 0,
    seq_len: int = 64,
    batch_size: int = 32,
    lr: float = 1e-3,
    vocab_size: int = 6000,
    extra: Sequence[str] = EXTRA_PARTS,
    review_repeats: int = 3,
    warmup: int = 500,
    config: dict | None = None,
) -> dict:
    """Pretrain the notebook's ``TransformerLM`` for ``steps`` steps or ``minutes``.

    A step budget gives the same model on any machine (the default), with the learning rate
    warmed up over ``warmup`` steps and then lowered along a cosine to a tenth; a time budget
    (constant rate) stops earlier on a slow or busy one. 4,000 steps (8.2 million tokens, about
    13 minutes on 2 idle cores) reach a held-out loss of 4.690 nats per token, flat from 2,500
    steps on; longer runs make it rise (4.848 after 8,000 steps, 5.068 after 12,000): the review
    sentences are few, and the model learns them by heart. The longer runs did not fine-tune
    better either (assignment E's label-count experiment, within the spread between seeds), nor
    did 4 layers (held-out 4.639) or width 256 (4.769), which cost twice as much to fine-tune.

    Returns the checkpoint: "state_dict" (float16 weights), "config" (constructor arguments),
    "vocab" (the tokenizer's token list), "seed", "data_sha256", "data" (what the text was),
    "train" (budget and steps), "val_loss" (nats per token on held-out review sentences) and
    "untrained_val_loss" (the same before training).
    """
    given = given_lm()
    texts = pretraining_texts()
    used = {name: texts[name] for name in ("reviews", "review_validation", *extra)}
    tokenizer = WordTokenizer.build(texts["reviews"], max_size=vocab_size, min_freq=2)
    # The reviews are the text the classifier will read, but only about a fifth of the tokens:
    # they are repeated, so that they weigh about as much as the novels.
    train_lines = texts["reviews"] * review_repeats + [line for n in extra for line in texts[n]]
    train_x, train_y = given.make_lm_batches(tokenizer.encode_corpus(train_lines), seq_len)
    val_x, val_y = given.make_lm_batches(
        tokenizer.encode_corpus(texts["review_validation"]), seq_len
    )
    torch.manual_seed(seed)
    cfg = LMConfig(ntokens=len(tokenizer), **(config or {}))
    model = given.TransformerLM(**asdict(cfg))
    untrained = training.evaluate_lm(model, val_x, val_y, given.causal_mask)
    history = training.train_lm(
        model,
        train_x,
        train_y,
        val_x,
        val_y,
        causal_mask=given.causal_mask,
        batch_size=batch_size,
        lr=lr,
        time_budget_s=None if minutes is None else minutes * 60,
        max_steps=steps,
        lr_factor=None if steps is None else training.warmup_cosine(steps, min(warmup, steps - 1)),
        eval_every=500,
        seed=seed,
        desc="pretraining",
    )
    return {
        "state_dict": {k: v.half() for k, v in model.state_dict().items() if k not in COMPUTED},
        "config": asdict(cfg),
        "vocab": tokenizer.itos,
        "seed": seed,
        "data_sha256": text_hash(used),
        "data": {
            "reviews": len(texts["reviews"]),
            "review_validation": len(texts["review_validation"]),
            "review_repeats": review_repeats,
            "parts": sorted(used),
            "novel_paragraphs": len(used.get("novels", [])),
            "wikitext_paragraphs": len(used.get("wikitext", [])),
            "train_tokens": train_x.numel(),
            "split_seed": SPLIT_SEED,
        },
        "train": {
            "steps": history.total_steps,
            "seconds": round(history.train_seconds),
            "tokens": history.total_tokens,
            "seq_len": seq_len,
            "batch_size": batch_size,
            "lr": lr,
            "schedule": "constant" if steps is None else f"warm-up {warmup} steps, cosine to 0.1",
            "val_steps": history.steps,
            "val_losses": [round(loss, 4) for loss in history.val_loss],
            "torch": str(torch.__version__),
        },
        "val_loss": history.val_loss[-1],
        "untrained_val_loss": untrained,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Pretrain the course's review language model.")
    parser.add_argument("--steps", type=int, default=4000, help="training steps")
    parser.add_argument("--minutes", type=float, default=None, help="or a training time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--without",
        nargs="*",
        default=[],
        choices=EXTRA_PARTS,
        help="leave out these parts of the text (the reviews always stay)",
    )
    parser.add_argument("--review-repeats", type=int, default=3, help="copies of the reviews")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--d-model", type=int, default=128, help="width (feed-forward: twice)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    args = parser.parse_args()
    start = time.perf_counter()
    checkpoint = pretrain(
        steps=None if args.minutes is not None else args.steps,
        minutes=args.minutes,
        seed=args.seed,
        extra=[part for part in EXTRA_PARTS if part not in args.without],
        review_repeats=args.review_repeats,
        lr=args.lr,
        config={"d_model": args.d_model, "d_hid": 2 * args.d_model, "nlayers": args.layers,
                "dropout": args.dropout},
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, args.out)
    size_mb = args.out.stat().st_size / 1e6
    print(
        f"wrote {args.out} ({size_mb:.1f} MB) in {time.perf_counter() - start:.0f} s: "
        f"{checkpoint['train']['steps']} steps, {checkpoint['train']['tokens']:,} tokens; "
        f"validation perplexity {math.exp(checkpoint['val_loss']):.1f} "
        f"(untrained {math.exp(checkpoint['untrained_val_loss']):.0f})"
    )
    curve = zip(checkpoint["train"]["val_steps"], checkpoint["train"]["val_losses"], strict=True)
    print("held-out loss by step: " + ", ".join(f"{s}: {loss:.3f}" for s, loss in curve))


if __name__ == "__main__":
    main()
