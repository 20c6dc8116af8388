"""B's checks of layer normalisation, of the Transformer layer (its parts, post-norm and
pre-norm against PyTorch's ``nn.TransformerEncoderLayer``) and of gradients.
"""

from __future__ import annotations

import torch
from torch import nn

from course.b_attention.attention_checks import (
    LAYER_PARTS,
    LN_AXIS,
    LN_UNBIASED,
    RESIDUAL_AFTER_NORM,
)
from course.b_attention.projection_checks import (
    RANDOM_VALUES,
    diagnose_projection_facts,
    linear_facts,
    projection_facts,
    torch_attention_like,
)
from course.testcells import (
    check,
    check_tensor,
    expected_got,
    fail,
    randomise_parameters,
)


# ---------------------------------------------------------------- layer normalisation
def diagnose_layer_norm_result(got: object, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Check what layer_norm(x, gamma, beta) returned; return it. With gamma = 1 and beta = 0,
    each row (last axis) must have mean 0 and biased variance var / (var + eps) of the input
    row, i.e. about 1."""
    out = check_tensor(got, "layer_norm(x, gamma, beta)", shape=tuple(x.shape))
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
    """The submodules the tests copy weights through: self_attn, linear1/2, norm1/2; then every
    parameter gets its own random values (norm1 and norm2 are equal at initialisation, so a
    layer that used one for the other would pass a comparison made with those)."""
    diagnose_layer_facts(layer_facts(layer), d_model, d_ff)
    randomise_parameters(layer, RANDOM_VALUES)


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
            swapped = x + sa(n2(x))
            ff_first = x + ff(n2(x))
            return {
                "norm_first=True should normalise the input of each sublayer (pre-norm); your "
                "layer is post-norm.": n2(ff(h) + h),
                NORMS_SWAPPED: swapped + ff(n1(swapped)),
                FF_FIRST: ff_first + sa(n1(ff_first)),
            }
        h = n1(sa(x)) + x
        after_norm = n2(ff(h)) + h
        h = x + sa(n1(x))
        pre = h + ff(n2(h))
        swapped = n2(sa(x) + x)
        no_residual = n1(sa(x))
        ff_first = n2(ff(x) + x)
    return {
        f"{RESIDUAL_AFTER_NORM}: post-norm is LN(SA(X) + X), not LN(SA(X)) + X.": after_norm,
        "norm_first=False is post-norm; your layer normalises first (pre-norm).": pre,
        NORMS_SWAPPED: n1(ff(swapped) + swapped),
        NO_RESIDUAL: n2(ff(no_residual) + no_residual),
        FF_FIRST: n1(sa(ff_first) + ff_first),
    }


NORMS_SWAPPED = (
    "norm1 and norm2 are swapped: norm1 belongs to the self-attention sublayer, norm2 to the "
    "feed-forward one (nn.TransformerEncoderLayer's names)."
)
NO_RESIDUAL = (
    "the self-attention sublayer has no residual connection: O1 = LN1(SA(X) + X), the input "
    "added back before the norm."
)
FF_FIRST = (
    "the feed-forward sublayer runs before the self-attention: first the tokens exchange "
    "information (SA, with norm1), then each is transformed on its own (FFN, with norm2)."
)


def diagnose_gradients(module: nn.Module, name: str) -> None:
    """After a backward pass, every parameter has a finite, non-zero gradient."""
    diagnose_gradients_result(parameter_gradients(module), name)


def parameter_gradients(module: nn.Module) -> dict[str, torch.Tensor | None]:
    """The gradient of every named parameter of ``module`` (None where it has none)."""
    return {pname: parameter.grad for pname, parameter in module.named_parameters()}


def diagnose_gradients_result(got: dict, name: str) -> None:
    """:func:`diagnose_gradients` on the gradients :func:`parameter_gradients` reads."""
    for pname, grad in got.items():
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
