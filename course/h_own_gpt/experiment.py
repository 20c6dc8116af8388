"""Assignment H's experiment helpers: subword tokens for Tiny Shakespeare, batches, plots.

The notebook trains the student's GPT and assignment D's model with a loop written in the
notebook itself (the student's parameter groups, schedule and sampling); what is here is the
plumbing it needs and nobody needs to read: Hugging Face's BPE trainer set up like the
student's ``bpe_merges`` (no end-of-word marker; words are the pieces between spaces, each
starting with the ``▁`` that stands for its space, as in SentencePiece), the merges applied to
words, random windows of a token stream, and the figures.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from course.data import load_tiny_shakespeare
from course.h_own_gpt.checks import gpt_parameters

SPACE = "\u2581"  # the lower one-eighth block that stands for a space, SentencePiece's marker


def shakespeare_lines(lines: int | None = None) -> tuple[list[str], list[str]]:
    """The training and validation lines of Tiny Shakespeare (the first ``lines`` of each)."""
    data = load_tiny_shakespeare()
    train, val = data["train"]["text"][:], data["validation"]["text"][:]  # lists, read at once
    return (train, val) if lines is None else (train[:lines], val[:lines])


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Metaspace(replacement=SPACE)


def words_of(lines: Sequence[str]) -> list[str]:
    """The words BPE learns from: each line split at spaces, each word led by ``▁``."""
    split = _pre_tokenizer()
    return [word for line in lines for word, _ in split.pre_tokenize_str(line)]


def word_counts(lines: Sequence[str]) -> dict[str, int]:
    """How often each word of :func:`words_of` occurs (the input of ``bpe_merges``)."""
    return dict(Counter(words_of(lines)))


def train_hf_bpe(lines: Sequence[str], num_merges: int) -> Tokenizer:
    """Hugging Face's BPE trainer on the same words, asked for ``num_merges`` merges.

    The vocabulary starts from every character of the lines (and ``▁`` and the newline, so
    that whole texts can be encoded), then grows by one token per merge.
    """
    alphabet = sorted(set("".join(lines)) | {SPACE, "\n"})
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _pre_tokenizer()
    tokenizer.decoder = decoders.Metaspace(replacement=SPACE)
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + num_merges,
        initial_alphabet=alphabet,
        show_progress=False,
        min_frequency=0,
    )
    tokenizer.train_from_iterator(list(lines), trainer)
    return tokenizer


def hf_merges(tokenizer: Tokenizer) -> list[tuple[str, str]]:
    """The merges a trained Hugging Face BPE tokenizer learned, in order."""
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]


def apply_merges(word: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """Cut ``word`` into tokens: its characters, then each merge in the order it was learned."""
    symbols = list(word)
    for a, b in merges:
        if len(symbols) < 2:
            break
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def tokens_per_character(lines: Sequence[str], merges: Sequence[tuple[str, str]]) -> float:
    """Tokens per character (spaces included) when the lines' words are cut by ``merges``."""
    counts = word_counts(lines)
    tokens = sum(len(apply_merges(word, merges)) * n for word, n in counts.items())
    return tokens / sum(len(line) for line in lines)


def compare_merges(ours: Sequence[tuple[str, str]], theirs: Sequence[tuple[str, str]]) -> dict:
    """Where two merge lists agree: the common prefix, the shared merges, the first difference."""
    ours, theirs = [tuple(m) for m in ours], [tuple(m) for m in theirs]
    prefix = 0
    while prefix < min(len(ours), len(theirs)) and ours[prefix] == theirs[prefix]:
        prefix += 1
    first = None
    if prefix < min(len(ours), len(theirs)):
        first = (prefix, ours[prefix], theirs[prefix])
    return {
        "same_prefix": prefix,
        "shared": len(set(ours) & set(theirs)),
        "first_difference": first,
    }


def encode(tokenizer: Tokenizer, lines: Sequence[str]) -> torch.Tensor:
    """The lines, joined by newlines, as one stream of token ids (N,)."""
    return torch.tensor(tokenizer.encode("\n".join(lines)).ids, dtype=torch.long)


def windows(
    stream: torch.Tensor,
    block_size: int,
    batch_size: int,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of random windows: inputs (B, T) and the targets one token later (B, T), on
    ``device`` (the stream's own when None). The starts are drawn on the CPU by ``generator``:
    the same windows on every device."""
    starts = torch.randint(stream.numel() - block_size - 1, (batch_size,), generator=generator)
    rows = torch.stack([stream[s : s + block_size + 1] for s in starts.tolist()])
    rows = rows if device is None else rows.to(device)
    return rows[:, :-1], rows[:, 1:]


def fixed_windows(
    stream: torch.Tensor, block_size: int, count: int, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` evenly spaced windows of the stream, the same every time (for validation), on
    ``device`` (the stream's own when None)."""
    last = stream.numel() - block_size - 1
    starts = torch.linspace(0, last, count).long().tolist()
    rows = torch.stack([stream[s : s + block_size + 1] for s in starts])
    rows = rows if device is None else rows.to(device)
    return rows[:, :-1], rows[:, 1:]


def plot_schedule(lr_at: Callable[..., float], total: int, **kwargs: float) -> None:
    """The learning rate at every step of a run (the student's ``lr_at``)."""
    steps = list(range(int(total * 1.1)))
    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    ax.plot(steps, [lr_at(s, total_steps=total, **kwargs) for s in steps])
    ax.axvline(kwargs["warmup_steps"], color="grey", ls=":", label="end of the warm-up")
    ax.axvline(total, color="grey", ls="--", label="total_steps")
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.set_title("Warm-up, then a cosine down to min_lr")
    ax.legend()
    plt.show()


def plot_curves(histories: dict[str, dict]) -> None:
    """Validation loss per token against the step, one line per model (and training loss)."""
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for k, (name, history) in enumerate(histories.items()):
        color = f"C{k}"
        ax.plot(history["steps"], history["val"], "o-", color=color, label=f"{name}: validation")
        ax.plot(
            history["train_steps"],
            history["train"],
            color=color,
            alpha=0.3,
            label=f"{name}: training (smoothed)",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy per token (nats)")
    ax.set_title("Same tokens, same steps, same parameter count")
    ax.legend()
    plt.show()


def matching_d_hid(vocab: int, d_model: int, nlayers: int, block_size: int) -> int:
    """The feed-forward width that gives D's model (untied decoder with a bias, sinusoidal
    positions, ``nn.TransformerEncoderLayer``) the parameter count of a tied GPT.

    Per layer D's model has 4D^2 + 4D (attention) + 2 D d_hid + d_hid + D (feed-forward) + 4D
    (two norms); outside the layers 2VD + V (embedding, decoder). The GPT's count is
    :func:`course.h_own_gpt.checks.gpt_parameters`.
    """
    target = gpt_parameters(vocab, d_model, nlayers, block_size)
    fixed = 2 * vocab * d_model + vocab + nlayers * (4 * d_model**2 + 9 * d_model)
    return round((target - fixed) / (nlayers * (2 * d_model + 1)))
