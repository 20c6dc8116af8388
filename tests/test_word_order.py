"""Assignment E's word-order task: balanced, swapped sentences really differ, and every sentence
of the task was held out of the pretraining text (the leak filter, on the task's own sentences)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from torch import nn

from course.data import WordTokenizer, load_polarity
from course.e_pretraining import text
from course.e_pretraining.word_order import (
    ORIGINAL,
    SWAPPED,
    FitReader,
    swap_two_words,
    unigram_log_probs,
    word_order_split,
)


@pytest.fixture(scope="module")
def polarity():
    return load_polarity(seed=text.SPLIT_SEED)


def test_a_swap_exchanges_two_different_words_and_keeps_the_rest():
    generator = torch.Generator().manual_seed(0)
    sentence = "the plot is thin but the acting is warm ."
    for _ in range(200):
        swapped = swap_two_words(sentence, generator)
        before, after = sentence.split(), swapped.split()
        assert Counter(before) == Counter(after), "a swap must keep the same words"
        moved = [k for k, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert len(moved) == 2, f"exactly two places change, not {moved}"
        i, j = moved
        assert (after[i], after[j]) == (before[j], before[i])


def test_a_sentence_without_two_different_words_cannot_be_swapped():
    generator = torch.Generator().manual_seed(0)
    assert swap_two_words("yes yes yes", generator) is None
    assert swap_two_words("fine", generator) is None


def test_the_split_is_balanced_reproducible_and_only_swaps_change_order(polarity):
    sentences = list(polarity["validation"]["text"])
    split = word_order_split(sentences, seed=2)
    counts = Counter(split["label"])
    assert abs(counts[ORIGINAL] - counts[SWAPPED]) <= 2, counts
    assert split == word_order_split(sentences, seed=2)
    originals = {" ".join(s.split()) for s in sentences}
    for sentence, label in zip(split["text"], split["label"], strict=True):
        assert (sentence in originals) == (label == ORIGINAL), sentence


def test_every_sentence_of_the_task_is_held_out_of_pretraining(polarity):
    """Both halves of the task (pool from the test split, validation from the validation split)
    are sentences that the leak filter keeps out of the pretraining text (that no pretraining
    line contains one is tested in test_pretrained.py), and no sentence is in both halves."""
    held_out = set(text.held_out_sentences())
    pool, val = set(polarity["test"]["text"]), set(polarity["validation"]["text"])
    assert pool <= held_out and val <= held_out
    assert not pool & val


class Successor(nn.Module):
    """A fake language model over ids 0..V-1 that predicts, after word x, the word x + 1."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.unused = nn.Linear(1, 1)  # a parameter, to check that the reader freezes it

    def forward(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*src.shape, self.vocab)  # (B, L, V)
        return logits.scatter(-1, ((src + 1) % self.vocab).unsqueeze(-1), 5.0)


def no_mask(length: int) -> torch.Tensor:
    return torch.zeros(length, length)


def test_the_fit_reader_measures_how_well_each_word_fits_its_context():
    vocab = 12
    unigram = torch.full((vocab,), 1 / vocab).log()
    reader = FitReader(Successor(vocab), no_mask, unigram)
    ids = torch.tensor([[2, 3, 4, 5, 6], [2, 5, 4, 3, 6], [7, 8, 0, 0, 0]])  # right-padded
    lengths = torch.tensor([5, 5, 2])
    features = reader.features(ids, lengths)  # (3, 3)
    hit = torch.tensor(5.0).exp() / (torch.tensor(5.0).exp() + vocab - 1)
    fits = float(hit.log() - unigram[0])
    misses = float(((1 - hit) / (vocab - 1)).log() - unigram[0])
    assert features[0].tolist() == pytest.approx([fits, fits, fits], abs=1e-5)
    assert features[1].tolist() == pytest.approx([misses, misses, misses], abs=1e-5)
    assert features[2].tolist() == pytest.approx([fits, fits, fits], abs=1e-5)  # one pair only
    assert [name for name, p in reader.named_parameters() if p.requires_grad] == [
        "norm.weight", "norm.bias", "head.weight", "head.bias",
    ]  # fmt: skip
    assert reader(ids, lengths).shape == (3, 2)


def test_kept_features_are_the_computed_ones_whatever_the_batch():
    unigram = torch.full((12,), 1 / 12).log()
    computed = FitReader(Successor(12), no_mask, unigram)
    kept = FitReader(Successor(12), no_mask, unigram, keep_features=True)
    ids = torch.tensor([[2, 3, 4, 5, 6], [2, 5, 4, 3, 6], [7, 8, 0, 0, 0]])
    lengths = torch.tensor([5, 5, 2])
    expected = computed.features(ids, lengths)
    assert torch.allclose(kept.features(ids[2:, :2], lengths[2:]), expected[2:], atol=1e-6)
    assert torch.allclose(kept.features(ids, lengths), expected, atol=1e-6)
    assert len(kept.kept) == 3  # each sentence once, whatever batch it came in
    assert torch.allclose(kept.features(ids[[1, 1]], lengths[[1, 1]]), expected[[1, 1]])


def test_unigram_log_probs_follow_the_counts():
    tokenizer = WordTokenizer.build(["a a a b"])
    log_p = unigram_log_probs(tokenizer, ["a a a b", "a"])
    assert float(log_p.exp().sum()) == pytest.approx(1.0)
    a, b = tokenizer.stoi["a"], tokenizer.stoi["b"]
    assert float(log_p[a] - log_p[b]) == pytest.approx(math.log(5 / 2))


def test_readers_of_one_model_share_their_kept_features():
    unigram = torch.full((12,), 1 / 12).log()
    shared: dict = {}
    first = FitReader(Successor(12), no_mask, unigram, kept=shared)
    second = FitReader(Successor(12), no_mask, unigram, kept=shared)
    ids = torch.tensor([[2, 3, 4, 5, 6], [2, 5, 4, 3, 6]])
    lengths = torch.tensor([5, 3])
    expected = FitReader(Successor(12), no_mask, unigram).features(ids, lengths)
    assert torch.allclose(first.features(ids, lengths), expected, atol=1e-6)
    assert len(shared) == 2
    second.lm = None  # the second reader must not need its model: both sentences are kept
    assert torch.allclose(second.features(ids[[1, 0]], lengths[[1, 0]]), expected[[1, 0]])
