"""Checks for assignment G (birth places): the names the notebook's test cells call.

They raise :class:`GradingError` with a message that names the mistake. The checks of
``span_corruption`` live in :mod:`course.g_birth_places.span_checks` (and are named here too);
those of ``dev_accuracy`` and ``london_baseline`` below, with the cases they draw from a seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch

from course.g_birth_places.span_checks import *  # noqa: F403
from course.probing import integer
from course.testcells import check, expected_got, fail

# ---------------------------------------------------------------- accuracy
ACCURACY_VISIBLE = (["London", "Paris", "Rome", "Berlin"], ["London", "Lyon", "Rome", "Bonn"])
PLACES = ("London", "Paris", "Chicago", "Sydney", "New York City", "Berlin", "Lyon", "Rome")


def _same(prediction: str, answer: str) -> bool:
    return prediction.strip() == answer.strip()


def accuracy_mistakes(predictions: list[str], answers: list[str]) -> dict[str, float]:
    """What the usual mistakes of ``dev_accuracy`` give on these lists, by message."""
    pairs = list(zip(predictions, answers, strict=True))
    n = len(pairs)
    return {
        "a percentage: return a fraction between 0 and 1.": 100 * sum(_same(*p) for p in pairs) / n,
        "a count of correct answers: divide by the number of questions.": float(
            sum(_same(*p) for p in pairs)
        ),
        "the comparison folds case: 'london' is not the answer 'London' (compare exactly, "
        "after stripping surrounding whitespace).": sum(
            p.strip().lower() == a.strip().lower() for p, a in pairs
        )
        / n,
        "the comparison does not strip surrounding whitespace: 'London ' is the answer "
        "'London'.": sum(p == a for p, a in pairs) / n,
        "a substring test: an empty or partial prediction ('' or 'Lon') is inside 'London' "
        "but is not the answer.": sum(p.strip() in a for p, a in pairs) / n,
        "a substring test: 'London, England' contains 'London' but is not the answer.": sum(
            a.strip() in p for p, a in pairs
        )
        / n,
    }


def accuracy_cases(seed: int) -> list[tuple[list[str], list[str]]]:
    """(predictions, answers) lists drawn from ``seed``: right answers, wrong places, and the
    variants that the usual mistakes count wrongly (case, spaces, empty, parts, more words)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(4):
        n = integer(gen, 8, 41)
        answers = [PLACES[integer(gen, 0, len(PLACES))] for _ in range(n)]
        predictions = []
        for answer in answers:
            kind = integer(gen, 0, 8)
            other = PLACES[(PLACES.index(answer) + 1) % len(PLACES)]
            predictions.append(
                [answer, answer, other, answer.lower(), f" {answer} ", "", answer[:3],
                 f"{answer}, England"][kind]
            )  # fmt: skip
        cases.append((predictions, answers))
    return cases


def judge_accuracy(got: object, predictions: list[str], answers: list[str]) -> None:
    """``got`` is what ``dev_accuracy(predictions, answers)`` returned."""
    name = f"dev_accuracy(predictions, answers) on {len(answers)} questions"
    check(
        isinstance(got, (int, float)) and not isinstance(got, bool),
        expected_got(f"{name} should return a number.", "float", type(got).__name__),
    )
    assert isinstance(got, (int, float))
    expected = sum(_same(p, a) for p, a in zip(predictions, answers, strict=True)) / len(answers)
    if abs(got - expected) < 1e-9:
        return
    for message, wrong in accuracy_mistakes(predictions, answers).items():
        if abs(got - wrong) < 1e-9:
            fail(f"{name}: {message}")
    fail(expected_got(f"{name} is wrong.", expected, got))


def judge_length_mismatch(raised: object) -> None:
    """``raised`` is the name of the exception that lists of different lengths raised, or None."""
    check(
        raised == "ValueError",
        expected_got(
            "dev_accuracy(3 predictions, 4 answers) should raise a ValueError: lists of "
            "different lengths mean the predictions do not match the questions (zip would "
            "silently drop the extra answers).",
            "ValueError",
            f"{raised} raised" if raised else "no error",
        ),
    )


def observe_length_mismatch(dev_accuracy: Callable[..., object]) -> str | None:
    """Call ``dev_accuracy`` on 3 predictions and 4 answers: the exception's name, or None."""
    try:
        dev_accuracy(["Paris", "Rome", "Lyon"], ["Paris", "Rome", "Lyon", "Bonn"])
    except Exception as error:  # noqa: BLE001 - which error is the observation
        return type(error).__name__
    return None


def diagnose_accuracy(dev_accuracy: Callable[..., object], cases: list) -> None:
    """Check ``dev_accuracy`` on each (predictions, answers) case, then on unequal lengths."""
    for predictions, answers in cases:
        judge_accuracy(dev_accuracy(list(predictions), list(answers)), predictions, answers)
    judge_length_mismatch(observe_length_mismatch(dev_accuracy))


# ---------------------------------------------------------------- the London baseline
LONDON_VISIBLE = [
    ("Where was Ada Byron born?", "London"),
    ("Where was Marie Curie born?", "Warsaw"),
    ("Where was Victor Hugo born?", "Paris"),
    ("Where was Edith Piaf born?", "Paris"),
    ("Where was Isaac Newton born?", "Woolsthorpe"),
    ("Where was Claude Monet born?", "Paris"),
    ("Where was Charles Dickens born?", "Portsmouth"),
    ("Where was Virginia Woolf born?", "London"),
]


def london_cases(seed: int) -> list[list[tuple[str, str]]]:
    """Lists of (question, place) pairs drawn from ``seed``, each with one most frequent place
    that is not London, London second, and a question asked twice.

    The top place has at least 6 pairs and every other at most 5, the repeated question
    included (London 4, the rest 1 to 3): exactly one answer is right in every list."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(3):
        places = [p for p in PLACES if p != "London"]
        top = places[integer(gen, 0, len(places))]
        counts = {top: integer(gen, 6, 10), "London": 4}
        for place in places:
            counts.setdefault(place, integer(gen, 1, 4))
        rows = [place for place, count in counts.items() for _ in range(count)]
        order = torch.randperm(len(rows), generator=gen).tolist()
        pairs = [(f"Where was Person {i} born?", rows[j]) for i, j in enumerate(order)]
        pairs.append((pairs[0][0], pairs[0][1]))  # a question asked twice
        cases.append(pairs)
    return cases


def judge_london(got: object, pairs: list[tuple[str, str]]) -> None:
    """``got`` is what ``london_baseline(pairs)`` returned."""
    counts = Counter(place for _, place in pairs)
    top = counts.most_common(1)[0][0]
    name = f"london_baseline({len(pairs)} training pairs)"
    if isinstance(got, (tuple, list)):
        fail(
            f"{name} returned {type(got).__name__} {got!r}: return the place only (a str), not "
            "a pair or a count."
        )
    check(
        isinstance(got, str),
        expected_got(f"{name} should return a place.", "str", type(got).__name__),
    )
    if got == top:
        return
    if got == "London":
        fail(
            f"{name} returned 'London', but here the most frequent place is {top!r}: the "
            "baseline must be computed from the pairs, not typed."
        )
    if got in {question for question, _ in pairs}:
        fail(f"{name} returned a question: count the places (the second item of each pair).")
    if got in counts and counts[got] == min(counts.values()):
        fail(f"{name} returned {got!r}, one of the LEAST frequent places; take the most frequent.")
    fail(expected_got(f"{name} is not the most frequent place.", top, got))
