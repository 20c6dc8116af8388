"""B's named mistakes, and the checks of scaled dot-product attention and of splitting and
merging heads. Each raises :class:`GradingError` with a message that names the mistake.
"""

from __future__ import annotations

import math

import torch

from course.testcells import (
    check,
    check_tensor,
    expected_got,
    fail,
)

SCALE_D = "the scores are divided by d instead of sqrt(d)"
NO_SCALE = "the scores are not scaled (divide QK^T by sqrt(d))"
WRONG_AXIS = "softmax over the wrong axis"
MASK_AFTER = "the mask is added after the softmax"
HEAD_AXIS = "heads split by reshaping without moving the head axis"
MERGE_AXIS = "heads merged by reshaping without moving the head axis back"
NO_OUT_PROJ = "missing output projection"
LN_AXIS = "LayerNorm over the wrong axis"
LN_UNBIASED = "LayerNorm with the unbiased variance"
RESIDUAL_AFTER_NORM = "the residual is added after the norm"
KV_FROM_DECODER = (
    "the keys and values come from the decoder states x, not from the memory (that is "
    "self-attention). Cross-attention takes q from x, k and v from the memory"
)
Q_FROM_MEMORY = (
    "the queries come from the memory, not from the decoder states x. Cross-attention has one "
    "query per decoder position (q from x) and reads the memory through k and v"
)
K_FROM_DECODER = "the keys come from the decoder states x, not from the memory"
V_FROM_DECODER = "the values come from the decoder states x, not from the memory"

LAYER_PARTS = ("self_attn", "linear1", "linear2", "norm1", "norm2")
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


