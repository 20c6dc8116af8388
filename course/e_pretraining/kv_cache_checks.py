"""Checks of E's fast generation: one step of attention with a KV cache (``attention_step``),
the cache it returns, and a whole sequence stepped through. Each raises :class:`GradingError`
with a message that names the mistake; none computes the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course.testcells import check, check_tensor, expected_got, fail, same_values

# ---------------------------------------------------------------- the KV cache
KV_NOT_UPDATED = "the cache was not updated"
KV_FRONT = "the new key and value were put at the front of the cache"
KV_SWAPPED = "the keys and values of the cache are swapped"
KV_NO_SCALE = "the scores are not scaled (divide q.k by sqrt(dh))"
KV_SCALE_KEYS = (
    "the scores are divided by sqrt(T), the square root of the number of keys, instead of "
    "sqrt(dh), the size of one head's vectors"
)
KV_SCALE_DH = "the scores are divided by dh instead of sqrt(dh)"
KV_WRONG_AXIS = "softmax over the wrong axis"
KV_NEW_KEY_LEFT_OUT = "the new key was left out: the query attended to the cache only"
KV_CACHE_LEFT_OUT = "the cache was left out: the query attended to the new key only"
KV_MASKED = "a causal mask hid the cached keys"


def readable_step_inputs(
    batch: int, heads: int, cached: int, width: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """Inputs ``(q, k_new, v_new, cache)`` of ``attention_step`` whose output can be read.

    Queries and keys are random (float64). Value number j is the one-hot vector e_j: the cached
    values are e_0 .. e_{T-1} and the new value e_T (T = ``cached``), so that the first T + 1
    entries of the output are the attention weights themselves (old keys first, the new key
    last) and the other entries are 0. ``cache`` is None when ``cached`` is 0. Needs
    ``width >= cached + 2``, so that sqrt(dh) differs from sqrt(T), sqrt(T + 1) and 1.
    """
    if width < cached + 2:
        raise ValueError(f"width {width} is too small for {cached} cached positions")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, 1, width, generator=gen, dtype=torch.float64)
    keys = torch.randn(batch, heads, cached + 1, width, generator=gen, dtype=torch.float64)
    values = torch.eye(cached + 1, width, dtype=torch.float64).expand(batch, heads, -1, -1)
    cache = None if cached == 0 else (keys[:, :, :cached].clone(), values[:, :, :cached].clone())
    return q, keys[:, :, cached:].clone(), values[:, :, cached:].clone(), cache


def diagnose_attention_step(
    attention_step: Callable[..., object],
    batch: int,
    heads: int,
    cached: int,
    width: int,
    seed: int = 0,
) -> None:
    """One call of ``attention_step`` on :func:`readable_step_inputs`: the output's shape, the
    cache it returns (one position longer, old first, new last) and the attention weights read
    from the output (probabilities over the keys, the new key included, at temperature
    sqrt(dh))."""
    q, k_new, v_new, cache = readable_step_inputs(batch, heads, cached, width, seed)
    old = None if cache is None else (cache[0].clone(), cache[1].clone())
    got = attention_step(q.clone(), k_new.clone(), v_new.clone(), old)
    diagnose_attention_step_result(got, q, k_new, v_new, cache)


def _pair(value: object, name: str, form: str) -> tuple[object, object]:
    check(
        isinstance(value, (tuple, list)) and len(value) == 2,
        expected_got(f"{name} should return a pair.", form, type(value).__name__),
    )
    assert isinstance(value, (tuple, list))
    return value[0], value[1]


def _step_name(q: torch.Tensor, cached: int) -> str:
    cache = "cache=None" if cached == 0 else f"a cache of T={cached} positions"
    return f"attention_step(q {tuple(q.shape)}, k_new, v_new, {cache})"


def diagnose_attention_step_result(
    got: object,
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor] | None,
) -> None:
    """:func:`diagnose_attention_step` on what ``attention_step`` returned for the inputs of
    :func:`readable_step_inputs`."""
    batch, heads, _, width = q.shape
    cached = 0 if cache is None else int(cache[0].size(2))
    name = _step_name(q, cached)
    out, new_cache = _pair(got, name, "(out, (k, v))")
    out = check_tensor(out, f"the output of {name}")
    if cached > 0 and tuple(out.shape) == (batch, heads, cached + 1, width):
        fail(
            f"the output of {name} has {cached + 1} rows, one per key, where there is one new "
            "query. Was a causal mask added? A mask of shape (T + 1, T + 1) added to the scores "
            "(B, H, 1, T + 1) broadcasts them to T + 1 queries. No mask is needed: the new "
            "query is the last position, and every cached key is in its past."
        )
    check(
        tuple(out.shape) == (batch, heads, 1, width),
        expected_got(
            f"the output of {name} has the wrong shape: one vector per head for the new query.",
            (batch, heads, 1, width),
            tuple(out.shape),
        ),
    )
    _diagnose_new_cache(new_cache, name, k_new, v_new, cache)
    keys = k_new if cache is None else torch.cat([cache[0], k_new], dim=2)  # (B, H, T + 1, dh)
    _diagnose_step_weights(out.detach().to(torch.float64)[:, :, 0], q, keys, name)


def _concatenated(
    got: torch.Tensor, old: torch.Tensor | None, new: torch.Tensor, new_first: bool = False
) -> bool:
    """True when ``got`` holds ``old`` then ``new`` along the positions (or ``new`` first)."""
    parts = [new] if old is None else ([new, old] if new_first else [old, new])
    return same_values(got, torch.cat(parts, dim=2), 1e-6, 1e-6)


def _diagnose_new_cache(
    new_cache: object,
    name: str,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor] | None,
) -> None:
    """The cache returned by a step: a pair (k, v), one position longer than ``cache``, the old
    keys and values first and the new ones last."""
    cached = 0 if cache is None else int(cache[0].size(2))
    if new_cache is None:
        fail(
            f"{name}: {KV_NOT_UPDATED}: it returned None as the cache. Return (out, (k, v)) "
            "with k and v holding the T + 1 keys and values (the cached ones, then the new "
            "one), or the next step will not see this token."
        )
    k, v = _pair(new_cache, f"the cache returned by {name}", "(k, v)")
    k = check_tensor(k, f"the keys of the cache returned by {name}")
    v = check_tensor(v, f"the values of the cache returned by {name}")
    if cache is not None and same_values(k, cache[0], 0, 0) and same_values(v, cache[1], 0, 0):
        fail(
            f"{name}: {KV_NOT_UPDATED}: it returned the cache it was given ({cached} positions), "
            "without the new key and value. The next step would not see this token: return "
            "the concatenated (k, v), one position longer."
        )
    expected = (*k_new.shape[:2], cached + 1, k_new.size(-1))
    for tensor, what in [(k, "keys"), (v, "values")]:
        check(
            tuple(tensor.shape) == expected,
            expected_got(
                f"the {what} of the cache returned by {name} have the wrong shape. The cache "
                "grows by one position per step: the T cached positions plus the new one.",
                expected,
                tuple(tensor.shape),
            ),
        )
    old_k, old_v = (None, None) if cache is None else cache
    if _concatenated(k, old_k, k_new) and _concatenated(v, old_v, v_new):
        return
    if _concatenated(k, old_k, k_new, new_first=True) and _concatenated(
        v, old_v, v_new, new_first=True
    ):
        fail(
            f"{name}: {KV_FRONT}. Attention itself ignores the order of the keys (this step's "
            "output is not affected), but the cache is read by position: index t must hold "
            "the key and value of position t, as the full model computes them, so that it can "
            "be cut, inspected or shared by position. Append: torch.cat([cached, new], dim=2)."
        )
    if _concatenated(k, old_v, v_new) and _concatenated(v, old_k, k_new):
        fail(f"{name}: {KV_SWAPPED}: return (k, v), the keys first.")
    fail(
        expected_got(
            f"the cache returned by {name} does not hold the old keys and values followed by "
            "the new ones.",
            "(torch.cat([cached k, k_new], dim=2), torch.cat([cached v, v_new], dim=2))",
            "other values",
        )
    )


def _diagnose_step_weights(
    row: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, name: str
) -> None:
    """The weights read from one output row (B, H, dh) of :func:`readable_step_inputs`."""
    batch, heads, n_keys, width = keys.shape
    cached = n_keys - 1
    weights, rest = row[..., :n_keys], row[..., n_keys:]  # (B, H, T + 1), (B, H, dh - T - 1)
    check(
        not bool(torch.isnan(row).any()) and not bool(torch.isinf(row).any()),
        f"{name}: the output holds NaN or infinite values. A division by zero? With cache=None "
        "there are no cached positions (T = 0): the scale is sqrt(dh), not sqrt(T).",
    )
    first_only = ((weights[..., 0] - 1).abs() < 1e-6) & (weights[..., 1:].abs() < 1e-6).all(-1)
    if cached > 0 and bool(first_only.all()):
        fail(
            f"{name}: {KV_MASKED}: the new query attended to the first key only. A causal mask "
            "made for one query and T + 1 keys (is_causal=True, or tril of a (1, T + 1) matrix) "
            "is aligned top-left: it lets query 0 see key 0 only. But the new query is the LAST "
            "position: it may see every cached key and itself. No mask is needed here."
        )
    _diagnose_step_sums(weights, name)
    check(
        bool((weights >= -1e-9).all()) and bool((rest.abs() < 1e-6).all()),
        f"{name}: the output is not a weighted average of the values (here value j is the "
        "one-hot vector e_j: the output should hold the weights, between 0 and 1, in its first "
        "T + 1 entries and 0 after them). Return softmax(scores) @ v.",
    )
    _diagnose_left_out(weights, cached, name)
    _diagnose_step_temperature(weights, q, keys, name)


def _diagnose_step_sums(weights: torch.Tensor, name: str) -> None:
    """The weights (B, H, T + 1) of each head sum to 1 over the keys; else name the axis."""
    sums = weights.sum(dim=-1)  # (B, H)
    if torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
        return
    if torch.allclose(weights, torch.ones_like(weights), atol=1e-6):
        fail(
            f"{name}: {KV_WRONG_AXIS}: every weight is 1 (the output is the sum of the "
            "values). The softmax ran over an axis of length 1, such as the query axis "
            "(dim=-2), which holds the single new query. Take it over the keys (dim=-1)."
        )
    for axis, what in [(1, "heads (dim=1)"), (0, "batch (dim=0)")]:
        across = weights.sum(dim=axis)
        if weights.size(axis) > 1 and torch.allclose(across, torch.ones_like(across)):
            fail(
                f"{name}: {KV_WRONG_AXIS}: the weights sum to 1 over the {what}, not over "
                "the keys. Take the softmax over the last axis (dim=-1)."
            )
    fail(
        expected_got(
            f"{name}: the attention weights of each head should sum to 1 over the T + 1 "
            "keys. (In this check value j is the one-hot vector e_j, so the output's first "
            "T + 1 entries are the weights.)",
            1.0,
            round(float(sums.flatten()[0]), 6),
            "softmax over the keys (the last axis of the scores (B, H, 1, T + 1)).",
        )
    )


def _diagnose_left_out(weights: torch.Tensor, cached: int, name: str) -> None:
    """Neither the new key nor the ``cached`` keys of the cache get a weight of 0 everywhere."""
    if cached > 0 and bool((weights[..., cached].abs() < 1e-12).all()):
        fail(
            f"{name}: {KV_NEW_KEY_LEFT_OUT}. The new token attends to itself too: concatenate "
            "the new key and value to the cache first, then attend over all T + 1 positions."
        )
    if cached > 0 and bool((weights[..., :cached].abs() < 1e-12).all()):
        fail(
            f"{name}: {KV_CACHE_LEFT_OUT}. The cache holds the earlier positions, which the new "
            "token must see: attend over the T cached keys and the new one."
        )


def _diagnose_step_temperature(
    weights: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, name: str
) -> None:
    """Read the factor the scores q.k were divided by from the log-ratios of the weights."""
    n_keys, width = keys.size(2), keys.size(3)
    scores = (q.to(torch.float64) @ keys.to(torch.float64).transpose(-2, -1))[:, :, 0]
    usable = weights > 1e-30
    count = usable.sum(dim=-1, keepdim=True).clamp_min(1)
    logits = torch.where(usable, weights.clamp_min(1e-300).log(), 0.0)
    x = torch.where(usable, scores - (scores * usable).sum(-1, keepdim=True) / count, 0.0)
    y = torch.where(usable, logits - (logits * usable).sum(-1, keepdim=True) / count, 0.0)
    spread = float((x * x).sum())
    if spread < 1e-6:
        return
    slope = float((x * y).sum()) / spread  # log-weights = scores / factor + a constant per row
    if slope <= 0:
        return  # not a temperature; the comparison over a whole sequence says what is wrong
    factor = 1.0 / slope
    if math.isclose(factor, math.sqrt(width), rel_tol=1e-3):
        return
    if math.isclose(factor, 1.0, rel_tol=1e-3):
        fail(f"{name}: {KV_NO_SCALE}, with dh = {width} the last dimension of q and k.")
    if any(math.isclose(factor, math.sqrt(n), rel_tol=1e-3) for n in (n_keys, n_keys - 1)):
        fail(
            f"{name}: {KV_SCALE_KEYS}. The scale keeps the scores of order 1 whatever the size "
            f"of the vectors (here dh = {width}): it does not change with the number of "
            f"positions (here T + 1 = {n_keys} keys)."
        )
    if math.isclose(factor, width, rel_tol=1e-3):
        fail(f"{name}: {KV_SCALE_DH} (dh = {width}).")
    fail(
        expected_got(
            f"{name}: the softmax temperature is wrong: the scores q.k are divided by about "
            f"{factor:.4g}.",
            f"sqrt(dh) = {math.sqrt(width):.4g}",
            f"{factor:.4g}",
        )
    )


def sequence_inputs(
    batch: int,
    heads: int,
    length: int,
    width: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random queries, keys and values (B, H, L, dh) of a whole sequence."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, heads, length, width)
    q, k, v = (torch.randn(shape, generator=gen, dtype=dtype) for _ in range(3))
    return q, k, v


def step_through(
    attention_step: Callable[..., object], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> list[object]:
    """Feed a sequence (B, H, L, dh) to ``attention_step`` one position at a time.

    The first call gets ``cache=None``, each later call the cache the previous one returned.
    Returns what every call returned; it stops early when a call returns no ``(out, (k, v))``
    pair of tensors, whose cache could not be fed to the next call.
    """
    results: list[object] = []
    cache = None
    for t in range(q.size(2)):
        now = slice(t, t + 1)
        result = attention_step(
            q[:, :, now].clone(), k[:, :, now].clone(), v[:, :, now].clone(), cache
        )
        results.append(result)
        cache = _returned_cache(result)
        if cache is None:
            break
    return results


def _returned_cache(result: object) -> object:
    """The (k, v) pair of tensors that a step returned, or None."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        pair = result[1]
        if isinstance(pair, (tuple, list)) and len(pair) == 2:
            if all(isinstance(x, torch.Tensor) for x in pair):
                return pair
    return None


def diagnose_steps_result(
    got: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """What :func:`step_through` returned: every step's output (B, H, 1, dh) and its cache,
    one position longer each step, holding the keys and values of the positions so far in
    order. Returns the outputs of all the steps side by side (B, H, L, dh)."""
    batch, heads, length, width = q.shape
    check(isinstance(got, list) and got, "step_through returned no step.")
    assert isinstance(got, list)
    outputs = []
    for t, result in enumerate(got):
        name = f"attention_step at step {t} of a sequence of {length} positions"
        if t == 0:
            name += " (cache=None)"
        out, new_cache = _pair(result, name, "(out, (k, v))")
        out = check_tensor(out, f"the output of {name}", shape=(batch, heads, 1, width))
        old = None if t == 0 else (k[:, :, :t], v[:, :, :t])
        _diagnose_new_cache(new_cache, name, k[:, :, t : t + 1], v[:, :, t : t + 1], old)
        outputs.append(out)
    check(
        len(outputs) == length,
        f"attention_step stopped returning a cache after {len(outputs)} of {length} steps.",
    )
    return torch.cat(outputs, dim=2)
