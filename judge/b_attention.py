"""Assignment B's verdicts: attention, heads, the layer and cross-attention, on observations.

Each judge checks what its test cell checks, with the course's own checks where they work on
tensors. The modules are compared with PyTorch's (``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``) given the weights the student's module reported, as the test
cells do with the module itself.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course.b_attention import checks, draws
from course.probing import returned
from course.testcells import check, check_against_reference, check_close, expected_got, fail
from judge import core


# ---------------------------------------------------------------- references and helpers
def reference_attention(q, k, v, mask=None, scale=None, axis=-1, mask_after=False):
    """softmax(q k^T / scale + mask) v in float64 (and the usual mistakes, by the flags)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale is None else scale)
    if mask is not None and not mask_after:
        scores = scores + mask.double()
    weights = torch.softmax(scores, dim=axis)
    if mask is not None and mask_after:
        weights = weights + mask.double()
    return weights @ v, weights


def reference_split(x: torch.Tensor, nhead: int) -> torch.Tensor:
    b, length, width = x.shape
    return x.reshape(b, length, nhead, width // nhead).permute(0, 2, 1, 3)


def reference_merge(heads: torch.Tensor) -> torch.Tensor:
    b, nhead, length, width = heads.shape
    return heads.permute(0, 2, 1, 3).reshape(b, length, nhead * width)


def reference_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float):
    norm = nn.LayerNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(gamma)
        norm.bias.copy_(beta)
        return norm(x)


def mistaken_norms(x, gamma, beta, eps) -> dict[str, torch.Tensor]:
    x64 = x.double()
    out = {}
    if x.dim() >= 2:
        mean = x64.mean(-2, keepdim=True)
        var = x64.var(-2, unbiased=False, keepdim=True)
        out[checks.LN_AXIS] = (x64 - mean) / torch.sqrt(var + eps) * gamma + beta
    mean = x64.mean(-1, keepdim=True)
    var = x64.var(-1, unbiased=True, keepdim=True)
    out[checks.LN_UNBIASED] = (x64 - mean) / torch.sqrt(var + eps) * gamma + beta
    return out


def _linear(weights: dict, part: str, n_in: int, n_out: int) -> nn.Linear:
    """An nn.Linear holding the reported weight and bias of ``part`` (shapes checked)."""
    weight, bias = weights[f"{part}.weight"], weights[f"{part}.bias"]
    check(
        isinstance(weight, torch.Tensor)
        and isinstance(bias, torch.Tensor)
        and tuple(weight.shape) == (n_out, n_in)
        and tuple(bias.shape) == (n_out,),
        f"{part}: the reported weight and bias do not fit nn.Linear({n_in}, {n_out}).",
    )
    linear = nn.Linear(n_in, n_out)
    with torch.no_grad():
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    return linear


def _norm(weights: dict, part: str, width: int) -> nn.LayerNorm:
    weight, bias = weights[f"{part}.weight"], weights[f"{part}.bias"]
    check(
        isinstance(weight, torch.Tensor)
        and isinstance(bias, torch.Tensor)
        and tuple(weight.shape) == (width,)
        and tuple(bias.shape) == (width,),
        f"{part}: the reported weight and bias do not fit nn.LayerNorm({width}).",
    )
    norm = nn.LayerNorm(width)
    with torch.no_grad():
        norm.weight.copy_(weight)
        norm.bias.copy_(bias)
    return norm


def attention_with(weights: dict, d_model: int, prefix: str = "") -> nn.Module:
    """A module with the student's four projections, what the checks read of it."""
    module = nn.Module()
    for part in checks.PROJECTIONS:
        setattr(module, part, _linear(weights, prefix + part, d_model, d_model))
    return module


def layer_with(weights: dict, d_model: int, d_ff: int) -> nn.Module:
    """A module with the student's layer's parts, what the checks read of it."""
    layer = nn.Module()
    layer.self_attn = attention_with(weights, d_model, "self_attn.")
    layer.linear1 = _linear(weights, "linear1", d_model, d_ff)
    layer.linear2 = _linear(weights, "linear2", d_ff, d_model)
    layer.norm1 = _norm(weights, "norm1", d_model)
    layer.norm2 = _norm(weights, "norm2", d_model)
    return layer


def _pair(got: dict) -> tuple | None:
    """The result of an attention call as the test cell saw it (a tuple), or a failure."""
    if "items" in got:
        return tuple(got["items"])
    fail(
        expected_got(
            "scaled_dot_product_attention should return a tuple (output, weights).",
            "(output, weights)",
            got["type"],
        )
    )
    return None


def _count(got: object, expected: int, what: str) -> None:
    check(isinstance(got, list) and len(got) == expected, f"not one observation per {what}")