# ---------------------------------------------------------------- scaled dot-product attention
def diagnose_attention_result(
    got: object,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    name: str = "scaled_dot_product_attention",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the (output, weights) an attention call returned by their properties; return them.

    Weights must be probabilities over the keys (last axis), exactly 0 where the mask is -inf,
    the output must be ``weights @ v``, and the softmax temperature implied by the weights must
    be sqrt(d).
    """
    check(
        isinstance(got, tuple) and len(got) == 2,
        expected_got(
            f"{name} should return a tuple (output, weights).",
            "(output, weights)",
            type(got).__name__,
        ),
    )
    assert isinstance(got, tuple)
    out, weights = got
    lq, d, lk, dv = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        batch = torch.broadcast_shapes(batch, mask.shape[:-2])
    weights = check_tensor(weights, f"{name}: the weights", shape=(*batch, lq, lk))
    out = check_tensor(out, f"{name}: the output", shape=(*batch, lq, dv))
    w = weights.detach().to(torch.float64)
    m = (
        torch.zeros(*batch, lq, lk, dtype=torch.float64)
        if mask is None
        else mask.detach().to(torch.float64).expand(*batch, lq, lk)
    )
    _diagnose_weights(w, m, mask is not None, name)
    _diagnose_temperature(q, k, w, m, d, name)
    expected_out = w @ v.detach().to(torch.float64)
    check(
        torch.allclose(out.detach().to(torch.float64), expected_out, atol=1e-4, rtol=1e-4),
        f"{name}: the output is not weights @ v (the weighted average of the values).",
    )
    return out, weights


def _diagnose_weights(w: torch.Tensor, m: torch.Tensor, masked: bool, name: str) -> None:
    """The weights ``w`` (float64) are probabilities over the keys, 0 where the mask ``m`` is
    -inf (``masked``: a mask was passed)."""
    blocked = torch.isinf(m)
    if bool(torch.isinf(w).any()) or bool((w < -1e-6).any()):
        if masked and _probabilities_plus_mask(w, m, blocked):
            fail(
                f"{name}: {MASK_AFTER}. The weights hold -inf or negative values exactly where "
                "the mask does: they are probabilities plus the mask. Add the mask to the "
                "scores, THEN take the softmax, so that a -inf score becomes a weight of "
                "exactly 0."
            )
        fail(
            f"{name}: the weights hold -inf or negative values, so they are not probabilities. "
            "The weights are softmax(scores) over the keys: each is between 0 and 1."
        )
    check(not bool(torch.isnan(w).any()), f"{name}: the weights contain NaN values.")
    _diagnose_row_sums(w, m, masked and not bool(blocked.any()), name)
    if bool(blocked.any()):
        leaked = w[blocked].abs().max().item()
        check(
            leaked == 0.0,
            f"{name}: keys where the mask is -inf get a weight of {leaked:.3g}; it should be "
            "exactly 0 (add the mask to the scores before the softmax).",
        )


def _diagnose_row_sums(w: torch.Tensor, m: torch.Tensor, finite_mask: bool, name: str) -> None:
    """Every row of ``w`` sums to 1; ``finite_mask``: a mask without -inf was passed (added
    after the softmax, it shows in the sums)."""
    row_sums = w.sum(dim=-1)
    if torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-4):
        return
    if finite_mask:
        shifted = (w - m).sum(dim=-1)
        if torch.allclose(shifted, torch.ones_like(shifted), atol=1e-4):
            fail(
                f"{name}: {MASK_AFTER}. Each row of weights - mask sums to 1: the mask was "
                "added to the probabilities. Add it to the scores before the softmax."
            )
    col_sums = w.sum(dim=-2)
    if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-4):
        fail(
            f"{name}: {WRONG_AXIS}. Your weights sum to 1 down each column (over the "
            "queries). Each query distributes its attention over the keys: take the softmax "
            "over the last axis (dim=-1), so that every row sums to 1."
        )
    fail(
        expected_got(
            f"{name}: every row of the weights (one query, all keys) should sum to 1.",
            1.0,
            round(float(row_sums.flatten()[0]), 6),
            "take the softmax over the last axis (the keys).",
        )
    )


def _probabilities_plus_mask(w: torch.Tensor, m: torch.Tensor, blocked: torch.Tensor) -> bool:
    """True when ``w`` is -inf exactly where the mask is, and ``w - mask`` lies in [0, 1]
    elsewhere: what adding the mask after the softmax gives."""
    if not torch.equal(torch.isinf(w), blocked):
        return False
    rest = (w - m)[~blocked]
    return bool((rest >= -1e-6).all()) and bool((rest <= 1 + 1e-6).all())


def _diagnose_temperature(
    q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, m: torch.Tensor, d: int, name: str
) -> None:
    """Read the factor the scores were divided by from the log-ratios of the weights."""
    scores = q.detach().to(torch.float64) @ k.detach().to(torch.float64).transpose(-2, -1)
    scores = scores.expand_as(w)
    usable = (w > 1e-30) & ~torch.isinf(m)
    logits = torch.where(usable, w.clamp_min(1e-300).log() - torch.where(usable, m, 0.0), 0.0)
    count = usable.sum(dim=-1, keepdim=True).clamp_min(1)
    x = torch.where(usable, scores - (scores * usable).sum(-1, keepdim=True) / count, 0.0)
    y = torch.where(usable, logits - (logits * usable).sum(-1, keepdim=True) / count, 0.0)
    spread = float((x * x).sum())
    if spread < 1e-6 or d == 1:
        return
    slope = float((x * y).sum()) / spread  # logits = scores / factor (+ a constant per row)
    if slope <= 0:
        return  # not a temperature problem; the value comparison will say what is wrong
    factor = 1.0 / slope
    if math.isclose(factor, math.sqrt(d), rel_tol=1e-3):
        return
    if math.isclose(factor, d, rel_tol=1e-3):
        fail(
            f"{name}: {SCALE_D} (d = {d}). The variance of q.k grows like d, so its standard "
            "deviation grows like sqrt(d): divide by sqrt(d) to keep the scores of order 1."
        )
    if math.isclose(factor, 1.0, rel_tol=1e-3):
        fail(f"{name}: {NO_SCALE}, with d = {d} the last dimension of q and k.")
    fail(
        expected_got(
            f"{name}: the softmax temperature is wrong: your scores are QK^T divided by about "
            f"{factor:.4g}.",
            f"sqrt(d) = {math.sqrt(d):.4g}",
            f"{factor:.4g}",
        )
    )


# ---------------------------------------------------------------- heads
def diagnose_split_result(got: object, x: torch.Tensor, nhead: int) -> torch.Tensor:
    """Check the shape of what split_heads(x, nhead) returned and name the reshape-only mistake;
    return it."""
    b, length, width = x.shape
    name = f"split_heads(x of shape {tuple(x.shape)}, nhead={nhead})"
    out = check_tensor(got, name, shape=(b, nhead, length, width // nhead))
    if length > 1 and nhead > 1 and torch.equal(out, x.reshape(b, nhead, length, width // nhead)):
        fail(
            f"{name}: {HEAD_AXIS}. x.reshape(B, H, L, D/H) cuts the flat memory into H blocks, "
            "so one 'head' gets the features of several positions. Split the last axis first, "
            "(B, L, D) -> (B, L, H, D/H), then move the head axis: transpose(1, 2)."
        )
    return out


def diagnose_merge_result(got: object, heads: torch.Tensor) -> torch.Tensor:
    """Check the shape of what merge_heads(heads) returned and name the reshape-only mistake;
    return it."""
    b, nhead, length, dh = heads.shape
    name = f"merge_heads(x of shape {tuple(heads.shape)})"
    out = check_tensor(got, name, shape=(b, length, nhead * dh))
    if length > 1 and nhead > 1 and torch.equal(out, heads.reshape(b, length, nhead * dh)):
        fail(
            f"{name}: {MERGE_AXIS}. Move the head axis next to the per-head features first, "
            "(B, H, L, D/H) -> (B, L, H, D/H) with transpose(1, 2), then reshape to (B, L, D)."
        )
    return out
