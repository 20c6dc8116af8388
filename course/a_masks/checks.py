"""Checks for assignment A (masks and positions): they name the usual mistakes.

The functions take the student's output (or class) and raise :class:`GradingError` with a message
that names what is wrong. They check properties stated in the syllabus; none computes the answer.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course.testcells import check, check_tensor, expected_got, fail

NEG_INF = float("-inf")


# ---------------------------------------------------------------- causal mask
def diagnose_causal_mask(mask: object, sz: int) -> torch.Tensor:
    """Check a causal mask of size ``sz``: float, 0.0 on and below the diagonal, -inf above."""
    name = f"generate_square_subsequent_mask({sz})"
    mask = check_tensor(mask, name, shape=(sz, sz))
    lower = torch.tril(torch.ones(sz, sz, dtype=torch.bool))  # on and below the diagonal
    upper = ~lower
    if mask.dtype == torch.bool:
        if sz > 0 and torch.equal(mask, lower):  # True exactly where attention is allowed
            fail(
                f"{name} is a boolean mask with inverted meaning: it is True where attention is "
                "allowed, but in PyTorch a True in a boolean mask means 'may NOT attend'. "
                "Besides, this exercise asks for a float additive mask: 0.0 where allowed, "
                "-inf where blocked."
            )
        fail(
            f"{name} is a boolean mask. This exercise asks for a float additive mask that is "
            "added to the scores before the softmax: 0.0 where attention is allowed, -inf where "
            "it is blocked."
        )
    if not mask.is_floating_point():
        fail(
            f"{name} is an integer tensor ({mask.dtype}). An integer tensor cannot hold -inf; "
            "build the mask as a float tensor (torch.float32)."
        )
    check(
        mask.dtype == torch.float32,
        expected_got(f"{name} has the wrong dtype.", torch.float32, mask.dtype),
    )
    allowed, blocked = mask[lower], mask[upper]
    if bool(torch.isinf(mask.diagonal()).any()):
        fail(
            f"{name} blocks the diagonal: a token must be allowed to attend to itself "
            "(otherwise the first row is all -inf and its softmax is NaN)."
        )
    if bool((allowed == 1).all()) and sz > 0:
        fail(
            f"{name} has 1 (not 0) where attention is allowed. The mask is ADDED to the "
            "scores: 0 leaves an allowed score unchanged, 1 would shift it."
        )
    strictly_lower = torch.tril(torch.ones(sz, sz, dtype=torch.bool), diagonal=-1)
    if (
        sz > 1
        and bool((mask[strictly_lower] == NEG_INF).all())
        and bool((mask.diagonal() == 0).all())
        and bool((blocked == 0).all())
    ):
        fail(
            f"{name} is transposed: it hides the past (below the diagonal) and lets every token "
            "see the future (above the diagonal). Row i is the query at position i; column j is "
            "the key at position j; block j > i."
        )
    bad_allowed = allowed[allowed != 0]
    if bad_allowed.numel():
        fail(
            expected_got(
                f"{name}: positions on and below the diagonal must be 0.0.",
                0.0,
                bad_allowed[0].item(),
            )
        )
    bad_blocked = blocked[blocked != NEG_INF]
    if bad_blocked.numel():
        value = bad_blocked[0].item()
        hint = (
            "a large negative number is not -inf: use float('-inf')."
            if value < -1
            else "positions above the diagonal are the future and must be blocked."
        )
        fail(
            expected_got(f"{name}: positions above the diagonal must be -inf.", "-inf", value, hint)
        )
    return mask


# ---------------------------------------------------------------- padding mask
def diagnose_padding_mask(mask: object, lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Check a key-padding mask: bool ``(B, max_len)``, True at padded positions."""
    name = f"make_padding_mask(lengths={lengths.tolist()}, max_len={max_len})"
    mask = check_tensor(mask, name, shape=(len(lengths), max_len))
    if mask.dtype != torch.bool:
        fail(
            expected_got(
                f"{name} must be a boolean tensor (PyTorch's key_padding_mask convention).",
                torch.bool,
                mask.dtype,
            )
        )
    positions = torch.arange(max_len).unsqueeze(0)  # (1, max_len)
    padded = positions >= lengths.unsqueeze(1)  # (B, max_len)
    mixed = bool(padded.any()) and not bool(padded.all())  # a constant mask proves nothing
    if mixed and bool((mask == ~padded).all()):
        fail(
            f"{name} has the inverted meaning: it is True at real tokens. PyTorch's "
            "key_padding_mask is True at the PADDED positions (the ones to ignore)."
        )
    if not bool((mask == padded).all()):
        row, col = (mask != padded).nonzero()[0].tolist()
        fail(
            expected_got(
                f"{name} is wrong at sequence {row}, position {col} "
                f"(that sequence has length {int(lengths[row])}).",
                bool(padded[row, col]),
                bool(mask[row, col]),
            )
        )
    return mask


