"""Pretraining the small Transformer language model that assignment E fine-tunes.

    python -m course.pretrain                       # 1,500 steps: checkpoints/review_lm.pt
    python -m course.pretrain --minutes 1 --out /tmp/lm.pt    # a quick try

The model is assignment D's language model (:class:`TransformerLM`: embedding scaled by
sqrt(d_model), sinusoidal positions, encoder layers under a causal mask, a linear decoder to the
vocabulary). Assignment E gives it to the students, as assignment D gives A's answers; publish the
assignments in order.

The pretraining text is unlabelled and ships with the course (see :func:`pretraining_texts`):
the sentences of the *training* split of the movie-review polarity data (their labels are never
read), and six public-domain novels. Any line that contains a sentence of the classification
validation or test split is left out, so the classifier is never evaluated on text the language
model has read. The vocabulary is built from the review sentences only, since they are the text
the classifier will read.

The checkpoint holds the weights (float16, to keep the file small; the positional table is
rebuilt on loading) and, beside them, everything needed to reproduce and judge them: the model
configuration, the vocabulary, the seed, the SHA-256 of the pretraining text, the training budget
and the validation loss it reached.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from course import training
from course.data import WordTokenizer, load_novels, load_polarity

CHECKPOINT = Path(__file__).parent / "checkpoints" / "review_lm.pt"
SPLIT_SEED = 0  # the seed of load_polarity's split that the classifier uses
LM_VAL_SENTENCES = 500  # review sentences held out from pretraining, to measure the LM
COMPUTED = ("pos_encoder.pe",)  # buffers rebuilt by the constructor, not stored


@dataclass
class LMConfig:
    """Sizes of :class:`TransformerLM` (the arguments of its constructor)."""

    ntokens: int
    d_model: int = 128
    nhead: int = 4
    d_hid: int = 256
    nlayers: int = 2
    dropout: float = 0.1


class PositionalEncoding(nn.Module):
    """Sinusoidal positions (assignment A): adds PE[:L] to x (B, L, D), then dropout."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)  # (max_len, 1)
        frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("pe", table)  # (max_len, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, L, D) -> (B, L, D)."""
        return self.dropout(x + self.pe[: x.size(1)])