def _with_cases(got: object, cases: list) -> list[tuple]:
    """Each drawn case with its observation (``got["cases"]``: one per case, or the check
    fails)."""
    assert isinstance(got, dict)
    _count(got["cases"], len(cases), "case")
    return list(zip(cases, got["cases"], strict=True))


def _gradient_reaches(grad: object, message: str) -> None:
    check(
        isinstance(grad, torch.Tensor)
        and bool(torch.isfinite(grad).all())
        and grad.abs().sum() > 0,
        message,
    )


# ---------------------------------------------------------------- scaled dot-product attention
def sdpa_visible(seed: int, got: object) -> None:
    cases = draws.attention_visible_inputs()
    _count(got, len(cases), "call")
    (q, k, v, _), (_, _, _, causal), (qb, kb, vb, _) = cases
    out, weights = checks.diagnose_attention_result(_pair(got[0]), q, k, v)
    w0 = math.exp(2) / (math.exp(2) + 1)
    check_close(weights, torch.tensor([[w0, 1 - w0], [0.5, 0.5]]), "the weights")
    check_close(out, torch.tensor([[w0, 1 - w0, 0.0], [0.5, 0.5, 0.0]]), "the output")
    out, weights = checks.diagnose_attention_result(_pair(got[1]), q, k, v, causal)
    check_close(weights, torch.tensor([[1.0, 0.0], [0.5, 0.5]]), "the weights with a causal mask")
    checks.diagnose_attention_result(_pair(got[2]), qb, kb, vb)


def sdpa_hidden(seed: int, got: object) -> None:
    for (q, k, v, mask), seen in _with_cases(got, draws.attention_cases(seed)):
        name = (
            f"scaled_dot_product_attention(q {tuple(q.shape)}, k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}, mask {None if mask is None else tuple(mask.shape)})"
        )
        out, weights = checks.diagnose_attention_result(_pair(seen), q, k, v, mask, name=name)
        ref_out, ref_w = reference_attention(q, k, v, mask)
        d = q.size(-1)
        wrong_w = {
            checks.SCALE_D: reference_attention(q, k, v, mask, scale=d)[1],
            checks.NO_SCALE: reference_attention(q, k, v, mask, scale=1.0)[1],
            checks.WRONG_AXIS: reference_attention(q, k, v, mask, axis=-2)[1],
        }
        if mask is not None and not torch.isinf(mask).any():
            wrong_w[checks.MASK_AFTER] = reference_attention(q, k, v, mask, mask_after=True)[1]
        check_against_reference(weights, ref_w, f"{name}: the weights", wrong_w, atol=1e-5)
        check_against_reference(out, ref_out, f"{name}: the output", atol=1e-5)
    extras = draws.attention_extras(seed)
    check_close(got["none"], got["zero"], "the output with mask=None (should equal a zero mask)")
    _count(got["after"], 3, "input")
    check(
        all(
            isinstance(a, torch.Tensor) and torch.equal(a, b)
            for a, b in zip(got["after"], extras["plain"], strict=True)
        ),
        "scaled_dot_product_attention modified its inputs in place.",
    )
    grads = returned(got["grads"])
    _count(grads, 3, "input")
    for grad, label in zip(grads, "qkv", strict=True):
        _gradient_reaches(
            grad,
            f"No finite, non-zero gradient reaches {label}: keep the computation differentiable.",
        )


# ---------------------------------------------------------------- heads
def heads_visible(seed: int, got: object) -> None:
    assert isinstance(got, dict)
    x, heads = draws.heads_visible_inputs()
    split = checks.diagnose_split_result(got["split"], x, 2)
    check_close(split, reference_split(x, 2), "split_heads(x, 2)")
    merged = checks.diagnose_merge_result(got["merged"], heads)
    check_close(merged, x, "merge_heads(split_heads(x, 2)) (should give x back)")


