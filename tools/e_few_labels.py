"""Assignment E's few-label comparison on sentiment, recorded for the notebook (instructors only).

    python tools/e_few_labels.py                      # 25, 50, 100 labels, seeds 0-2, 200 steps
    python tools/e_few_labels.py --out tools/stages/e_few_labels.json
    python tools/e_few_labels.py --seeds 1 --threads 1 --out /tmp/s1.json      # one seed...
    python tools/e_few_labels.py --merge /tmp/s0.json /tmp/s1.json /tmp/s2.json --out all.json

Runs of one seed do not depend on the other seeds, so the seeds can run side by side and be
merged (``--merge``): the merged record is the one a single run over all the seeds writes.

Does the shipped language model (``course/e_pretraining/review_lm.pt``) help a sentiment
classifier where labels are few? Four setups, as the notebook's label-count section builds them,
each trained on the same balanced sample of ``n`` training reviews for the same budget (200
optimizer steps in batches of 8, whatever ``n``) and measured once on the 1,066 validation
reviews:

- ``scratch``: the classifier with random weights, all of it trained (lr 5e-4);
- ``pretrained``: the classifier from the checkpoint, all of it fine-tuned (lr 5e-4);
- ``frozen``: the checkpoint frozen, the head trained on the last real token's state (lr 5e-3);
- ``probe``: the checkpoint frozen, the head trained on the mean of the real tokens' states
  (lr 5e-3).

The classifier's code is the notebook's reference solution (its cells ``given_lm``,
``last_token_solution``, ``classifier_solution`` and ``freeze_solution``). The
notebook's full mode reads a frozen base once, in eval mode (``finetune.FrozenStates``), which
this script does not, and AdamW steps fused; ``tools/stages/e_few_labels.json`` was recorded
before both. The script prints every run, then each setup's accuracy and its lead over
scratch, seed by seed.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
from notebook_code import notebook_code
from torch import nn

from course.data import load_polarity
from course.e_pretraining import finetune
from course.e_pretraining.checkpoint import SHIPPED, load_pretrained

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "source" / "e_pretraining" / "pretraining_and_finetuning.ipynb"
CELLS = ("given_lm", "last_token_solution", "classifier_solution", "freeze_solution")
SETUPS = ("scratch", "pretrained", "frozen", "probe")
LR, HEAD_LR = 5e-4, 5e-3  # the notebook's: fine-tuning, a new head on a frozen base


def classifier_code(notebook: Path = NOTEBOOK) -> SimpleNamespace:
    """Run the notebook's given model and reference solutions; return what they define."""
    return notebook_code(notebook, *CELLS)


class MeanProbe(nn.Module):
    """A frozen classifier's base read as the mean of the real tokens' states (the probe)."""

    def __init__(self, classifier: nn.Module, causal_mask) -> None:
        super().__init__()
        self.classifier, self.causal_mask = classifier, causal_mask

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """src (B, L), lengths (B,) -> logits (B, n_classes)."""
        lm = self.classifier.lm
        hidden = lm.encode(src, self.causal_mask(src.size(1)))  # (B, L, D)
        real = torch.arange(src.size(1)) < lengths.unsqueeze(1)  # (B, L)
        state = (hidden * real.unsqueeze(-1)).sum(1) / lengths.unsqueeze(1)  # (B, D)
        return lm.decoder(state)


def builder(code: SimpleNamespace, config: dict):
    """``build(setup, seed)`` as the notebook's label-count section defines it."""

    def build(setup: str, seed: int) -> nn.Module:
        torch.manual_seed(seed)
        if setup == "scratch":
            base = code.TransformerLM(**config)
        else:
            base = load_pretrained(code.TransformerLM, SHIPPED)[0]
        model = code.SentimentClassifier(base, n_classes=2)
        if setup in ("frozen", "probe"):
            code.freeze_base(model)
        return MeanProbe(model, code.causal_mask) if setup == "probe" else model

    return build


def summary(curves: finetune.LabelCurves) -> dict:
    """Per setup and count: the accuracies, their mean, and the lead over scratch per seed."""
    table: dict = {}
    for setup, by_count in curves.items():
        table[setup] = {}
        for n, accs in by_count.items():
            leads = [a - s for a, s in zip(accs, curves["scratch"][n], strict=True)]
            table[setup][str(n)] = {
                "accuracy_percent": [round(a, 1) for a in accs],
                "mean": round(statistics.fmean(accs), 1),
                "minus_scratch": [round(g, 1) for g in leads],
                "mean_minus_scratch": round(statistics.fmean(leads), 1),
            }
    return table


