"""How close the pretrained model of assignment E puts sentiment words (a given measurement).

Three representations of a word, from a language model with ``embedding`` and
``encode(ids, mask)`` (E's ``TransformerLM``): its row of the input embedding, the model's last
hidden state at the word when it stands in a short review sentence, and the last hidden state at
the sentence's final token (the state E's classifier reads). For each, the mean cosine similarity
of pairs of words of the same polarity ("bad", "awful"), of opposite polarity ("good", "bad"),
and of two kinds of controls, each the first word of a pair against words as frequent as the
second in the reviews (the vocabulary is sorted by count, so they are its neighbours in id): any
such words, sentiment words left out ("controls"), and adjectives that judge nothing
(:data:`ADJECTIVES`: "american", "young", "musical", ...), which tell "an evaluative word goes
here" from "an adjective goes here". In-context numbers are means over the sentences of
:data:`TEMPLATES`.

    table = measure(lm, tokenizer, causal_mask)   # {representation: {group: (mean, min, max)}}
    print(format_table(table))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from course.data import WordTokenizer

SAME = [
    ("good", "great"),
    ("great", "excellent"),
    ("funny", "entertaining"),
    ("beautiful", "wonderful"),
    ("bad", "awful"),
    ("bad", "terrible"),
    ("boring", "dull"),
    ("stupid", "silly"),
]
OPPOSITE = [
    ("good", "bad"),
    ("great", "awful"),
    ("best", "worst"),
    ("excellent", "terrible"),
    ("funny", "boring"),
    ("beautiful", "ugly"),
    ("smart", "stupid"),
    ("interesting", "dull"),
]
TEMPLATES = [  # "{}" is the word; each word is one token, so a template has one length
    "this movie is {} .",
    "the film is {} and long .",
    "a {} story .",
    "it was a {} experience .",
    "the acting is {} .",
]
REPRESENTATIONS = ("input embedding", "state at the word", "state at the last token")
GROUPS = ("same polarity", "opposite polarity", "controls", "adjectives")
# Adjectives that describe without judging (origin, age, size, colour, kind), the controls matched
# on part of speech; those missing from a vocabulary are skipped.
ADJECTIVES = (
    "little new long old big full american human romantic high young comic visual low black "
    "short small modern french recent middle personal social political animated final cultural "
    "white single historical large sexual urban blue female british central previous japanese "
    "red green male natural early late public digital musical national technical chinese older "
    "teenage english italian russian domestic foreign main private indian literary younger "
    "african physical european silent various western former irish legal local military "
    "southern verbal ancient daily fictional german korean magical religious economic married "
    "mexican spanish suburban"
).split()


def frequency_controls(tokenizer: WordTokenizer, word: str, k: int, exclude: set[str]) -> list[str]:
    """The ``k`` words nearest ``word`` in frequency rank (id), alphabetic, not in ``exclude``."""
    index, found, step = tokenizer.stoi[word], [], 1
    while len(found) < k and step < len(tokenizer):
        for j in (index - step, index + step):
            if 0 <= j < len(tokenizer) and len(found) < k:
                candidate = tokenizer.itos[j]
                if candidate.isalpha() and candidate not in exclude:
                    found.append(candidate)
        step += 1
    return found


def adjective_controls(
    tokenizer: WordTokenizer, word: str, k: int, adjectives: list[str] | tuple[str, ...]
) -> list[str]:
    """The ``k`` words of ``adjectives`` in the vocabulary nearest ``word`` in frequency rank."""
    known = [a for a in adjectives if a in tokenizer.stoi and a != word]
    if not known:
        raise ValueError("none of the control adjectives is in the vocabulary: give others")
    index = tokenizer.stoi[word]
    return sorted(known, key=lambda a: (abs(tokenizer.stoi[a] - index), a))[:k]


@torch.no_grad()
def representations(
    lm: nn.Module,
    tokenizer: WordTokenizer,
    words: list[str],
    causal_mask: Callable[[int], torch.Tensor],
) -> dict[str, torch.Tensor]:
    """{representation: (W, T, D)} for the W words (T templates; the embedding has T = 1)."""
    lm.eval()
    ids = torch.tensor([tokenizer.stoi[w] for w in words])  # (W,)
    at_word, at_end = [], []
    for template in TEMPLATES:
        before = tokenizer.encode(template.split("{}")[0])
        rows = torch.stack([torch.tensor(tokenizer.encode(template.format(w))) for w in words])
        states = lm.encode(rows, causal_mask(rows.size(1)))  # (W, L, D)
        at_word.append(states[:, len(before)])
        at_end.append(states[:, -1])
    return {
        REPRESENTATIONS[0]: lm.embedding.weight[ids].unsqueeze(1),  # (W, 1, D)
        REPRESENTATIONS[1]: torch.stack(at_word, 1),  # (W, T, D)
        REPRESENTATIONS[2]: torch.stack(at_end, 1),  # (W, T, D)
    }


def measure(
    lm: nn.Module,
    tokenizer: WordTokenizer,
    causal_mask: Callable[[int], torch.Tensor],
    controls_per_pair: int = 10,
    adjectives: list[str] | tuple[str, ...] = tuple(ADJECTIVES),
) -> dict[str, dict[str, tuple[float, float, float]]]:
    """{representation: {group: (mean, min, max)}}: the cosines of the pairs of :data:`SAME`,
    of :data:`OPPOSITE` and of their frequency-matched controls, any words and ``adjectives``
    (in context, each pair's cosine is its mean over the templates)."""
    sentiment = {w for pair in SAME + OPPOSITE for w in pair}
    missing = sorted(w for w in sentiment if w not in tokenizer.stoi)
    if missing:
        raise ValueError(f"these words are not in the vocabulary: {missing}")
    pairs = {"same polarity": SAME, "opposite polarity": OPPOSITE, "controls": [], "adjectives": []}
    for first, second in SAME + OPPOSITE:
        controls = frequency_controls(tokenizer, second, controls_per_pair, sentiment)
        pairs["controls"] += [(first, c) for c in controls]
        matched = adjective_controls(tokenizer, second, controls_per_pair, adjectives)
        pairs["adjectives"] += [(first, c) for c in matched]
    words = sorted({w for group in pairs.values() for pair in group for w in pair})
    where = {w: i for i, w in enumerate(words)}
    table = {}
    for name, states in representations(lm, tokenizer, words, causal_mask).items():
        table[name] = {}
        for group, members in pairs.items():
            a = states[[where[x] for x, _ in members]]  # (P, T, D)
            b = states[[where[y] for _, y in members]]  # (P, T, D)
            cosines = F.cosine_similarity(a, b, dim=-1).mean(1)  # (P,)
            table[name][group] = (float(cosines.mean()), float(cosines.min()), float(cosines.max()))
    return table


def nearest(lm: nn.Module, tokenizer: WordTokenizer, word: str, k: int = 6) -> list[tuple]:
    """The ``k`` words whose input embeddings are closest to ``word``'s: (word, cosine)."""
    table = lm.embedding.weight.detach()  # (V, D)
    index = tokenizer.stoi[word]
    cosines = F.cosine_similarity(table[index : index + 1], table, dim=-1)  # (V,)
    cosines[index] = -2.0
    top = cosines.topk(k).indices.tolist()
    return [(tokenizer.itos[j], round(float(cosines[j]), 2)) for j in top]


def format_table(table: dict[str, dict[str, tuple[float, float, float]]]) -> str:
    """The table as aligned text: one row per representation, one column per group, each cell
    the mean cosine and, in brackets, the lowest and highest pair's."""
    lines = [f"{'cosine: mean (min, max)':<25}" + "".join(f"{g:>20}" for g in GROUPS)]
    for name, row in table.items():
        cells = (f"{m:.2f} ({lo:.2f}, {hi:.2f})" for m, lo, hi in (row[g] for g in GROUPS))
        lines.append(f"{name:<25}" + "".join(f"{c:>20}" for c in cells))
    return "\n".join(lines)
