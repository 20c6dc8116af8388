"""Checks for assignment A (masks and positions): they name the usual mistakes.

``diagnose_X(code, ...)`` runs the student's code; ``diagnose_X_result(got, ...)``,
``diagnose_X_value(got)`` and ``diagnose_X_facts(facts, ...)`` decide on what it returned or what
was read of it. Each raises :class:`GradingError` with a message that names what is wrong. They
check properties stated in the syllabus; none computes the answer.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course.testcells import check, check_tensor, expected_got, fail, same_values

NEG_INF = float("-inf")


# ---------------------------------------------------------------- causal mask
def diagnose_causal_mask_result(got: object, sz: int) -> torch.Tensor:
    """Check the causal mask ``generate_square_subsequent_mask(sz)`` returned: float, 0.0 on and
    below the diagonal, -inf above; return it."""
    name = f"generate_square_subsequent_mask({sz})"
    mask = check_tensor(got, name, shape=(sz, sz))
    _diagnose_mask_dtype(mask, sz, name)
    lower = torch.tril(torch.ones(sz, sz, dtype=torch.bool))  # on and below the diagonal
    _diagnose_mask_pattern(mask, sz, name, lower)
    _diagnose_mask_entries(mask[lower], mask[~lower], name)
    return mask


def _diagnose_mask_dtype(mask: torch.Tensor, sz: int, name: str) -> None:
    """A boolean mask (inverted or not) or an integer one is named; float32 is asked for."""
    if mask.dtype == torch.bool:
        lower = torch.tril(torch.ones(sz, sz, dtype=torch.bool))
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


def _diagnose_mask_pattern(mask: torch.Tensor, sz: int, name: str, lower: torch.Tensor) -> None:
    """The whole-mask mistakes: NaN entries, a blocked diagonal, 1 where allowed, the transposed
    mask."""
    allowed, blocked = mask[lower], mask[~lower]
    if bool(torch.isnan(mask).any()):
        fail(
            f"{name} holds NaN. 0 * float('-inf') is NaN, not 0: a mask built as "
            "ones(sz, sz).triu(1) * float('-inf') gets NaN wherever the ones were 0. Fill with "
            "-inf first and keep the upper triangle (torch.full(..., float('-inf')).triu(1)), "
            "or use masked_fill."
        )
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


def _diagnose_mask_entries(allowed: torch.Tensor, blocked: torch.Tensor, name: str) -> None:
    """The first wrong entry: not 0.0 on and below the diagonal, not -inf above it."""
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


# ---------------------------------------------------------------- padding mask
def diagnose_padding_mask_result(got: object, lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """Check the key-padding mask ``make_padding_mask(lengths, max_len)`` returned: bool
    ``(B, max_len)``, True at padded positions; return it."""
    name = f"make_padding_mask(lengths={lengths.tolist()}, max_len={max_len})"
    mask = check_tensor(got, name, shape=(len(lengths), max_len))
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


def diagnose_encoding_table_value(got: torch.Tensor) -> None:
    """Name the usual mistakes from a few entries of the table (:func:`encoding_table`) of a
    PositionalEncoding with D = 4.

    With D = 4 the frequencies are 1 (dimensions 0, 1) and 1/100 (dimensions 2, 3), so
    PE[1] = (sin 1, cos 1, sin 0.01, cos 0.01).
    """
    row = [float(v) for v in got[1]]
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
    """The table must be a buffer (persistent or not), not a parameter nor a plain attribute."""
    diagnose_encoding_storage_facts(encoding_storage_facts(module), max_len, width)


def encoding_storage_facts(module: nn.Module) -> dict[str, list[int]]:
    """The sizes of a module's parameters and buffers."""
    return {
        "parameters": [p.numel() for p in module.parameters()],
        "buffers": [b.numel() for b in module.buffers()],
    }


def diagnose_encoding_storage_facts(facts: dict[str, list[int]], max_len: int, width: int) -> None:
    """:func:`diagnose_encoding_storage` on the sizes :func:`encoding_storage_facts` reads."""
    sizes, size = facts, max_len * width
    if any(n == size for n in sizes["parameters"]):
        fail(
            "PositionalEncoding stores its table as an nn.Parameter (model.parameters() lists "
            "it). The exercise asks for a buffer: self.register_buffer(name, table) (question 5 "
            "asks why)."
        )
    check(
        not sizes["parameters"],
        "PositionalEncoding should have no trainable parameters (only dropout and a buffer).",
    )
    if not any(n == size for n in sizes["buffers"]):
        fail(
            "PositionalEncoding keeps its table as a plain attribute (or recomputes it): "
            f"model.buffers() holds no table of max_len x d_model = {max_len} x {width} values. "
            "The exercise asks for self.register_buffer(name, table) (question 5 asks why)."
        )
    # A buffer registered with persistent=False is accepted: the table is a formula's output,
    # which a model may rebuild instead of saving it (question 5's model answer says so).


