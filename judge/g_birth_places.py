"""Assignment G's verdicts: span corruption, the accuracy and the London baseline, on observations.

The inputs come from :mod:`course.g_birth_places.checks` (the visible cells' examples, or drawn
from the seed); the verdicts are the checks' own judging functions, run here on what the student's
kernel recorded.
"""

from __future__ import annotations

from course.g_birth_places import checks
from course.probing import returned
from course.testcells import check


def span_visible(seed: int, got: object) -> None:
    """As the visible cell: block sizes 16 and 128, seed 0."""
    checks.judge_span_corruption(got, checks.span_case(seed=0, hidden=False))


def span_hidden(seed: int, got: object) -> None:
    """As the hidden cell, with block sizes, documents and generator seeds from the seed."""
    checks.judge_span_corruption(got, checks.span_case(seed=seed, hidden=True))


def _accuracy(got: object, cases: list) -> None:
    check(isinstance(got, dict), "no observation of dev_accuracy")
    assert isinstance(got, dict)
    values = got["values"]
    check(isinstance(values, list) and len(values) == len(cases), "not one value per case")
    for value, (predictions, answers) in zip(values, cases, strict=True):
        checks.judge_accuracy(returned(value, "dev_accuracy"), predictions, answers)
    checks.judge_length_mismatch(got["mismatch"])


def accuracy_visible(seed: int, got: object) -> None:
    """As the visible cell: two right answers out of four, and lists of unequal lengths."""
    _accuracy(got, [checks.ACCURACY_VISIBLE])


def accuracy_hidden(seed: int, got: object) -> None:
    """As the hidden cell, on lists drawn from the seed (spaces, case, empty, parts)."""
    _accuracy(got, checks.accuracy_cases(seed))


def london_visible(seed: int, got: object) -> None:
    checks.judge_london(returned(got, "london_baseline"), checks.LONDON_VISIBLE)


def london_hidden(seed: int, got: object) -> None:
    cases = checks.london_cases(seed)
    check(isinstance(got, list) and len(got) == len(cases), "not one place per case")
    assert isinstance(got, list)
    for value, pairs in zip(got, cases, strict=True):
        checks.judge_london(returned(value, "london_baseline"), pairs)
