"""The unlabelled text that assignment E's language model was pretrained on.

The text ships with the course (see :func:`pretraining_texts`): the sentences of the *training*
split of the movie-review polarity data (their labels are never read), six public-domain
novels and the Wikipedia articles of WikiText-2's validation and test splits. Any line that
contains a sentence of the classification validation or test split is left out, so the
classifier is never evaluated on text the language model has read.

The instructor's script ``tools/pretrain_review_lm.py`` trains on it; the notebook measures the
model on the held-out review sentences (:func:`review_validation_sentences`).
"""

from __future__ import annotations

import hashlib

from course.data import WordTokenizer, load_novels, load_polarity, load_wikitext

SPLIT_SEED = 0  # the seed of load_polarity's split that the classifier uses
LM_VAL_SENTENCES = 500  # review sentences held out from pretraining, to measure the LM


def held_out_sentences(seed: int = SPLIT_SEED) -> list[str]:
    """The classification validation and test sentences: text the pretraining must not see."""
    polarity = load_polarity(seed=seed)
    return polarity["validation"]["text"][:] + polarity["test"]["text"][:]  # [:]: one read


def _without_leaks(lines: list[str], forbidden: list[str]) -> list[str]:
    """The lines that contain none of the ``forbidden`` sentences (compared as token strings)."""
    by_start: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for sentence in forbidden:
        words = tuple(WordTokenizer.tokenize(sentence))
        if words:
            by_start.setdefault(words[:2], []).append(words)
    return [line for line in lines if not _contains_any(line, by_start)]


def _contains_any(line: str, by_start: dict[tuple[str, ...], list[tuple[str, ...]]]) -> bool:
    """Whether the tokens of ``line`` contain one of the token sequences, indexed by their first
    two words (one for a one-word sentence)."""
    words = tuple(WordTokenizer.tokenize(line))
    for start in range(len(words)):
        candidates = by_start.get(words[start : start + 2], []) + by_start.get(
            words[start : start + 1], []
        )
        for sentence in candidates:
            if words[start : start + len(sentence)] == sentence:
                return True
    return False


def review_sentences(seed: int = SPLIT_SEED) -> list[str]:
    """The training-split review sentences that contain no held-out sentence, in split order."""
    reviews = load_polarity(seed=seed)["train"]["text"][:]  # a list, read at once
    return _without_leaks(reviews, held_out_sentences(seed))


def pretraining_texts(seed: int = SPLIT_SEED) -> dict[str, list[str]]:
    """The unlabelled text of the pretraining, by part.

    Returns:
        "reviews": training-split review sentences for the LM's training;
        "review_validation": the last ``LM_VAL_SENTENCES`` of them, held out to measure the LM;
        "novels": paragraphs of the six novels;
        "wikitext": paragraphs of WikiText-2's validation and test articles.
        No line of any part contains a classification validation or test sentence.
    """
    reviews = review_sentences(seed)
    held_out = held_out_sentences(seed)
    return {
        "reviews": reviews[:-LM_VAL_SENTENCES],
        "review_validation": reviews[-LM_VAL_SENTENCES:],
        "novels": _without_leaks(load_novels()["text"][:], held_out),
        "wikitext": _without_leaks(load_wikitext(), held_out),
    }


def text_hash(texts: dict[str, list[str]]) -> str:
    """SHA-256 of the pretraining text (all parts, in order), to tell which data made a model."""
    digest = hashlib.sha256()
    for name in sorted(texts):
        digest.update(name.encode())
        for line in texts[name]:
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def review_validation_sentences() -> list[str]:
    """The held-out review sentences that measure the language model (never trained on)."""
    return review_sentences()[-LM_VAL_SENTENCES:]
