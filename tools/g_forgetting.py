"""What long fine-tuning does to what G's checkpoint learned in pretraining (instructors only).

    python tools/g_forgetting.py                               # epochs 2 and 10, seed 0, the CPU
    python tools/g_forgetting.py --epochs 1 --dev 20 --out /tmp/f.json   # a smoke test

The notebook's fine-tuning of the shipped checkpoint (epochs over the 2,000 training pairs in
batches of 64, AdamW at 6e-4, a 10% warm-up, float32) is run once for each budget. Before any
fine-tuning and after each budget the script measures three things:

- ``corruption_loss``: the pretraining objective, the loss per character on 512 span-corrupted
  lines of ``wiki.txt`` (the notebook's reference ``span_corruption``, the held-out rows of
  section 7: generator seed 12345);
- ``place_loss``: the stored facts themselves, the loss per character of the birthplace when the
  model reads the development person's own line of ``wiki.txt`` as plain text up to it (the
  lines that state the answer within the model's block; no question, no MASK);
- ``dev_accuracy``: the share of the 500 development questions answered exactly.

The figures go to ``tools/stages/g_forgetting.json``, which assignment G's closing text quotes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from pathlib import Path

import torch
from pretrain_birth_places import corruption_loss, given
from torch import nn

from course.data import load_birth_places, load_wiki_lines
from course.g_birth_places import finetune
from course.g_birth_places.chars import IGNORE, CharVocab, corruption_rows, question_rows
from course.g_birth_places.checkpoint import SHIPPED, load_pretrained

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tools" / "stages" / "g_forgetting.json"
BATCH, LR, HELD_SEED, HELD_ROWS = 64, 6e-4, 12345, 512  # the notebook's sections 5 and 7


def place_rows(
    dev_pairs: list[tuple[str, str]], wiki: list[str], vocab: CharVocab, block: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (n, block) of the development people whose line of ``wiki.txt`` states
    their answer within ``block`` characters: the line up to the end of the first mention of the
    place, every target IGNORE but the place's characters."""
    by_name = {line.split(".", 1)[0]: line for line in wiki}
    rows, targets = [], []
    for question, place in dev_pairs:
        line = by_name.get(question.removeprefix("Where was ").removesuffix(" born?"), "")
        at = line.find(place)
        end = at + len(place)
        if at < 1 or end > block:
            continue
        ids = vocab.encode(line[:end].ljust(block + 1, vocab.itos[0]))
        x, y = ids[:-1], torch.full((block,), IGNORE)
        y[at - 1 : end - 1] = ids[at:end]  # the target at position t is the character t + 1
        rows.append(x)
        targets.append(y)
    if not rows:
        raise SystemExit("no development person's line states the answer: is wiki.txt complete?")
    return torch.stack(rows), torch.stack(targets)


def measures(model: nn.Module, code, held: tuple, places: tuple, dev: list, vocab, block) -> dict:
    """The three figures of one model state (see the module's docstring)."""
    answers = finetune.answer(model, vocab, [q for q, _ in dev], code.causal_mask, block)
    right = sum(a.strip() == p.strip() for a, (_, p) in zip(answers, dev, strict=True))
    return {
        "corruption_loss": round(corruption_loss(model, *held, code.causal_mask), 3),
        "place_loss": round(corruption_loss(model, *places, code.causal_mask), 3),
        "dev_accuracy_percent": round(100 * right / len(dev), 1),
    }


def machine() -> str:
    """The processor's model name, its cores and this run's threads (the run is float32)."""
    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"model name\s*:\s*(.*)", cpuinfo.read_text()) if cpuinfo.exists() else []
    name = names[0] if names else platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, float32"


def run(epochs: list[int], seed: int, n_dev: int, out: Path, checkpoint: Path = SHIPPED) -> dict:
    """Fine-tune the checkpoint for each number of epochs; the measures before and after each,
    written to ``out`` after each budget (a run stopped early keeps what it measured)."""
    code = given()
    train_pairs, dev = load_birth_places("train"), load_birth_places("dev")[:n_dev]
    wiki, vocab = load_wiki_lines(), CharVocab.build()
    model, _, info = load_pretrained(code.TransformerLM, checkpoint)
    block = info["train"]["block_size"]
    gen = torch.Generator().manual_seed(HELD_SEED)
    held = corruption_rows(wiki, code.span_corruption, vocab, block, HELD_ROWS, gen)
    places = place_rows(dev, wiki, vocab, block)
    figures = {"before fine-tuning": measures(model, code, held, places, dev, vocab, block)}
    record = {
        "what": __doc__.split("\n\n", 2)[2].split("\n\nThe figures")[0],
        "command": " ".join(["python tools/g_forgetting.py", *sys.argv[1:]]),
        "seed": seed,
        "development questions": len(dev),
        "place lines": int(places[0].size(0)),
        "machine": machine(),
        "figures": figures,
        "epochs asked": epochs,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    train_x, train_y = question_rows(train_pairs, vocab, block)
    for count in epochs:
        torch.manual_seed(seed)
        model = load_pretrained(code.TransformerLM, checkpoint)[0]
        steps = count * math.ceil(len(train_pairs) / BATCH)
        start = time.perf_counter()
        finetune.train_steps(
            model, finetune.epoch_batches(train_x, train_y, BATCH, seed), steps,
            code.causal_mask, lr=LR, warmup=steps // 10, seed=seed, desc=f"{count} epochs",
        )  # fmt: skip
        after = measures(model, code, held, places, dev, vocab, block)
        after["seconds of fine-tuning"] = round(time.perf_counter() - start, 1)
        figures[f"after {count} epochs ({steps} steps)"] = after
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{count} epochs: {after}", flush=True)
    return record


def main(argv: list[str] | None = None) -> None:
    """Parse the options, measure, write the record."""
    parser = argparse.ArgumentParser(description="What long fine-tuning does to G's checkpoint.")
    parser.add_argument("--epochs", type=int, nargs="+", default=[2, 10])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dev", type=int, default=500, help="development questions to use")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if any(count < 1 for count in args.epochs) or not 1 <= args.dev <= 500:
        raise SystemExit("--epochs takes whole numbers from 1, --dev a number from 1 to 500")
    record = run(args.epochs, args.seed, args.dev, args.out)
    print(json.dumps(record["figures"], indent=1))


if __name__ == "__main__":
    main()
