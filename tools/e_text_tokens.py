"""Count the tokens of assignment E's pretraining text, as the shipped checkpoint read it.

    python tools/e_text_tokens.py --out tools/stages/e_text_tokens.json

Assignment C's question 5 (Chinchilla) compares the tokens E's checkpoint saw with the distinct
tokens of its text. This script counts them with the checkpoint's own tokenizer: the review
sentences (read ``review_repeats`` times), the novels and the WikiText articles, the stream the
checkpoint was trained on (its ``train_tokens``), and the distinct text (each review once).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from course.data import WordTokenizer
from course.e_pretraining.checkpoint import SHIPPED
from course.e_pretraining.text import pretraining_texts

PARTS = ("reviews", "novels", "wikitext")  # the training text (review_validation is held out)


def counts() -> dict:
    """Tokens per part, the training stream, and the distinct text, from the shipped checkpoint."""
    info = torch.load(SHIPPED, map_location="cpu", weights_only=False)
    tokenizer = WordTokenizer(info["vocab"])
    texts = pretraining_texts()
    parts = {name: int(tokenizer.encode_corpus(texts[name]).numel()) for name in PARTS}
    repeats = info["data"]["review_repeats"]
    stream = parts["reviews"] * repeats + parts["novels"] + parts["wikitext"]
    return {
        "tokens_per_part": parts,
        "review_repeats": repeats,
        "training_stream_tokens": stream,
        "checkpoint_train_tokens": info["data"]["train_tokens"],  # the stream in whole rows
        "note": "checkpoint_train_tokens is the training stream cut to whole rows of "
        f"{info['train']['seq_len']} tokens (make_lm_batches)",
        "distinct_tokens": sum(parts.values()),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the counts; write them with ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the record (JSON) here")
    args = parser.parse_args(argv)
    found = counts()
    for key, value in found.items():
        print(f"{key}: {value}")
    if args.out:
        words = ["python", "tools/e_text_tokens.py", *(argv if argv is not None else sys.argv[1:])]
        record = {"what": __doc__.splitlines()[0], "command": " ".join(words), **found}
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"recorded in {args.out}")


if __name__ == "__main__":
    main()
