"""Checks for assignment D's trained heads (previous-token and induction scores): they name the
usual mistakes of reading an attention pattern (the diagonal, rows and columns swapped, the mean
over the wrong rows). Beside :mod:`course.d_language_model.checks`, which gives these names to the
notebook too; none of them computes the answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course.testcells import check, check_tensor, expected_got, fail

__all__ = [
    "pointer_attention",
    "diagnose_head_scores_result",
    "previous_token_inputs",
    "diagnose_previous_token",
    "diagnose_previous_token_result",
    "induction_inputs",
    "diagnose_induction",
    "diagnose_induction_result",
    "HEADS_AVERAGED",
    "DIAGONAL",
    "PREVIOUS_ALL_ROWS",
    "PREVIOUS_SWAPPED",
    "INDUCTION_OFFSET",
    "INDUCTION_ALL_ROWS",
    "INDUCTION_FROM_PERIOD_MINUS_ONE",
    "INDUCTION_SWAPPED",
]

# The mistakes the checks of the two head scores name (the hidden cells name them too).
HEADS_AVERAGED = (
    "the scores of the heads are averaged into one number: return one score per head, a tensor "
    "of shape (H,) (reduce over the rows of each head only)."
)
DIAGONAL = (
    "it reads the diagonal, the weight from position i to ITSELF (weights[h, i, i]). A "
    "previous-token head attends from i to i - 1: weights[h, i, i - 1], just below the diagonal."
)
PREVIOUS_ALL_ROWS = (
    "the sum is divided by L, as if row 0 counted: position 0 has no previous token, so the mean "
    "runs over the L - 1 rows i = 1 .. L - 1 (divide by L - 1)."
)
PREVIOUS_SWAPPED = (
    "rows and columns are swapped: weights[h, i - 1, i] is how much query i - 1 reads key i (the "
    "NEXT position). Rows are queries and columns keys: the previous-token weight of row i is "
    "weights[h, i, i - 1]."
)
INDUCTION_OFFSET = (
    "it reads the offset i - period, the earlier copy of the current token itself. An induction "
    "head attends to the token AFTER that copy, the one to predict: weights[h, i, i - period + 1]."
)
INDUCTION_ALL_ROWS = (
    "the sum is divided by L, as if every row counted: only the rows i >= period have an earlier "
    "copy to look at, so the mean runs over those L - period rows."
)
INDUCTION_FROM_PERIOD_MINUS_ONE = (
    "the mean starts at row i = period - 1 (one row too early: torch.diagonal with offset "
    "-(period - 1) starts there). Row period - 1 is still in the first copy; the mean runs over "
    "the rows i >= period."
)
INDUCTION_SWAPPED = (
    "rows and columns are swapped: weights[h, i - period + 1, i] is how much query "
    "i - period + 1 reads key i. Rows are queries and columns keys: the induction weight of row "
    "i is weights[h, i, i - period + 1]."
)


def pointer_attention(targets: list[list[int]]) -> torch.Tensor:
    """One-hot attention weights (H, L, L): in head h, row i puts all its weight on column
    ``targets[h][i]`` (a head that always knows exactly where to look)."""
    index = torch.tensor(targets, dtype=torch.long)  # (H, L)
    heads, length = index.shape
    return torch.zeros(heads, length, length).scatter_(2, index.unsqueeze(-1), 1.0)


def diagnose_head_scores_result(got: object, heads: int, name: str) -> torch.Tensor:
    """What a head score returned: one float score per head, a tensor of shape (H,), no NaN,
    every value in [0, 1]; return it."""
    if isinstance(got, (int, float)) or (
        isinstance(got, torch.Tensor) and got.dim() == 0 and heads > 1
    ):
        fail(f"{name}: {HEADS_AVERAGED}")
    scores = check_tensor(got, name)
    check(
        tuple(scores.shape) == (heads,),
        expected_got(
            f"{name} has the wrong shape: one score per head.",
            (heads,),
            tuple(scores.shape),
            "torch.diagonal reads the plane of the first two dimensions unless told otherwise: "
            "torch.diagonal(weights, offset, dim1=-2, dim2=-1) reads each head's (L, L) table.",
        ),
    )
    check(
        scores.is_floating_point(),
        expected_got(f"{name} should hold float scores.", "a float dtype", scores.dtype),
    )
    check(not bool(torch.isnan(scores).any()), f"{name} holds NaN values.")
    check(
        bool(((scores >= -1e-6) & (scores <= 1 + 1e-6)).all()),
        f"{name} = {scores.tolist()}: a mean of attention weights lies between 0 and 1.",
    )
    return scores


def _near(value: torch.Tensor, target: float) -> bool:
    return abs(float(value) - target) < 1e-5


def previous_token_inputs(length: int) -> list[torch.Tensor]:
    """Two heads each, one-hot patterns whose previous-token scores are known: [previous, self]
    scores [1, 0], [next, previous] scores [0, 1]. (Row 0 of a previous head reads itself.)"""
    previous = [0, *range(length - 1)]  # row i -> i - 1
    itself = list(range(length))  # row i -> i
    following = [*range(1, length), length - 1]  # row i -> i + 1 (not causal)
    return [pointer_attention([previous, itself]), pointer_attention([following, previous])]


def diagnose_previous_token(score_fn: Callable, length: int = 6) -> None:
    """Run ``previous_token_score`` on :func:`previous_token_inputs` and name the mistakes."""
    outputs = [score_fn(weights.clone()) for weights in previous_token_inputs(length)]
    diagnose_previous_token_result(outputs, length)


def diagnose_previous_token_result(got: list, length: int) -> None:
    """:func:`diagnose_previous_token` on what ``previous_token_score`` returned for the inputs."""
    check(isinstance(got, list) and len(got) == 2, "not one result per pattern")
    names = [
        "[previous-token head, head attending to itself]",
        "[next-token head, previous-token head]",
    ]
    first, second = (
        diagnose_head_scores_result(out, 2, f"previous_token_score(one-hot heads {n}, L={length})")
        for out, n in zip(got, names, strict=True)
    )
    expected = (first[0], 1.0), (first[1], 0.0), (second[0], 0.0), (second[1], 1.0)
    if all(_near(value, target) for value, target in expected):
        return
    name = "previous_token_score on one-hot attention patterns"
    if _near(first[1], 1.0):
        fail(f"{name}: a head that attends to itself should score 0, and scores 1: {DIAGONAL}")
    if _near(second[0], 1.0):
        fail(
            f"{name}: a head that attends from i to i + 1 should score 0, and scores 1: "
            f"{PREVIOUS_SWAPPED}"
        )
    if _near(first[0], (length - 1) / length):
        fail(
            f"{name}: a perfect previous-token head should score 1, and scores "
            f"{float(first[0]):.4g} = (L - 1) / L: {PREVIOUS_ALL_ROWS}"
        )
    fail(
        expected_got(
            f"{name}: wrong scores. Every row i >= 1 of a perfect previous-token head puts all "
            "its weight on i - 1 (score 1); a head that attends to itself or to the next "
            "position scores 0.",
            "[1, 0] and [0, 1]",
            f"{first.tolist()} and {second.tolist()}",
        )
    )


def induction_inputs(length: int, period: int) -> list[torch.Tensor]:
    """Two heads each, one-hot patterns whose induction scores are known (rows that the pattern
    does not concern read themselves): [induction, earlier copy] scores [1, 0], [transposed
    induction, induction] scores [0, 1]. Needs period >= 2 and length > period."""
    rows = range(length)
    induction = [i - period + 1 if i >= period else i for i in rows]  # the token after the copy
    copy = [i - period if i >= period else i for i in rows]  # the earlier copy itself
    transposed = [i + period - 1 if i <= length - period else i for i in rows]
    return [pointer_attention([induction, copy]), pointer_attention([transposed, induction])]


def diagnose_induction(score_fn: Callable, length: int = 8, period: int = 4) -> None:
    """Run ``induction_score`` on :func:`induction_inputs` and name the mistakes."""
    outputs = [score_fn(weights.clone(), period) for weights in induction_inputs(length, period)]
    diagnose_induction_result(outputs, length, period)


def diagnose_induction_result(got: list, length: int, period: int) -> None:
    """:func:`diagnose_induction` on what ``induction_score`` returned for the inputs."""
    check(isinstance(got, list) and len(got) == 2, "not one result per pattern")
    names = [
        "[induction head, head attending to the earlier copy]",
        "[transposed induction head, induction head]",
    ]
    first, second = (
        diagnose_head_scores_result(
            out, 2, f"induction_score(one-hot heads {n}, L={length}, period={period})"
        )
        for out, n in zip(got, names, strict=True)
    )
    expected = (first[0], 1.0), (first[1], 0.0), (second[0], 0.0), (second[1], 1.0)
    if all(_near(value, target) for value, target in expected):
        return
    name = f"induction_score on one-hot attention patterns (L={length}, period={period})"
    if _near(first[1], 1.0):
        fail(
            f"{name}: a head that attends from i to i - period should score 0, and scores 1: "
            f"{INDUCTION_OFFSET}"
        )
    if _near(second[0], 1.0):
        fail(
            f"{name}: a head whose row j attends to j + period - 1 should score 0, and scores "
            f"1: {INDUCTION_SWAPPED}"
        )
    if _near(first[0], (length - period) / length):
        fail(
            f"{name}: a perfect induction head should score 1, and scores "
            f"{float(first[0]):.4g} = (L - period) / L: {INDUCTION_ALL_ROWS}"
        )
    if _near(first[0], (length - period) / (length - period + 1)):
        fail(
            f"{name}: a perfect induction head should score 1, and scores "
            f"{float(first[0]):.4g} = (L - period) / (L - period + 1): "
            f"{INDUCTION_FROM_PERIOD_MINUS_ONE}"
        )
    fail(
        expected_got(
            f"{name}: wrong scores. Every row i >= period of a perfect induction head puts all "
            "its weight on i - period + 1 (score 1); the other two heads score 0.",
            "[1, 0] and [0, 1]",
            f"{first.tolist()} and {second.tolist()}",
        )
    )
