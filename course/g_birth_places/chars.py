"""Characters for assignment G: the vocabulary, the pretraining rows, the question rows.

Everything here works on strings of characters, as CS224N's birth-place experiment does: the
model reads and writes one character at a time. Two characters never occur in the data and get
the first ids: PAD (id 0) fills rows up to their length, MASK (id 1) marks a hidden span, or the
end of a question and of its answer.

    vocab = CharVocab.build()
    x, y = corruption_rows(lines, span_corruption, vocab, block_size=128, rows=64, generator=g)
    x, y = question_rows(pairs, vocab, block_size=128)   # loss on the answers only
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from course.data import load_birth_places, load_wiki_lines
from course.g_birth_places.checks import MASK, PAD

IGNORE = -100  # targets that cross_entropy skips


class CharVocab:
    """Characters <-> ids: PAD is 0, MASK is 1, then the data's characters in sorted order."""

    def __init__(self, itos: Sequence[str]) -> None:
        if list(itos[:2]) != [PAD, MASK]:
            raise ValueError("a CharVocab starts with PAD (id 0) and MASK (id 1)")
        self.itos = list(itos)
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: Sequence[str] | None = None) -> CharVocab:
        """Every character of ``texts`` (default: wiki.txt and all questions and answers)."""
        if texts is None:
            pairs = [p for split in ("train", "dev", "test") for p in load_birth_places(split)]
            texts = load_wiki_lines() + [q + a for q, a in pairs]
        chars = sorted(set("".join(texts)) - {PAD, MASK})
        return cls([PAD, MASK, *chars])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> torch.Tensor:
        """A string -> ids (len(text),)."""
        return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor | Sequence[int]) -> str:
        """Ids -> the string they spell."""
        return "".join(self.itos[int(i)] for i in ids)


def shifted(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows (n, block_size + 1) -> inputs (n, block_size), targets (n, block_size) shifted by
    one, with the PAD targets set to IGNORE (no loss on the padding)."""
    x, y = ids[:, :-1], ids[:, 1:].clone()
    y[y == 0] = IGNORE
    return x, y


def corruption_rows(
    lines: Sequence[str],
    corrupt: Callable[..., str],
    vocab: CharVocab,
    block_size: int,
    rows: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` pretraining examples: random lines, each corrupted by ``corrupt(line,
    block_size, generator)``. Returns inputs and targets (rows, block_size)."""
    pick = torch.randint(len(lines), (rows,), generator=generator).tolist()
    ids = torch.stack([vocab.encode(corrupt(lines[i], block_size, generator)) for i in pick])
    return shifted(ids)  # (rows, block_size) each


def question_row(question: str, answer: str, block_size: int) -> str:
    """``question MASK answer MASK`` padded with PAD to block_size + 1 characters."""
    text = question + MASK + answer + MASK
    if len(text) > block_size + 1:
        raise ValueError(f"{question!r} and its answer do not fit in {block_size} characters")
    return text + PAD * (block_size + 1 - len(text))


def question_rows(
    pairs: Sequence[tuple[str, str]], vocab: CharVocab, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fine-tuning examples: inputs and targets (n, block_size); only the answer and the MASK
    that closes it are targets (the question and the padding are IGNORE)."""
    ids = torch.stack([vocab.encode(question_row(q, a, block_size)) for q, a in pairs])
    x, y = shifted(ids)
    for row, (question, _) in enumerate(pairs):
        y[row, : len(question)] = IGNORE  # targets up to the first MASK: the question's
    return x, y
