"""What the trusted judge needs from assignment G's code (see :mod:`course.verify`).

One item per test cell of the notebook. The visible items replay the visible cells' examples; the
hidden items draw their inputs from the grader's secret seed with the functions of
:mod:`course.g_birth_places.checks`, which the judge calls too. ``span_corruption`` is observed by
``checks.observe_span_corruption`` (its errors kept as observations), the same collector the test
cells use.
"""

from __future__ import annotations

from course.g_birth_places import checks
from course.probing import attempt, by_cell
from course.verify import student


def span_visible(ns: dict, seed: int) -> object:
    case = checks.span_case(seed=0, hidden=False)
    return checks.observe_span_corruption(student(ns, "span_corruption"), case, catch=True)


def span_hidden(ns: dict, seed: int) -> object:
    case = checks.span_case(seed=seed, hidden=True)
    return checks.observe_span_corruption(student(ns, "span_corruption"), case, catch=True)


def _accuracy(ns: dict, cases: list) -> dict:
    accuracy = student(ns, "dev_accuracy")
    return {
        "values": [attempt(accuracy, list(p), list(a)) for p, a in cases],
        "mismatch": checks.observe_length_mismatch(accuracy),
    }


def accuracy_visible(ns: dict, seed: int) -> object:
    return _accuracy(ns, [checks.ACCURACY_VISIBLE])


def accuracy_hidden(ns: dict, seed: int) -> object:
    return _accuracy(ns, checks.accuracy_cases(seed))


def london_visible(ns: dict, seed: int) -> object:
    return attempt(student(ns, "london_baseline"), list(checks.LONDON_VISIBLE))


def london_hidden(ns: dict, seed: int) -> object:
    baseline = student(ns, "london_baseline")
    return [attempt(baseline, list(pairs)) for pairs in checks.london_cases(seed)]


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/g_birth_places.py (course.probing).
CELLS = {
    "test_span_visible": "span_visible",
    "test_span_hidden": "span_hidden",
    "test_accuracy_visible": "accuracy_visible",
    "test_accuracy_hidden": "accuracy_hidden",
    "test_london_visible": "london_visible",
    "test_london_hidden": "london_hidden",
}
ITEMS = by_cell(CELLS, globals())
