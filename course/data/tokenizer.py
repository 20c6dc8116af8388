"""A small word-level tokenizer: text -> tokens -> integer ids, and back.

Typical use::

    tok = WordTokenizer.build(train_texts, max_size=10_000)
    ids = tok.encode("To be, or not to be")        # [id("to"), id("be"), id(","), ...]
    batch, lengths = tok.encode_batch(texts)         # (B, L) padded ids, (B,) true lengths
    stream = tok.encode_corpus(texts)                # (N,) ids with <eos> after each text
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

PAD, UNK, EOS, MASK = "<pad>", "<unk>", "<eos>", "<mask>"
DEFAULT_SPECIALS: tuple[str, ...] = (PAD, UNK, EOS, MASK)

# A token is "<unk>" written in a text (WikiText marks its rare words so), a word (letters and
# digits, any alphabet, with inner apostrophes kept: "don't", "o'er", "century's") or a single
# other visible character ("," "." "-" "'" ...).
TOKEN_PATTERN = re.compile(r"<unk>|[^\W_]+(?:'[^\W_]+)*|\S")


def _check_texts(texts: object, name: str = "texts") -> None:
    """Catch the common slip of passing one string where a collection of strings is expected."""
    if isinstance(texts, str):
        raise ValueError(f"{name} must be a collection of strings, not a single string")


class WordTokenizer:
    """Word-level vocabulary with special tokens "<pad>", "<unk>", "<eos>" and "<mask>".

    Build one from training texts with ``WordTokenizer.build``; ``itos`` (id -> token) and
    ``stoi`` (token -> id) are the two lookup tables.
    """

    def __init__(self, itos: Sequence[str]) -> None:
        """Make a tokenizer from a full vocabulary list (position = id); see also ``build``."""
        itos = list(itos)
        if len(set(itos)) != len(itos):
            raise ValueError("the vocabulary contains duplicate tokens")
        missing = [tok for tok in DEFAULT_SPECIALS if tok not in itos]
        if missing:
            raise ValueError(f"the vocabulary lacks the special tokens {missing}")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(itos)}

    # -- building ---------------------------------------------------------------------------

    @staticmethod
    def tokenize(text: str) -> list[str]:
        """Split text into lower-cased words and punctuation marks; whitespace is dropped."""
        return TOKEN_PATTERN.findall(text.lower())

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        max_size: int | None = None,
        min_freq: int = 1,
        specials: Sequence[str] = DEFAULT_SPECIALS,
    ) -> WordTokenizer:
        """Build the vocabulary from training texts.

        Special tokens come first (so "<pad>" is id 0 and "<unk>" id 1 by default), then words
        by decreasing count, ties broken alphabetically so the result is deterministic.

        Args:
            texts: the training texts (never the validation or test texts).
            max_size: largest vocabulary size, special tokens included; None for no limit.
            min_freq: words seen fewer times than this are left out (they become "<unk>").
            specials: special tokens; must include "<pad>", "<unk>", "<eos>" and "<mask>".
        """
        _check_texts(texts)
        specials = list(specials)
        if max_size is not None and max_size < len(specials):
            raise ValueError(
                f"max_size={max_size} is smaller than the {len(specials)} special tokens"
            )
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, got {min_freq}")
        counts = Counter(tok for text in texts for tok in cls.tokenize(text))
        words = sorted(counts, key=lambda word: (-counts[word], word))
        words = [w for w in words if counts[w] >= min_freq and w not in specials]
        if max_size is not None:
            words = words[: max_size - len(specials)]
        return cls(specials + words)

    # -- lookups ----------------------------------------------------------------------------

    def __len__(self) -> int:
        """Vocabulary size, special tokens included (the size of an embedding table)."""
        return len(self.itos)

    def __repr__(self) -> str:
        return f"WordTokenizer(size={len(self)}, first={self.itos[:8]})"

    @property
    def pad_id(self) -> int:
        """Id of "<pad>", used to fill short sequences in a batch."""
        return self.stoi[PAD]

    @property
    def unk_id(self) -> int:
        """Id of "<unk>", used for words outside the vocabulary."""
        return self.stoi[UNK]

    @property
    def eos_id(self) -> int:
        """Id of "<eos>", the end-of-sequence marker."""
        return self.stoi[EOS]

    @property
    def mask_id(self) -> int:
        """Id of "<mask>", used for masked language modelling."""
        return self.stoi[MASK]

    # -- encoding and decoding --------------------------------------------------------------

    def encode(self, text: str, add_eos: bool = False) -> list[int]:
        """Turn one text into a list of ids; unknown words become ``unk_id``."""
        ids = [self.stoi.get(tok, self.unk_id) for tok in self.tokenize(text)]
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Turn ids back into text, tokens joined by single spaces (padding is kept)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        tokens = []
        for i in ids:
            if not 0 <= i < len(self.itos):
                raise ValueError(f"id {i} is outside the vocabulary (size {len(self)})")
            tokens.append(self.itos[i])
        return " ".join(tokens)

    def encode_batch(
        self, texts: Sequence[str], max_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode several texts into one right-padded tensor, for a classifier's input.

        Args:
            texts: B texts.
            max_len: longer texts are cut to their first ``max_len`` tokens; None keeps all.

        Returns:
            ids: LongTensor (B, L), padded on the right with ``pad_id``; L is the longest
                (truncated) length in the batch.
            lengths: LongTensor (B,), the number of real tokens in each row.
        """
        _check_texts(texts)
        if len(texts) == 0:
            raise ValueError("encode_batch needs at least one text")
        if max_len is not None and max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        rows = [self.encode(text)[:max_len] for text in texts]
        lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)  # (B,)
        ids = torch.full((len(rows), int(lengths.max())), self.pad_id, dtype=torch.long)  # (B, L)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
        return ids, lengths

    def encode_corpus(self, texts: Iterable[str]) -> torch.Tensor:
        """Encode a corpus as one long stream of ids, "<eos>" after each text, for language
        modelling. Returns a LongTensor (N,)."""
        _check_texts(texts)
        stream = [i for text in texts for i in self.encode(text, add_eos=True)]
        if not stream:
            raise ValueError("encode_corpus got no texts")
        return torch.tensor(stream, dtype=torch.long)  # (N,)

    # -- saving and loading -----------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Save the vocabulary as a JSON list of tokens (position = id)."""
        text = json.dumps(self.itos, ensure_ascii=False, indent=0)
        Path(path).write_text(text + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> WordTokenizer:
        """Load a tokenizer saved with ``save``."""
        itos = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(itos, list) or not all(isinstance(tok, str) for tok in itos):
            raise ValueError(f"{path} does not hold a JSON list of tokens")
        return cls(itos)