def heads_hidden(seed: int, got: object) -> None:
    for case, seen in _with_cases(got, draws.head_cases(seed)):
        x, nhead, heads = case["x"], case["nhead"], case["heads"]
        b, length, width = x.shape
        split = checks.diagnose_split_result(seen["split"], x, nhead)
        check_against_reference(
            split,
            reference_split(x, nhead),
            f"split_heads(x of shape {tuple(x.shape)}, nhead={nhead})",
            {checks.HEAD_AXIS: x.reshape(b, nhead, length, width // nhead)},
        )
        merged = checks.diagnose_merge_result(seen["merged"], heads)
        check_against_reference(
            merged,
            reference_merge(heads),
            f"merge_heads(x of shape {tuple(heads.shape)})",
            {checks.MERGE_AXIS: heads.reshape(b, length, width)},
        )
        check_close(seen["round_trip"], x, "merge_heads(split_heads(x))")
        check_close(
            seen["transposed"], reference_merge(case["transposed"]), "merge_heads(x.transpose)"
        )
    x = draws.one_head_input(seed)
    check_close(got["one_head"], x.unsqueeze(1), "split_heads(x, nhead=1)")


# ---------------------------------------------------------------- multi-head self-attention
def wrong_split_attention(twin, x, nhead, mask):
    """What a module that splits heads by a plain reshape would compute."""
    b, length, width = x.shape
    q, k, v = nn.functional.linear(x, twin.in_proj_weight, twin.in_proj_bias).chunk(3, -1)
    q, k, v = (t.reshape(b, nhead, length, width // nhead) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(width // nhead)
    if mask is not None:
        scores = scores + mask
    heads = torch.softmax(scores, -1) @ v
    return twin.out_proj(heads.reshape(b, length, width))


def without_out_proj(module, nhead, x, mask):
    bare = checks.torch_attention_like(module, nhead)
    with torch.no_grad():
        bare.out_proj.weight.copy_(torch.eye(x.size(-1)))
        bare.out_proj.bias.zero_()
    return checks.torch_attention_output(bare, x, mask)


def mhsa_visible(seed: int, got: object) -> None:
    assert isinstance(got, dict)
    checks.diagnose_projection_facts(got["facts"], 8)
    got = returned(got)
    x = draws.module_visible_input(2, 5, 8, seed=1)
    checks.diagnose_output_projection_result(got["probes"], tuple(x.shape))
    reference = checks.torch_attention_like(attention_with(got["weights"], 8), nhead=2)
    with torch.no_grad():
        expected = checks.torch_attention_output(reference, x)
    check_close(got["out"], expected, "MultiHeadSelfAttention(x)")


def mhsa_hidden(seed: int, got: object) -> None:
    for case, seen in _with_cases(got, draws.mhsa_cases(seed)):
        d, h, x = case["d_model"], case["nhead"], case["x"]
        checks.diagnose_projection_facts(seen["facts"], d)
        seen = returned(seen)
        checks.diagnose_output_projection_result(seen["probes"], tuple(x.shape))
        module = attention_with(seen["weights"], d)
        twin = checks.torch_attention_like(module, h)
        _count(seen["outs"], 3, "mask")
        kinds = ("None", "causal", "random float")
        for mask, out, kind in zip(case["masks"], seen["outs"], kinds, strict=True):
            name = (
                f"MultiHeadSelfAttention(d_model={d}, nhead={h}) on x {tuple(x.shape)}, mask {kind}"
            )
            with torch.no_grad():
                expected = checks.torch_attention_output(twin, x, mask)
                mistakes = {checks.NO_OUT_PROJ: without_out_proj(module, h, x, mask)}
                if h > 1:
                    mistakes[checks.HEAD_AXIS] = wrong_split_attention(twin, x, h, mask)
            check_against_reference(out, expected, name, mistakes, atol=1e-5)
        changed, again = seen["causal"]
        check_close(
            changed[:, :-1],
            again[:, :-1],
            "outputs before the last position when only the last token changes (causal mask)",
        )
    checks.diagnose_gradients_result(returned(got["grads"])["parameters"], "MultiHeadSelfAttention")


# ---------------------------------------------------------------- layer normalisation
def norm_visible(seed: int, got: object) -> None:
    cases = draws.norm_visible_inputs()
    _count(got, len(cases), "call")
    x = cases[0][0]
    y = checks.diagnose_layer_norm_result(got[0], x)
    check_close(
        y[0, 1], torch.tensor([-1.0, -1.0, 1.0, 1.0]), "layer_norm of [0, 0, 4, 4]", atol=1e-4
    )
    check_close(
        got[1][0, 1],
        torch.tensor([-0.5, -2.0, 2.5, 5.0]),
        "layer_norm of [0, 0, 4, 4] with gamma = [1, 2, 3, 4], beta = [0.5, 0, -0.5, 1]",
        atol=1e-4,
    )


def norm_hidden(seed: int, got: object) -> None:
    assert isinstance(got, dict)
    cases = draws.norm_cases(seed)
    _count(got["cases"], len(cases) * len(draws.NORM_EPS), "case")
    seen = iter(got["cases"])
    for x, gamma, beta in cases:
        for eps in draws.NORM_EPS:
            observed = next(seen)
            check_against_reference(
                observed["out"],
                reference_norm(x, gamma, beta, eps),
                f"layer_norm(x of shape {tuple(x.shape)}, eps={eps})",
                mistaken_norms(x, gamma, beta, eps),
                atol=1e-5,
                rtol=1e-4,
            )
            after = observed["x"]
            check(
                isinstance(after, torch.Tensor) and torch.equal(after, x),
                "layer_norm modified x in place.",
            )
    check_close(
        got["constant"],
        torch.arange(4.0).expand(2, 4),
        "layer_norm of a constant row (should be beta)",
    )
    grads = returned(got["grads"])
    _count(grads, 3, "input")
    for grad, label in zip(grads, ("x", "gamma", "beta"), strict=True):
        _gradient_reaches(grad, f"layer_norm: no finite, non-zero gradient reaches {label}.")


# ---------------------------------------------------------------- the Transformer layer
def _layer_output(
    seen: dict,
    case: dict,
    masks: list,
    name: str,
) -> None:
    d, h, d_ff, norm_first, x = (
        case[key] for key in ("d_model", "nhead", "d_ff", "norm_first", "x")
    )
    checks.diagnose_layer_facts(seen["facts"], d, d_ff)
    seen = returned(seen)
    twin = checks.torch_layer_like(layer_with(seen["weights"], d, d_ff), h, d_ff, norm_first)
    _count(seen["outs"], len(masks), "mask")
    for mask, out in zip(masks, seen["outs"], strict=True):
        label = name if len(masks) == 1 else f"{name}, {'no' if mask is None else 'causal'} mask"
        with torch.no_grad():
            expected = twin(x) if mask is None else twin(x, src_mask=mask)
            mistakes = checks.layer_mistakes(twin, x, norm_first, mask)
        check_against_reference(out, expected, label, mistakes, atol=1e-5)


def layer_visible(seed: int, got: object) -> None:
    _count(got, 2, "arrangement")
    x = draws.module_visible_input(2, 5, 8, seed=2)
    for norm_first, seen in zip((False, True), got, strict=True):
        case = {"d_model": 8, "nhead": 2, "d_ff": 16, "norm_first": norm_first, "x": x}
        _layer_output(seen, case, [None], f"TransformerLayer(8, 2, 16, norm_first={norm_first})(x)")


def layer_hidden(seed: int, got: object) -> None:
    for case, seen in _with_cases(got, draws.layer_cases(seed)):
        x = case["x"]
        name = (
            f"TransformerLayer(d_model={case['d_model']}, nhead={case['nhead']}, "
            f"d_ff={case['d_ff']}, norm_first={case['norm_first']}) on x {tuple(x.shape)}"
        )
        _layer_output(seen, case, [None, core.future_mask(x.shape[1])], name)
    _count(got["grads"], 2, "arrangement")
    for norm_first, grads in zip((False, True), got["grads"], strict=True):
        checks.diagnose_gradients_result(
            returned(grads)["parameters"], f"TransformerLayer(norm_first={norm_first})"
        )


# ---------------------------------------------------------------- cross-attention
def cross_visible(seed: int, got: object) -> None:
    assert isinstance(got, dict)
    checks.diagnose_projection_facts(got["facts"], 8)
    got = returned(got)
    x = draws.module_visible_input(2, 3, 8, seed=5)
    memory = draws.module_visible_input(2, 5, 8, seed=6)
    with torch.no_grad():
        checks.diagnose_cross_attention_result(
            got["out"], attention_with(got["weights"], 8), 2, x, memory
        )


def cross_hidden(seed: int, got: object) -> None:
    for case, seen in _with_cases(got, draws.cross_cases(seed)):
        d, h, x, memory = case["d_model"], case["nhead"], case["x"], case["memory"]
        checks.diagnose_projection_facts(seen["facts"], d)
        seen = returned(seen)
        module = attention_with(seen["weights"], d)
        _count(seen["outs"], 3, "mask")
        for mask, out, changed in zip(case["masks"], seen["outs"], seen["changed"], strict=True):
            name = (
                f"MultiHeadCrossAttention(d_model={d}, nhead={h}) on x {tuple(x.shape)}, "
                f"memory {tuple(memory.shape)}, mask {'None' if mask is None else 'given'}"
            )
            with torch.no_grad():
                out = checks.diagnose_cross_attention_result(out, module, h, x, memory, mask, name)
            check_close(
                changed[:, 1:],
                out[:, 1:],
                f"{name}: the outputs at positions 1.. when only x[:, 0] changes",
            )
    grads = returned(got["grads"])
    checks.diagnose_gradients_result(grads["parameters"], "MultiHeadCrossAttention")
    _count(grads["inputs"], 2, "input")
    for grad, label in zip(grads["inputs"], ("x", "memory"), strict=True):
        _gradient_reaches(
            grad, f"MultiHeadCrossAttention: no finite, non-zero gradient reaches {label}."
        )
