"""Checks for assignment B (attention and the Transformer layer): they name the usual mistakes.

The functions take the student's outputs (or modules) and raise :class:`GradingError` with a
message that names what is wrong. They check properties stated in the syllabus (weights are
probabilities over the keys, masked keys get zero weight, the output projection is used, rows
are normalised...) and compare with PyTorch's own modules given the same weights; none of them
computes a graded answer.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from course.testcells import (
    GradingError,
    check,
    check_against_reference,
    check_tensor,
    expected_got,
    fail,
    same_values,
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
def diagnose_attention(
    result: object,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    name: str = "scaled_dot_product_attention",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the (output, weights) of an attention call by their properties; return them.

    Weights must be probabilities over the keys (last axis), exactly 0 where the mask is -inf,
    the output must be ``weights @ v``, and the softmax temperature implied by the weights must
    be sqrt(d).
    """
    check(
        isinstance(result, tuple) and len(result) == 2,
        expected_got(
            f"{name} should return a tuple (output, weights).",
            "(output, weights)",
            type(result).__name__,
        ),
    )
    assert isinstance(result, tuple)
    out, weights = result
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
    blocked = torch.isinf(m)
    if bool(torch.isinf(w).any()) or bool((w < -1e-6).any()):
        if mask is not None and _probabilities_plus_mask(w, m, blocked):
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
    row_sums = w.sum(dim=-1)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-4):
        if mask is not None and not bool(blocked.any()):
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
    if bool(blocked.any()):
        leaked = w[blocked].abs().max().item()
        check(
            leaked == 0.0,
            f"{name}: keys where the mask is -inf get a weight of {leaked:.3g}; it should be "
            "exactly 0 (add the mask to the scores before the softmax).",
        )
    _diagnose_temperature(q, k, w, m, d, name)
    expected_out = w @ v.detach().to(torch.float64)
    check(
        torch.allclose(out.detach().to(torch.float64), expected_out, atol=1e-4, rtol=1e-4),
        f"{name}: the output is not weights @ v (the weighted average of the values).",
    )
    return out, weights


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
def diagnose_split(out: object, x: torch.Tensor, nhead: int) -> torch.Tensor:
    """Check the shape of split_heads(x, nhead) and name the reshape-only mistake."""
    b, length, width = x.shape
    name = f"split_heads(x of shape {tuple(x.shape)}, nhead={nhead})"
    out = check_tensor(out, name, shape=(b, nhead, length, width // nhead))
    if length > 1 and nhead > 1 and torch.equal(out, x.reshape(b, nhead, length, width // nhead)):
        fail(
            f"{name}: {HEAD_AXIS}. x.reshape(B, H, L, D/H) cuts the flat memory into H blocks, "
            "so one 'head' gets the features of several positions. Split the last axis first, "
            "(B, L, D) -> (B, L, H, D/H), then move the head axis: transpose(1, 2)."
        )
    return out


def diagnose_merge(out: object, heads: torch.Tensor) -> torch.Tensor:
    """Check the shape of merge_heads(heads) and name the reshape-only mistake."""
    b, nhead, length, dh = heads.shape
    name = f"merge_heads(x of shape {tuple(heads.shape)})"
    out = check_tensor(out, name, shape=(b, length, nhead * dh))
    if length > 1 and nhead > 1 and torch.equal(out, heads.reshape(b, length, nhead * dh)):
        fail(
            f"{name}: {MERGE_AXIS}. Move the head axis next to the per-head features first, "
            "(B, H, L, D/H) -> (B, L, H, D/H) with transpose(1, 2), then reshape to (B, L, D)."
        )
    return out


# ---------------------------------------------------------------- multi-head self-attention
def diagnose_projections(module: nn.Module, d_model: int) -> None:
    """q_proj, k_proj, v_proj, out_proj must be nn.Linear(d_model, d_model) (with bias)."""
    diagnose_projection_facts(projection_facts(module), d_model)


def linear_facts(layer: object) -> dict[str, object]:
    """What the checks read of a module that should be an nn.Linear: its type, sizes and bias."""
    linear = isinstance(layer, nn.Linear)
    return {
        "linear": linear,
        "type": type(layer).__name__,
        "in": layer.in_features if linear else -1,
        "out": layer.out_features if linear else -1,
        "bias": linear and layer.bias is not None,
    }


def projection_facts(module: nn.Module) -> dict[str, dict[str, object]]:
    """:func:`linear_facts` of the four projections of an attention module."""
    return {part: linear_facts(getattr(module, part, None)) for part in PROJECTIONS}


def diagnose_projection_facts(facts: dict, d_model: int) -> None:
    """:func:`diagnose_projections` on the facts :func:`projection_facts` reads."""
    for part in PROJECTIONS:
        layer = facts[part]
        check(
            layer["linear"] is True,
            f"MultiHeadSelfAttention should have an attribute {part} = nn.Linear(d_model, "
            f"d_model); got {layer['type']}.",
        )
        check(
            (layer["in"], layer["out"]) == (d_model, d_model) and layer["bias"] is True,
            expected_got(
                f"MultiHeadSelfAttention.{part} has the wrong size (one d x d matrix serves all "
                "heads).",
                f"nn.Linear({d_model}, {d_model}, bias=True)",
                f"nn.Linear({layer['in']}, {layer['out']}, bias={layer['bias']})",
            ),
        )


def diagnose_output_projection(module: nn.Module, x: torch.Tensor) -> None:
    """With out_proj set to 0 x + c, every output must be c: the projection is the last step.

    The missing projection is named only when out_proj has no effect at all on the output.
    """
    diagnose_output_projection_outputs(output_projection_outputs(module, x), tuple(x.shape))


def output_projection_outputs(module: nn.Module, x: torch.Tensor) -> list[object]:
    """The module's outputs on ``x`` with out_proj set to 0 x + c, for the two constants c of
    :func:`projection_constants` (each on a copy of the module, in eval mode)."""
    outputs = []
    for constant in projection_constants(module.out_proj.out_features):
        probe = copy.deepcopy(module).eval()
        with torch.no_grad():
            probe.out_proj.weight.zero_()
            probe.out_proj.bias.copy_(constant.expand_as(probe.out_proj.bias))
            outputs.append(probe(x))
    return outputs


def projection_constants(width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two biases c that :func:`output_projection_outputs` gives out_proj."""
    return torch.linspace(-1.0, 1.0, width), torch.tensor(3.0)


def diagnose_output_projection_outputs(outputs: list, shape: tuple[int, ...]) -> None:
    """:func:`diagnose_output_projection` on the outputs :func:`output_projection_outputs`
    returns for an input of ``shape``."""
    seen = []
    for out, constant in zip(outputs, projection_constants(shape[-1]), strict=True):
        out = check_tensor(out, "MultiHeadSelfAttention(x)", shape=shape)
        seen.append((out.detach().float(), constant.expand(out.shape[-1])))
    (first, constant), (second, _) = seen
    if torch.allclose(first, constant.expand_as(first), atol=1e-6):
        return
    if torch.allclose(first, second, atol=1e-6):
        fail(
            f"MultiHeadSelfAttention: {NO_OUT_PROJ}. Changing out_proj did not change the "
            "output: after merging the heads, apply self.out_proj (it mixes what the heads "
            "found)."
        )
    fail(
        "MultiHeadSelfAttention: out_proj is used, but it is not the last step. With out_proj "
        "set to 0 x + c every output should be exactly c; yours is not. Return "
        "self.out_proj(merge_heads(...)) and nothing after it."
    )


def torch_attention_like(module: nn.Module, nhead: int) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention (batch_first) holding the weights of the student's module."""
    d_model = module.q_proj.in_features
    twin = nn.MultiheadAttention(d_model, nhead, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(
            torch.cat([module.q_proj.weight, module.k_proj.weight, module.v_proj.weight])
        )
        twin.in_proj_bias.copy_(
            torch.cat([module.q_proj.bias, module.k_proj.bias, module.v_proj.bias])
        )
        twin.out_proj.weight.copy_(module.out_proj.weight)
        twin.out_proj.bias.copy_(module.out_proj.bias)
    return twin.eval()


def torch_attention_output(
    twin: nn.MultiheadAttention, x: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """PyTorch's self-attention output for x (B, L, D) with an optional additive float mask."""
    return twin(x, x, x, attn_mask=mask, need_weights=False)[0]


# ---------------------------------------------------------------- cross-attention
def check_cross_attention(
    out: object,
    module: nn.Module,
    nhead: int,
    x: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor | None = None,
    name: str = "MultiHeadCrossAttention(x, memory)",
) -> torch.Tensor:
    """Compare ``out`` with ``nn.MultiheadAttention(x, memory, memory)`` holding the weights of
    ``module``; name the mistakes whose output it equals. Returns ``out``.

    A mistake is named only when the mistaken code could run on these inputs and its output
    (computed by PyTorch's module, the inputs moved to other roles) equals ``out``.
    """
    twin = torch_attention_like(module, nhead)
    bare = torch_attention_like(module, nhead)
    with torch.no_grad():
        bare.out_proj.weight.copy_(torch.eye(bare.out_proj.in_features))
        bare.out_proj.bias.zero_()

    def run(attn: nn.MultiheadAttention, q: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor]):
        return attn(q, kv[0], kv[1], attn_mask=mask, need_weights=False)[0]

    b, lq, d = x.shape
    lk = memory.shape[1]
    square = lq == lk  # the mask fits every arrangement of the inputs
    with torch.no_grad():
        expected = run(twin, x, (memory, memory))
        if (
            isinstance(out, torch.Tensor)
            and tuple(out.shape) == (b, lk, d)
            and not square
            and any(
                same_values(out, run(twin, memory, kv), 1e-5, 1e-5)
                for kv in ((x, x), (memory, memory))
                if mask is None
            )
        ):
            fail(f"{name}: {Q_FROM_MEMORY}.")
        mistakes = {}
        if mask is None or square:
            mistakes[KV_FROM_DECODER] = run(twin, x, (x, x))
        if square:
            mistakes[Q_FROM_MEMORY] = run(twin, memory, (x, x))
            mistakes[Q_FROM_MEMORY + " (and so do the keys and values)"] = run(
                twin, memory, (memory, memory)
            )
            mistakes[K_FROM_DECODER] = run(twin, x, (x, memory))
            mistakes[V_FROM_DECODER] = run(twin, x, (memory, x))
        mistakes[NO_OUT_PROJ] = run(bare, x, (memory, memory))
    if isinstance(out, torch.Tensor) and tuple(out.shape) != (b, lq, d):
        fail(
            expected_got(
                f"{name} has the wrong shape: one output per decoder position (the queries "
                "come from x).",
                (b, lq, d),
                tuple(out.shape),
            )
        )
    check_against_reference(out, expected, name, mistakes, atol=1e-5)
    assert isinstance(out, torch.Tensor)
    return out


@contextmanager
def explain_parts(
    sdpa: Callable | None = None,
    split: Callable | None = None,
    merge: Callable | None = None,
    self_attn: nn.Module | None = None,
) -> Iterator[None]:
    """On a failed check, add what is wrong in the parts the code under test may rely on."""
    try:
        yield
    except GradingError as error:
        notes = _part_problems(sdpa, split, merge, self_attn)
        if not notes:
            raise
        joined = "\n".join(f"- {note}" for note in notes)
        raise GradingError(
            f"{error}\nThe parts it may be built from have known mistakes; fix them first:\n"
            f"{joined}"
        ) from None


def _part_problems(
    sdpa: Callable | None,
    split: Callable | None,
    merge: Callable | None,
    self_attn: nn.Module | None,
) -> list[str]:
    gen = torch.Generator().manual_seed(0)
    notes = []
    trials: list[tuple[str, Callable[[], None]]] = []
    if sdpa is not None:
        q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
        causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
        for mask in (None, causal):
            trials.append(
                (
                    "scaled_dot_product_attention",
                    lambda m=mask: diagnose_attention(sdpa(q, k, v, m), q, k, v, m),
                )
            )
    if split is not None:
        numbered = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
        trials.append(("split_heads", lambda: diagnose_split(split(numbered, 2), numbered, 2)))
    if merge is not None:
        heads = torch.arange(2 * 2 * 3 * 4, dtype=torch.float32).reshape(2, 2, 3, 4)
        trials.append(("merge_heads", lambda: diagnose_merge(merge(heads), heads)))
    if self_attn is not None:
        tokens = torch.randn(2, 3, self_attn.q_proj.in_features, generator=gen)
        trials.append(("self_attn", lambda: diagnose_output_projection(self_attn, tokens)))
    seen = set()
    for part, trial in trials:
        if part in seen:
            continue
        try:
            trial()
        except GradingError as error:
            notes.append(str(error).splitlines()[0])
            seen.add(part)
        except Exception as error:  # the part itself crashes: say so, briefly
            notes.append(f"{part} raised {type(error).__name__}: {error}")
            seen.add(part)
    return notes


# ---------------------------------------------------------------- layer normalisation
def diagnose_layer_norm(out: object, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """With gamma = 1 and beta = 0, each row (last axis) must have mean 0 and biased variance
    var / (var + eps) of the input row, i.e. about 1."""
    out = check_tensor(out, "layer_norm(x, gamma, beta)", shape=tuple(x.shape))
    y = out.detach().to(torch.float64)
    x64 = x.to(torch.float64)
    width = x.shape[-1]
    mean_last = y.mean(dim=-1)
    var_x = x64.var(dim=-1, unbiased=False)
    target = var_x / (var_x + eps)
    second = (y * y).mean(dim=-1)
    if not torch.allclose(mean_last, torch.zeros_like(mean_last), atol=1e-4):
        if x.dim() >= 2 and torch.allclose(y.mean(dim=-2), torch.zeros(()).double(), atol=1e-4):
            fail(
                f"{LN_AXIS}: your rows do not have mean 0, but your columns do (you normalised "
                "over dim=-2, the sequence axis). Each token is normalised on its own, over its "
                "D features: the last axis (dim=-1)."
            )
        fail(
            "layer_norm: after layer_norm with gamma = 1 and beta = 0 every row (the last axis, "
            "one token's D features) should have mean 0; yours do not. Subtract the mean over "
            "dim=-1."
        )
    unbiased_target = var_x * width / (width - 1)
    unbiased_target = var_x / (unbiased_target + eps)
    if width > 1 and torch.allclose(second, unbiased_target, rtol=1e-3, atol=1e-5):
        fail(
            f"{LN_UNBIASED} (dividing by D - 1, torch.var's default). LayerNorm uses the biased "
            "variance, the plain mean of the squared deviations (divide by D): "
            "x.var(dim=-1, unbiased=False) or ((x - mean) ** 2).mean(dim=-1)."
        )
    check(
        torch.allclose(second, target, rtol=1e-3, atol=1e-5),
        expected_got(
            "layer_norm: with gamma = 1 and beta = 0 each row should have variance "
            "var / (var + eps), about 1.",
            round(float(target.flatten()[0]), 5),
            round(float(second.flatten()[0]), 5),
            "y = (x - mean) / sqrt(var + eps) * gamma + beta, mean and var over the last axis.",
        ),
    )
    return out


# ---------------------------------------------------------------- the Transformer layer
def diagnose_layer_parts(layer: nn.Module, d_model: int, d_ff: int) -> None:
    """The submodules the tests copy weights through: self_attn, linear1/2, norm1/2."""
    diagnose_layer_facts(layer_facts(layer), d_model, d_ff)


def layer_facts(layer: nn.Module) -> dict[str, object]:
    """What :func:`diagnose_layer_parts` reads of a layer: which parts it has, the facts of its
    linear layers and projections, the shapes of its norms' weight and bias (None: not a
    tensor)."""

    def shape(value: object) -> list[int] | None:
        return list(value.shape) if isinstance(value, torch.Tensor) else None

    parts = [part for part in LAYER_PARTS if hasattr(layer, part)]
    if len(parts) < len(LAYER_PARTS):
        return {"parts": parts}
    facts: dict[str, object] = {"parts": parts}
    for part in ("linear1", "linear2"):
        facts[part] = linear_facts(getattr(layer, part))
    for part in ("norm1", "norm2"):
        module = getattr(layer, part)
        facts[part] = {
            "weight": shape(getattr(module, "weight", None)),
            "bias": shape(getattr(module, "bias", None)),
        }
    facts["self_attn"] = projection_facts(layer.self_attn)
    return facts


def diagnose_layer_facts(facts: dict, d_model: int, d_ff: int) -> None:
    """:func:`diagnose_layer_parts` on the facts :func:`layer_facts` reads."""
    for part in LAYER_PARTS:
        check(
            part in facts["parts"],
            f"TransformerLayer should have a submodule named {part} "
            f"(expected: {', '.join(LAYER_PARTS)}).",
        )
    sizes = {
        "linear1": (d_model, d_ff),
        "linear2": (d_ff, d_model),
    }
    for part, (n_in, n_out) in sizes.items():
        module = facts[part]
        check(
            module["linear"] is True and (module["in"], module["out"]) == (n_in, n_out),
            f"TransformerLayer.{part} should be nn.Linear({n_in}, {n_out}).",
        )
    for part in ("norm1", "norm2"):
        norm = facts[part]
        check(
            norm["weight"] == [d_model] and norm["bias"] == [d_model],
            f"TransformerLayer.{part} should be nn.LayerNorm({d_model}) (weight and bias of "
            f"shape ({d_model},)).",
        )
    diagnose_projection_facts(facts["self_attn"], d_model)


def torch_layer_like(
    layer: nn.Module, nhead: int, d_ff: int, norm_first: bool
) -> nn.TransformerEncoderLayer:
    """An nn.TransformerEncoderLayer (dropout 0, ReLU, batch_first) with the student's weights."""
    d_model = layer.linear1.in_features
    twin = nn.TransformerEncoderLayer(
        d_model,
        nhead,
        d_ff,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
    )
    with torch.no_grad():
        twin.self_attn = torch_attention_like(layer.self_attn, nhead)
        for part in ("linear1", "linear2", "norm1", "norm2"):
            getattr(twin, part).weight.copy_(getattr(layer, part).weight)
            getattr(twin, part).bias.copy_(getattr(layer, part).bias)
    return twin.eval()


def layer_mistakes(
    twin: nn.TransformerEncoderLayer,
    x: torch.Tensor,
    norm_first: bool,
    mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The outputs of the usual arrangement mistakes, built from PyTorch's submodules (same
    weights as the student's layer): {message naming the mistake: output}."""

    def sa(h: torch.Tensor) -> torch.Tensor:
        return twin.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]

    def ff(h: torch.Tensor) -> torch.Tensor:
        return twin.linear2(torch.relu(twin.linear1(h)))

    n1, n2 = twin.norm1, twin.norm2
    with torch.no_grad():
        if norm_first:
            h = n1(sa(x) + x)
            return {
                "norm_first=True should normalise the input of each sublayer (pre-norm); your "
                "layer is post-norm.": n2(ff(h) + h)
            }
        h = n1(sa(x)) + x
        after_norm = n2(ff(h)) + h
        h = x + sa(n1(x))
        pre = h + ff(n2(h))
    return {
        f"{RESIDUAL_AFTER_NORM}: post-norm is LN(SA(X) + X), not LN(SA(X)) + X.": after_norm,
        "norm_first=False is post-norm; your layer normalises first (pre-norm).": pre,
    }


def check_gradients(module: nn.Module, name: str) -> None:
    """After a backward pass, every parameter has a finite, non-zero gradient."""
    diagnose_gradients(parameter_gradients(module), name)


def parameter_gradients(module: nn.Module) -> dict[str, torch.Tensor | None]:
    """The gradient of every named parameter of ``module`` (None where it has none)."""
    return {pname: parameter.grad for pname, parameter in module.named_parameters()}


def diagnose_gradients(gradients: dict, name: str) -> None:
    """:func:`check_gradients` on the gradients :func:`parameter_gradients` reads."""
    for pname, grad in gradients.items():
        check(
            grad is not None,
            f"{name}: the parameter {pname} got no gradient (it is not used in forward, or "
            "the graph was cut with .detach() / torch.no_grad()).",
        )
        assert isinstance(grad, torch.Tensor)
        check(
            bool(torch.isfinite(grad).all()),
            f"{name}: the gradient of {pname} is not finite.",
        )
        check(
            bool(grad.abs().sum() > 0),
            f"{name}: the gradient of {pname} is zero everywhere: it does not affect the output.",
        )