def merged(paths: list[Path]) -> tuple[finetune.LabelCurves, dict, list[int], list[str]]:
    """The curves of several records of this script joined seed after seed; also the first
    record, the seeds and the commands."""
    records = [json.loads(path.read_text()) for path in paths]
    first = records[0]
    for record in records[1:]:
        if (record["steps"], record["batch_size"]) != (first["steps"], first["batch_size"]):
            raise SystemExit("the records to merge were made with different budgets")
    curves: finetune.LabelCurves = {
        setup: {int(n): [] for n in by_count} for setup, by_count in first["results"].items()
    }
    for record in records:
        for setup, by_count in record["results"].items():
            for n, row in by_count.items():
                curves[setup][int(n)].extend(row["accuracy_percent"])
    seeds = [seed for record in records for seed in record["seeds"]]
    commands = [c for record in records for c in record.get("commands", [record["command"]])]
    return curves, first, seeds, commands


def print_table(table: dict, counts: list[int]) -> None:
    """Accuracy per setup (seed by seed, mean) and lead over scratch."""
    print(f"\n{'setup':<11} {'labels':>6}  accuracy % per seed   mean   minus scratch per seed")
    for setup, rows in table.items():
        for n in counts:
            row = rows[str(n)]
            accs = " ".join(f"{a:5.1f}" for a in row["accuracy_percent"])
            leads = " ".join(f"{g:+5.1f}" for g in row["minus_scratch"])
            print(f"{setup:<11} {n:>6}  {accs}  {row['mean']:5.1f}   {leads}")


def main(argv: list[str] | None = None) -> None:
    """Run the comparison, print it, and record it with ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[25, 50, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--merge", type=Path, nargs="+", help="join these records, run nothing")
    parser.add_argument("--out", type=Path, help="write the record (JSON) here")
    args = parser.parse_args(argv)
    command = "python " + " ".join(["tools/e_few_labels.py", *(argv or sys.argv[1:])])
    if args.merge:
        curves, first, seeds, commands = merged(args.merge)
        table = summary(curves)
        print_table(table, sorted(next(iter(curves.values()))))
        if args.out:
            record = {**first, "seeds": seeds, "results": table, "commands": commands}
            record["command"] = command
            record["seconds"] = "per seed, see the records merged: " + ", ".join(
                str(json.loads(path.read_text())["seconds"]) for path in args.merge
            )
            args.out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"recorded in {args.out}")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    code = classifier_code()
    _, tokenizer, info = load_pretrained(code.TransformerLM, SHIPPED)
    polarity = load_polarity()
    val_split = polarity["validation"]
    val = finetune.encode_labelled(tokenizer, val_split["text"], val_split["label"])
    start = time.perf_counter()
    curves = finetune.label_count_curves(
        builder(code, info["config"]), SETUPS, tokenizer, polarity["train"], val, args.counts,
        args.seeds, lrs={"frozen": HEAD_LR, "probe": HEAD_LR}, steps=args.steps, lr=LR,
        batch_size=args.batch_size,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    table = summary(curves)
    print_table(table, args.counts)
    print(f"\n{seconds:.0f} s, {torch.get_num_threads()} threads")
    if args.out:
        record = {
            "what": "Assignment E, sentiment with few labels: the shipped language model "
            "fine-tuned (pretrained), frozen and read at the last token (frozen) or as the mean "
            "of its states (probe), against the same classifier from random weights (scratch); "
            f"{args.steps} optimizer steps in batches of {args.batch_size} for every run, "
            f"accuracy on the {len(val)} validation reviews.",
            "command": command,
            "steps": args.steps,
            "batch_size": args.batch_size,
            "lr": {"scratch": LR, "pretrained": LR, "frozen": HEAD_LR, "probe": HEAD_LR},
            "seeds": args.seeds,
            "results": table,
            "seconds": round(seconds),
            "machine": f"{platform.machine()} CPU, {torch.get_num_threads()} threads, "
            f"torch {torch.__version__}",
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded in {args.out}")


if __name__ == "__main__":
    main()