# ---------------------------------------------------------------- positional encoding
def encoding_table(module: nn.Module, length: int, width: int) -> torch.Tensor:
    """The table a positional-encoding module adds, read by running it on zeros in eval mode."""
    module.eval()
    with torch.no_grad():
        out = module(torch.zeros(1, length, width))
    out = check_tensor(out, "PositionalEncoding(...)(x)", shape=(1, length, width))
    return out[0]


def diagnose_encoding_values(table: torch.Tensor) -> None:
    """Name the usual mistakes from a few entries of a table with D = 4.

    With D = 4 the frequencies are 1 (dimensions 0, 1) and 1/100 (dimensions 2, 3), so
    PE[1] = (sin 1, cos 1, sin 0.01, cos 0.01).
    """
    row = [float(v) for v in table[1]]
    expected = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]

    def near(a: float, b: float) -> bool:
        return abs(a - b) < 1e-4

    if all(near(a, b) for a, b in zip(row, expected, strict=True)):
        return
    if near(row[0], math.cos(1)) and near(row[1], math.sin(1)):
        fail(
            "PositionalEncoding: sin and cos are swapped. Even dimensions 2i take the sine, "
            "odd dimensions 2i+1 the cosine."
        )
    if near(row[0], math.sin(1)) and near(row[1], math.sin(0.01)):
        fail(
            "PositionalEncoding: sines and cosines are not interleaved. Your table looks like "
            "[all sines | all cosines]; the formula puts sin in dimension 2i and cos in 2i+1, "
            "side by side, for the same frequency."
        )
    if near(row[1], math.cos(1 / 10000 ** (1 / 4))):
        fail(
            "PositionalEncoding: the exponent is not of the form 2i/D. Dimensions 2i and 2i+1 "
            "share one frequency 1/10000^(2i/D); you used the dimension index itself (j/D), so "
            "the cosine dimensions got their own frequencies."
        )
    if near(row[2], math.sin(1 / 10000 ** (1 / 4))):
        fail(
            "PositionalEncoding: the exponent is not of the form 2i/D. You used i/D (the factor "
            "2 is missing): the frequencies decay too slowly."
        )
    fail(
        expected_got(
            "PositionalEncoding with d_model=4: the encoding of position 1 is wrong.",
            [round(v, 5) for v in expected],
            [round(v, 5) for v in row],
            "PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)).",
        )
    )


def diagnose_encoding_storage(module: nn.Module, max_len: int, width: int) -> None:
    """The table must be a buffer: in state_dict, moved by .to(), not a parameter."""
    diagnose_storage_sizes(storage_sizes(module), max_len, width)


def storage_sizes(module: nn.Module) -> dict[str, list[int]]:
    """The sizes of a module's parameters, buffers and state_dict entries."""
    return {
        "parameters": [p.numel() for p in module.parameters()],
        "buffers": [b.numel() for b in module.buffers()],
        "state": [v.numel() for v in module.state_dict().values()],
    }


def diagnose_storage_sizes(sizes: dict[str, list[int]], max_len: int, width: int) -> None:
    """:func:`diagnose_encoding_storage` on the sizes :func:`storage_sizes` reads."""
    size = max_len * width
    if any(n == size for n in sizes["parameters"]):
        fail(
            "PositionalEncoding stores its table as an nn.Parameter: the optimiser would train "
            "it and parameter counts would include it. Use self.register_buffer(...)."
        )
    check(
        not sizes["parameters"],
        "PositionalEncoding should have no trainable parameters (only dropout and a buffer).",
    )
    if not any(n == size for n in sizes["buffers"]):
        fail(
            "PositionalEncoding keeps its table as a plain attribute (or recomputes it): it is "
            f"not a registered buffer of max_len x d_model = {max_len} x {width} values, so it "
            "is missing from state_dict() and does not move with .to(device). Use "
            "self.register_buffer(name, table)."
        )
    check(
        any(n == size for n in sizes["state"]),
        "PositionalEncoding's table should be saved in state_dict() (persistent buffer).",
    )