class TransformerLM(nn.Module):
    """Assignment D's Transformer language model, with ``encode`` split from the decoder.

    ``encode(src, src_mask)`` returns the hidden states (B, L, d_model) of the last encoder
    layer; ``forward`` adds the decoder, giving logits (B, L, ntokens).
    """

    def __init__(
        self, ntokens: int, d_model: int, nhead: int, d_hid: int, nlayers: int, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(ntokens, d_model)
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.decoder = nn.Linear(d_model, ntokens)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (B, L) token ids -> hidden states (B, L, d_model)."""
        x = self.embedding(src) * math.sqrt(self.d_model)  # (B, L, D)
        return self.transformer_encoder(self.pos_encoder(x), mask=src_mask)  # (B, L, D)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (B, L) token ids -> logits (B, L, ntokens)."""
        return self.decoder(self.encode(src, src_mask))


# ----------------------------------------------------------------------------- the text
def held_out_sentences(seed: int = SPLIT_SEED) -> list[str]:
    """The classification validation and test sentences: text the pretraining must not see."""
    polarity = load_polarity(seed=seed)
    return list(polarity["validation"]["text"]) + list(polarity["test"]["text"])


def _without_leaks(lines: list[str], forbidden: list[str]) -> list[str]:
    """The lines that contain none of the ``forbidden`` sentences (compared as token strings)."""
    by_first_word: dict[str, list[tuple[str, ...]]] = {}
    for sentence in forbidden:
        words = tuple(WordTokenizer.tokenize(sentence))
        if words:
            by_first_word.setdefault(words[0], []).append(words)
    return [line for line in lines if not _contains_any(line, by_first_word)]


def _contains_any(line: str, by_first_word: dict[str, list[tuple[str, ...]]]) -> bool:
    """Whether the tokens of ``line`` contain one of the token sequences, indexed by first word."""
    words = WordTokenizer.tokenize(line)
    for start, word in enumerate(words):
        for sentence in by_first_word.get(word, ()):
            if tuple(words[start : start + len(sentence)]) == sentence:
                return True
    return False


def review_sentences(seed: int = SPLIT_SEED) -> list[str]:
    """The training-split review sentences that contain no held-out sentence, in split order."""
    reviews = list(load_polarity(seed=seed)["train"]["text"])
    return _without_leaks(reviews, held_out_sentences(seed))


def pretraining_texts(seed: int = SPLIT_SEED) -> dict[str, list[str]]:
    """The unlabelled text of the pretraining, by part.

    Returns:
        "reviews": training-split review sentences for the LM's training;
        "review_validation": the last ``LM_VAL_SENTENCES`` of them, held out to measure the LM;
        "novels": paragraphs of the six novels.
        No line of any part contains a classification validation or test sentence.
    """
    reviews = review_sentences(seed)
    novels = _without_leaks(list(load_novels()["text"]), held_out_sentences(seed))
    return {
        "reviews": reviews[:-LM_VAL_SENTENCES],
        "review_validation": reviews[-LM_VAL_SENTENCES:],
        "novels": novels,
    }


def text_hash(texts: dict[str, list[str]]) -> str:
    """SHA-256 of the pretraining text (all parts, in order), to tell which data made a model."""
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(name.encode())
        for line in texts[name]:
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


# ----------------------------------------------------------------------------- training
def pretrain(
    steps: int | None = 1500,
    minutes: float | None = None,
    seed: int = 0,
    seq_len: int = 64,
    batch_size: int = 32,
    lr: float = 1e-3,
    vocab_size: int = 6000,
    novels: bool = True,
    review_repeats: int = 3,
    config: dict | None = None,
) -> dict:
    """Pretrain a :class:`TransformerLM` for ``steps`` steps or ``minutes``; return a checkpoint.

    A step budget gives the same model on any machine (the default); a time budget stops
    earlier on a slow or busy one. 1,500 steps (about 3 million tokens, 5 minutes on 2 cores) is
    where the held-out loss was lowest (4.76 nats per token); it then rises (4.86 at 3,000
    steps): the review sentences are few and the model starts to learn them by heart.

    The checkpoint is a dict: "state_dict" (float16 weights), "config" (constructor
    arguments), "vocab" (the tokenizer's token list), "seed", "data_sha256", "data" (what the
    text was), "train" (budget and steps), "val_loss" (nats per token on held-out review
    sentences) and "untrained_val_loss" (the same before training).
    """
    texts = pretraining_texts()
    tokenizer = WordTokenizer.build(texts["reviews"], max_size=vocab_size, min_freq=2)
    # The reviews are the text the classifier will read, but only about a fifth of the tokens:
    # they are repeated, so that they weigh about as much as the novels.
    train_lines = texts["reviews"] * review_repeats + (texts["novels"] if novels else [])
    train_x, train_y = _rows(tokenizer.encode_corpus(train_lines), seq_len)
    val_x, val_y = _rows(tokenizer.encode_corpus(texts["review_validation"]), seq_len)
    torch.manual_seed(seed)
    cfg = LMConfig(ntokens=len(tokenizer), **(config or {}))
    model = TransformerLM(**asdict(cfg))
    untrained = training.evaluate_lm(model, val_x, val_y)
    history = training.train_lm(
        model,
        train_x,
        train_y,
        val_x,
        val_y,
        batch_size=batch_size,
        lr=lr,
        time_budget_s=None if minutes is None else minutes * 60,
        max_steps=steps,
        eval_every=500,
        seed=seed,
        desc="pretraining",
    )
    return {
        "state_dict": {k: v.half() for k, v in model.state_dict().items() if k not in COMPUTED},
        "config": asdict(cfg),
        "vocab": tokenizer.itos,
        "seed": seed,
        "data_sha256": text_hash(texts),
        "data": {
            "reviews": len(texts["reviews"]),
            "review_validation": len(texts["review_validation"]),
            "review_repeats": review_repeats,
            "novel_paragraphs": len(texts["novels"]) if novels else 0,
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
            "torch": str(torch.__version__),
        },
        "val_loss": history.val_loss[-1],
        "untrained_val_loss": untrained,
    }


def _rows(stream: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets (n, seq_len) cut from a stream (N,)."""
    n = (stream.numel() - 1) // seq_len
    return stream[: n * seq_len].view(n, seq_len), stream[1 : n * seq_len + 1].view(n, seq_len)


# ----------------------------------------------------------------------------- loading
def load_pretrained(path: str | Path = CHECKPOINT) -> tuple[TransformerLM, WordTokenizer, dict]:
    """Load a checkpoint made by :func:`pretrain`: (model in float32, tokenizer, checkpoint info).

    ``info`` is the checkpoint without its weights (config, seed, data hash, losses, ...).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"No pretrained checkpoint at {path}. It ships with the course (restore it with "
            "`git checkout course/checkpoints`), or make one with `python -m course.pretrain`."
        )
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = TransformerLM(**checkpoint["config"])
    weights = {k: v.float() for k, v in checkpoint["state_dict"].items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if set(missing) - set(COMPUTED) or unexpected:
        raise ValueError(f"{path} does not fit TransformerLM: {missing=}, {unexpected=}")
    model.eval()
    info = {k: v for k, v in checkpoint.items() if k not in ("state_dict", "vocab")}
    return model, WordTokenizer(checkpoint["vocab"]), info


def review_validation_rows(
    tokenizer: WordTokenizer, seq_len: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out review sentences as LM rows (inputs, targets), each (n, seq_len)."""
    stream = tokenizer.encode_corpus(review_sentences()[-LM_VAL_SENTENCES:])
    return _rows(stream, seq_len)


def main() -> None:
    parser = argparse.ArgumentParser(description="Pretrain the course's review language model.")
    parser.add_argument("--steps", type=int, default=1500, help="training steps")
    parser.add_argument("--minutes", type=float, default=None, help="or a training time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-novels", action="store_true", help="pretrain on the reviews only")
    parser.add_argument("--review-repeats", type=int, default=3, help="copies of the reviews")
    parser.add_argument("--out", type=Path, default=CHECKPOINT)
    args = parser.parse_args()
    start = time.perf_counter()
    checkpoint = pretrain(
        steps=None if args.minutes is not None else args.steps,
        minutes=args.minutes,
        seed=args.seed,
        novels=not args.no_novels,
        review_repeats=args.review_repeats,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, args.out)
    size_mb = args.out.stat().st_size / 1e6
    print(
        f"wrote {args.out} ({size_mb:.1f} MB) in {time.perf_counter() - start:.0f} s: "
        f"{checkpoint['train']['steps']} steps, {checkpoint['train']['tokens']:,} tokens; "
        f"validation perplexity {math.exp(checkpoint['val_loss']):.1f} "
        f"(untrained {math.exp(checkpoint['untrained_val_loss']):.0f})"
    )


if __name__ == "__main__":
    main()