# ---------------------------------------------------------------- rotary positions
def _turned(a: torch.Tensor, b: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """The two coordinates of ``(a, b)`` turned by ``angle``, side by side in the last dimension."""
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


# The messages of the usual wrong versions of apply_rotary, in the order of _rotary_mistakes.
ROTARY_MISTAKES = (
    "apply_rotary pairs dimension i with dimension i + d/2 (the 'rotate_half' "
    "convention of GPT-NeoX and of Hugging Face's LLaMA). This exercise pairs "
    "NEIGHBOURS: (x[..., 2i], x[..., 2i+1]) is the pair turned by m * base^(-2i/d). "
    "Take a = x[..., 0::2] and b = x[..., 1::2], not the two halves of x.",
    "apply_rotary gives every dimension j its own angle m * base^(-j/d), so the two "
    "dimensions of a pair are not turned as one. The angle belongs to the PAIR i: both "
    "x[..., 2i] and x[..., 2i+1] use m * base^(-2i/d) (exponent 2i/d, with i the pair's "
    "index, not the dimension's).",
    "apply_rotary uses the frequencies base^(-i/d): the factor 2 of the exponent 2i/d "
    "is missing, so the frequencies decay too slowly. Pair i (dimensions 2i and 2i+1) "
    "turns by m * base^(-2i/d).",
    "apply_rotary turns the pairs the wrong way (by -t instead of t): the signs of the "
    "sines are flipped. The turn by t maps (a, b) to "
    "(a cos t - b sin t, a sin t + b cos t).",
    "apply_rotary counts the positions from 1: the first token is turned too. Positions "
    "count from 0 (m = 0 .. L-1), so the first token is left as it is.",
)


def _rotary_mistakes(x: torch.Tensor, base: float) -> list[tuple[bool, torch.Tensor, str]]:
    """The outputs of the usual wrong versions of apply_rotary on ``x`` (float64).

    Each entry says whether that version can be told apart from the right one on inputs of this
    shape (for instance, with d = 2 the halves are the neighbours), its output, and the message.
    """
    length, width = x.shape[-2], x.shape[-1]
    slow = base != 1
    telling = (
        length >= 2 and width >= 4,
        length >= 2 and slow,
        length >= 2 and width >= 4 and slow,
        length >= 2,
        True,
    )
    return list(zip(telling, _rotary_wrong_outputs(x, base), ROTARY_MISTAKES, strict=True))


def _rotary_wrong_outputs(x: torch.Tensor, base: float) -> list[torch.Tensor]:
    """What each wrong version of :data:`ROTARY_MISTAKES` returns for ``x`` (float64)."""
    length, width = x.shape[-2], x.shape[-1]
    position = torch.arange(length, dtype=torch.float64)
    pair = torch.arange(width // 2, dtype=torch.float64)  # i = 0 .. d/2 - 1
    theta = base ** (-2 * pair / width)  # the frequencies of the syllabus, one per pair
    a, b = x[..., 0::2], x[..., 1::2]

    half = width // 2
    first, second = x[..., :half], x[..., half:]
    angle = torch.outer(position, theta)
    halves = torch.cat(
        [first * angle.cos() - second * angle.sin(), second * angle.cos() + first * angle.sin()],
        dim=-1,
    )

    per_dim = torch.outer(position, base ** (-torch.arange(width, dtype=torch.float64) / width))
    partner = torch.stack([-b, a], dim=-1).flatten(-2)
    per_dimension = x * per_dim.cos() + partner * per_dim.sin()

    no_two = _turned(a, b, torch.outer(position, base ** (-pair / width)))
    wrong_way = _turned(a, b, -angle)
    from_one = _turned(a, b, torch.outer(position + 1, theta))
    return [halves, per_dimension, no_two, wrong_way, from_one]


def diagnose_rotary_result(got: object, x: torch.Tensor, base: float) -> torch.Tensor:
    """Check the output of ``apply_rotary(x, base)`` for the usual mistakes; return it.

    It reads properties of the output (shape, dtype, finite values, the length of each pair
    kept, position 0 unchanged, pair 0 turned by +1 radian at position 1) and names a wrong
    version when the output is that version's. The test cell then compares the values.
    """
    name = f"apply_rotary(x of shape {tuple(x.shape)})"
    rotated = check_tensor(got, name, shape=tuple(x.shape))
    check(
        rotated.dtype == x.dtype,
        expected_got(
            f"{name} has the wrong dtype: the output must keep the dtype of x.",
            x.dtype,
            rotated.dtype,
            "compute the angles in float64 if you like, then .to(x.dtype) the cos and sin.",
        ),
    )
    check(bool(torch.isfinite(rotated).all()), f"{name} contains NaN or inf values.")
    got = rotated.detach().to(torch.float64)
    source = x.detach().to(torch.float64)
    for telling, output, message in _rotary_mistakes(source, base):
        if telling and same_values(got, output, atol=1e-4, rtol=1e-5):
            fail(message)

    lengths_in = source[..., 0::2] ** 2 + source[..., 1::2] ** 2
    lengths_out = got[..., 0::2] ** 2 + got[..., 1::2] ** 2
    if not same_values(lengths_out, lengths_in, atol=1e-3, rtol=1e-4):
        fail(
            f"{name} changes the length of some pairs (x[..., m, 2i], x[..., m, 2i+1]). A turn "
            "keeps lengths: each neighbouring pair is turned in its own plane, by cos and sin of "
            "one angle, and nothing is scaled or mixed with another pair."
        )
    if x.shape[-2] and not same_values(got[..., 0, :], source[..., 0, :], atol=1e-4, rtol=1e-5):
        fail(
            f"{name} changes the first position. At m = 0 every angle m * base^(-2i/d) is 0, "
            "so the first token must come out as it went in."
        )
    if x.shape[-2] >= 2:
        a, b = source[..., 1, 0], source[..., 1, 1]
        one = torch.tensor(1.0, dtype=torch.float64)
        first_pair = torch.stack([a * one.cos() - b * one.sin(), a * one.sin() + b * one.cos()], -1)
        if not same_values(got[..., 1, 0:2], first_pair, atol=1e-4, rtol=1e-5):
            fail(
                f"{name}: pair 0 (dimensions 0 and 1) at position 1 is not turned by +1 radian. "
                "Its frequency is base^(-0/d) = 1, so at position m it turns by m radians: "
                "(a, b) -> (a cos 1 - b sin 1, a sin 1 + b cos 1) at m = 1."
            )
    return rotated
