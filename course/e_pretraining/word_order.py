"""The word-order task of assignment E: is a review sentence as written, or were two words swapped?

A task that next-word prediction prepares a model for: a language model has learned which word
follows which, so in a sentence whose word order was broken some words no longer fit where they
stand, while a model trained from scratch must learn English word order from the few labelled
examples alone. The course chose this task after the sentiment experiment of the notebook found
no lead for pretraining (the notebook says so). It is a small cousin
of the acceptability judgements of GLUE's CoLA, built without annotators.

The sentences are the held-out review sentences (the sentiment task's validation and test splits):
the pretraining text contains none of them (:func:`course.e_pretraining.text.held_out_sentences`).
The task's training pool is made from the *test* split and its validation set from the
*validation* split, so no sentence is in both, and none was read in pretraining.

    pool = word_order_split(polarity["test"]["text"], seed=1)    # {"text": [...], "label": [...]}
    val_set = word_order_split(polarity["validation"]["text"], seed=2)
    reader = FitReader(lm, causal_mask, unigram_log_probs(tokenizer, lines))

A classifier that reads a language model the way it was trained, by how well each word fits its
context (:class:`FitReader`), needs only a few labels for this task; one that replaces the
language model's head, as fine-tuning does, must find the same knowledge in the hidden states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from course.data import WordTokenizer
from course.e_pretraining.finetune import kept_rows

ORIGINAL, SWAPPED = 1, 0  # the labels


def swap_two_words(sentence: str, generator: torch.Generator) -> str | None:
    """The sentence with two of its words (two different words, at random places) exchanged;
    ``None`` when it has no two different words. Words are separated by spaces (the review
    sentences come tokenised, punctuation split off)."""
    words = sentence.split()
    if len(set(words)) < 2:
        return None
    while True:
        i, j = torch.randperm(len(words), generator=generator)[:2].tolist()
        if words[i] != words[j]:
            words[i], words[j] = words[j], words[i]
            return " ".join(words)


def word_order_split(sentences: Sequence[str], seed: int) -> dict[str, list]:
    """A balanced labelled set: every other sentence kept as written (label ``ORIGINAL``), the
    others with two words swapped (label ``SWAPPED``); sentences with no two different words are
    left out. Columns "text" and "label", like a split of :func:`course.data.load_polarity`."""
    generator = torch.Generator().manual_seed(seed)
    texts: list[str] = []
    labels: list[int] = []
    for index, sentence in enumerate(sentences):
        if len(set(sentence.split())) < 2:
            continue
        if index % 2 == 0:
            texts.append(" ".join(sentence.split()))
            labels.append(ORIGINAL)
        else:
            texts.append(swap_two_words(sentence, generator))
            labels.append(SWAPPED)
    return {"text": texts, "label": labels}


def unigram_log_probs(tokenizer: WordTokenizer, lines: Sequence[str]) -> torch.Tensor:
    """log p(word) (V,) from the word counts of ``lines``, add-one smoothed: assignment D's
    unigram baseline, which knows how frequent a word is and nothing of order."""
    counts = torch.bincount(tokenizer.encode_corpus(list(lines)), minlength=len(tokenizer))
    log_counts = (counts.float() + 1).log()  # (V,)
    return log_counts - log_counts.logsumexp(0)


class FitReader(nn.Module):
    """A frozen language model read through its own head: three numbers per sentence, then a
    linear layer to ``n_classes`` logits.

    For each real token after the first, the *fit* compared with the unigram baseline is
    ``log p_lm(x_t | x_<t) - log p_unigram(x_t)`` (how much better the context predicts the word
    than its frequency alone: high when the word fits where it stands, low when it does not; the
    opposite sign of a surprisal). The first word has no context and no fit. The three numbers
    are the mean of it over the sentence and its two lowest values, standardised by a batch norm
    (running statistics of the training sentences). Only the batch norm and the linear layer train.
    """

    def __init__(
        self,
        lm: nn.Module,
        causal_mask: Callable[[int], torch.Tensor],
        unigram: torch.Tensor,
        n_classes: int = 2,
        keep_features: bool = False,
        kept: dict[tuple[int, ...], torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.lm, self.causal_mask = lm.requires_grad_(False), causal_mask
        self.register_buffer("unigram", unigram)  # (V,)
        self.norm = nn.BatchNorm1d(3)
        self.head = nn.Linear(3, n_classes)
        # keep_features: each sentence's three numbers computed once and kept (the frozen model
        # in eval mode gives a sentence the same numbers at every step). It saves most of the
        # time of a run of 200 steps over a few labels; not for models trained together (vmap).
        # kept: a dict shared by the readers of one model (the same weights), which then compute
        # each sentence once for all their runs (implies keep_features).
        if kept is None and keep_features:
            kept = {}
        self.kept: dict[tuple[int, ...], torch.Tensor] | None = kept

    def features(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """src (B, L) right-padded ids, lengths (B,) -> (B, 3): mean and two lowest fits."""
        if self.kept is None:
            return self._fits(src, lengths)
        keys = [tuple(row[:n].tolist()) for row, n in zip(src, lengths.tolist(), strict=True)]

        def computed(new: list[int]) -> torch.Tensor:
            rows = torch.tensor(new, device=src.device)
            width = int(lengths[rows].max())
            return self._fits(src[rows, :width], lengths[rows])  # (b, 3)

        return torch.stack(kept_rows(self.kept, keys, computed))  # (B, 3)

    def _fits(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """:meth:`features`, computed: (B, L), (B,) -> (B, 3)."""
        with torch.no_grad():
            self.lm.eval()  # no dropout in a frozen reader
            mask = self.causal_mask(src.size(1))  # (L, L); the language model moves it
            log_p = self.lm(src, mask).log_softmax(-1)  # (B, L, V)
            nxt = src[:, 1:]  # (B, L - 1): the words that positions 0 .. L-2 predict
            fit = log_p[:, :-1].gather(-1, nxt.unsqueeze(-1)).squeeze(-1) - self.unigram[nxt]
            real = torch.arange(1, src.size(1), device=src.device) < lengths.unsqueeze(1)
            count = real.sum(1).clamp(min=1)  # (B,)
            mean = fit.masked_fill(~real, 0.0).sum(1) / count
            lowest = fit.masked_fill(~real, float("inf")).sort(1).values  # (B, L - 1)
            lowest = torch.cat([lowest, torch.full_like(lowest[:, :2], float("inf"))], 1)[:, :2]
            lowest = torch.where(lowest.isinf(), mean.unsqueeze(1), lowest)  # short sentences
        return torch.cat([mean.unsqueeze(1), lowest], 1)  # (B, 3)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """src (B, L), lengths (B,) -> logits (B, n_classes)."""
        return self.head(self.norm(self.features(src, lengths)))
