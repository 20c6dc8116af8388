"""E's given measurement of how close the pretrained model puts sentiment words
(course.e_pretraining.similarity): controls matched by frequency, cosines computed as stated,
and the shipped model's figures that the notebook's text reads (before its question 3)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course.data import WordTokenizer
from course.data.tokenizer import DEFAULT_SPECIALS
from course.e_pretraining import checkpoint, similarity
from tools import pretrain_review_lm as pretrain

SENTIMENT = sorted({w for pair in similarity.SAME + similarity.OPPOSITE for w in pair})
TEMPLATE_WORDS = sorted(
    {w for t in similarity.TEMPLATES for w in WordTokenizer.tokenize(t.replace("{}", ""))}
)


class Lookup(nn.Module):
    """A "language model" whose state at a position is the embedding of the token there."""

    def __init__(self, vectors: torch.Tensor):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(vectors)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)  # (B, L, D)


def toy() -> tuple[Lookup, WordTokenizer]:
    """Fillers between the sentiment words, so that each has frequency neighbours; every
    sentiment word points along axis 0, every other word along its own axis."""
    fillers = [f"filler{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(len(SENTIMENT))]
    words = [w for pair in zip(SENTIMENT, fillers, strict=True) for w in pair]
    itos = list(DEFAULT_SPECIALS) + TEMPLATE_WORDS + words
    vectors = torch.zeros(len(itos), len(itos))
    for i, word in enumerate(itos):
        vectors[i, 0 if word in SENTIMENT else i] = 1.0
    return Lookup(vectors), WordTokenizer(itos)


def test_controls_are_the_nearest_words_in_frequency_rank_outside_the_lists() -> None:
    tokenizer = WordTokenizer([*DEFAULT_SPECIALS, "the", ".", "good", "cat", "bad", "dog", "sun"])
    found = similarity.frequency_controls(tokenizer, "bad", 3, exclude={"good", "bad"})
    assert found == ["cat", "dog", "sun"]  # nearest ids first, "good" skipped
    assert similarity.frequency_controls(tokenizer, "bad", 10, {"good", "bad"}) == [
        "cat",
        "dog",
        "sun",
        "the",
    ]  # then "." and the specials skipped; fewer than asked when the vocabulary runs out


def test_cosines_of_a_model_whose_states_are_known() -> None:
    model, tokenizer = toy()
    fillers = [w for w in tokenizer.itos if w.startswith("filler")]
    table = similarity.measure(
        model, tokenizer, lambda n: torch.zeros(n, n), controls_per_pair=2, adjectives=fillers
    )
    for name in ("input embedding", "state at the word"):
        assert table[name]["same polarity"] == pytest.approx((1.0, 1.0, 1.0))
        assert table[name]["opposite polarity"] == pytest.approx((1.0, 1.0, 1.0))
        assert table[name]["controls"] == pytest.approx((0.0, 0.0, 0.0))  # other axes
        assert table[name]["adjectives"] == pytest.approx((0.0, 0.0, 0.0))
    # every template ends with "." here: the last state is the same whatever the word
    for group in similarity.GROUPS:
        assert table["state at the last token"][group] == pytest.approx((1.0, 1.0, 1.0))
    text = similarity.format_table(table)
    assert "1.00 (1.00, 1.00)" in text and "0.00 (0.00, 0.00)" in text


def test_adjective_controls_are_the_nearest_adjectives_in_frequency_rank() -> None:
    tokenizer = WordTokenizer([*DEFAULT_SPECIALS, "young", "good", "cat", "bad", "old", "red"])
    found = similarity.adjective_controls(tokenizer, "bad", 2, ["red", "young", "old", "blue"])
    assert found == ["old", "red"]  # the nearest ids first; "blue", not in the vocabulary, skipped
    with pytest.raises(ValueError, match="control adjectives"):
        similarity.adjective_controls(tokenizer, "bad", 2, ["blue"])


def test_a_word_missing_from_the_vocabulary_is_named() -> None:
    model, tokenizer = toy()
    small = WordTokenizer([w for w in tokenizer.itos if w != "awful"])
    with pytest.raises(ValueError, match="awful"):
        similarity.measure(model, small, lambda n: torch.zeros(n, n))


def test_what_the_notebook_reads_from_the_shipped_model() -> None:
    """The text before question 3 reads these figures: sentiment words, of either polarity,
    far closer to each other than to words as frequent, adjectives that judge nothing included;
    polarity adds little; the state at the last token hardly depends on the word; "bad" among
    the nearest embeddings of "good"."""
    given = pretrain.given_lm()
    lm, tokenizer, _ = checkpoint.load_pretrained(given.TransformerLM)
    table = similarity.measure(lm, tokenizer, given.causal_mask)
    embedding = {group: mean for group, (mean, _, _) in table["input embedding"].items()}
    assert embedding["opposite polarity"] > embedding["controls"] + 0.2
    assert (
        embedding["opposite polarity"] > embedding["adjectives"] + 0.15
    )  # not only "an adjective"
    assert abs(embedding["same polarity"] - embedding["opposite polarity"]) < 0.15
    last = table["state at the last token"]
    assert all(last[group][0] > 0.9 for group in similarity.GROUPS)
    assert "bad" in [w for w, _ in similarity.nearest(lm, tokenizer, "good", k=3)]
