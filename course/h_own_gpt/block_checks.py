"""Checks of assignment H's CausalSelfAttention and Block: they name the usual mistakes.

Each module is built under a seed, its parameters given their own random values
(:func:`course.testcells.randomise_parameters`: ``ln1`` equals ``ln2`` at initialisation), observed
(the facts the tests read of it, its weights, its outputs on given inputs) by an ``observe_*``
function, and judged from that observation by a ``judge_*`` function: the notebook's test cells
call both in the kernel, the trusted judge calls the second on what the kernel recorded.

The attention's expected output is computed from the weights it holds with PyTorch's
``F.scaled_dot_product_attention``; the block's from its weights (``F.layer_norm``, ``F.gelu``)
and the student's own attention output, so that a mistake of the attention costs the
attention's tests only. :func:`block_from` is the whole block from weights alone, which the
GPT's checks (:mod:`course.h_own_gpt.gpt_checks`) use.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course import probing
from course.probing import integer, linear_facts, returned, tril_facts
from course.testcells import (
    check,
    check_against_reference,
    check_close,
    expected_got,
    randomise_parameters,
)

# ---------------------------------------------------------------- the mistakes, named
NO_MASK = (
    "the future is not masked: position t attends to later positions. Fill the scores where "
    "tril[:, :, :T, :T] == 0 with -inf before the softmax."
)
SCALE_D = (
    "the scores are divided by sqrt(d_model); each head works in d_model / nhead dimensions, so "
    "divide by sqrt(d_model / nhead)."
)
HEAD_SPLIT = (
    "the heads are cut with a plain reshape to (B, nhead, T, D/H), which mixes positions and "
    "heads. View as (B, T, nhead, D/H), then transpose(1, 2)."
)
POST_NORM = (
    "this is a post-norm block (LayerNorm after the residual sum, as in B's TransformerLayer). "
    "H's block is pre-norm: x = x + attn(ln1(x)), then x = x + mlp(ln2(x))."
)
NORM_STREAM = (
    "the residual stream itself is normalised (x = ln1(x) + attn(ln1(x))). Only the branch's "
    "input is normalised; the stream adds the branch to the unnormalised x."
)
LN1_TWICE = (
    "the MLP's branch is normalised with ln1 (x + mlp(ln1(x))); each branch has its own "
    "LayerNorm: x = x + attn(ln1(x)), then x = x + mlp(ln2(x))."
)
RELU = "the MLP uses ReLU; GPT's MLP uses GELU (nn.GELU())."
GELU_TANH = (
    "the MLP uses GELU's tanh approximation; use the exact GELU, nn.GELU() (approximate='none')."
)
NO_SCALE = (
    "the scores are not scaled: divide q @ k^T by sqrt(d_model / nhead) before the softmax, or "
    "the softmax saturates as the heads grow wider."
)
NO_PROJ = (
    "proj is not applied: after merging the heads, return self.proj(merged) (it mixes what the "
    "heads found)."
)
LN_SWAPPED = (
    "ln1 and ln2 are swapped (x + attn(ln2(x)), then + mlp(ln1(.))): ln1 belongs to the "
    "attention's branch, ln2 to the MLP's."
)
NO_ATTN_RESIDUAL = (
    "the attention's branch has no residual connection (x = attn(ln1(x))): add it to the "
    "stream, x = x + attn(ln1(x))."
)
NO_MLP_RESIDUAL = (
    "the MLP's branch has no residual connection (x = mlp(ln2(x))): add it to the stream, "
    "x = x + mlp(ln2(x))."
)
NO_ATTN = (
    "the attention's branch is skipped: the block must first add attn(ln1(x)) to x; without "
    "it no position sees another."
)
NO_MLP = "the MLP's branch is skipped: after the attention, add mlp(ln2(x)) to x."
MLP_FIRST = (
    "the MLP's branch runs before the attention's: first x = x + attn(ln1(x)) (the tokens "
    "exchange information), then x = x + mlp(ln2(x)) (each token on its own)."
)

# ---------------------------------------------------------------- inputs drawn from a seed


def attention_cases(seed: int, hidden: bool) -> list[dict]:
    """Sizes, module seed and input of each call of CausalSelfAttention (or Block)."""
    if not hidden:
        return [probing.visible_layer_case()]
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for nhead, dropout in ((1, 0.0), (integer(gen, 2, 5), 0.0), (integer(gen, 2, 5), 0.3)):
        d = nhead * integer(gen, 2, 7)
        block = integer(gen, 4, 13)
        length = block if len(cases) == 1 else integer(gen, 2, block)
        x = torch.randn(integer(gen, 1, 4), length, d, generator=gen)
        cases.append(probing.layer_case(x, nhead, block, dropout, integer(gen, 0, 10_001)))
    return cases


# ---------------------------------------------------------------- reading a module
def module_weights(module: nn.Module, names: tuple[str, ...]) -> dict:
    """The tensors of ``module.state_dict()`` named in ``names`` (those it has), copied."""
    state = module.state_dict()
    return {name: state[name].detach().clone() for name in names if name in state}


def _change_last(x: torch.Tensor) -> torch.Tensor:
    changed = x.clone()
    changed[:, -1] = changed[:, -1].flip(-1) + 1.0
    return changed


ATTENTION_WEIGHTS = ("qkv.weight", "qkv.bias", "proj.weight", "proj.bias")
BLOCK_WEIGHTS = ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias") + tuple(
    f"mlp.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")
)
BLOCK_ALL_WEIGHTS = BLOCK_WEIGHTS + tuple(f"attn.{name}" for name in ATTENTION_WEIGHTS)


def observe_attention(cls: Callable[..., nn.Module], case: dict) -> dict:
    """Build ``cls(d_model, nhead, block_size, dropout)`` under the case's seed; observe it."""
    torch.manual_seed(case["seed"])
    module = cls(case["d_model"], case["nhead"], case["block_size"], case["dropout"])
    randomise_parameters(module, case["seed"])
    got: dict = {
        "facts": {
            "qkv": linear_facts(module, "qkv"),
            "proj": linear_facts(module, "proj"),
            "tril": tril_facts(module),
        },
        "weights": module_weights(module, ATTENTION_WEIGHTS),
    }
    module.eval()
    with torch.no_grad():
        got["out"] = module(case["x"])
        got["changed"] = module(_change_last(case["x"]))
    return got


def observe_block(cls: Callable[..., nn.Module], case: dict) -> dict:
    """Build ``cls(d_model, nhead, block_size, dropout)``; observe it and its attention."""
    torch.manual_seed(case["seed"])
    module = cls(case["d_model"], case["nhead"], case["block_size"], case["dropout"])
    randomise_parameters(module, case["seed"])  # ln1 and ln2 differ, as every bias
    mlp = getattr(module, "mlp", None)
    got: dict = {
        "facts": {
            "norms": [isinstance(getattr(module, n, None), nn.LayerNorm) for n in ("ln1", "ln2")],
            "mlp": [type(m).__name__ for m in mlp] if isinstance(mlp, nn.Sequential) else None,
            "up": linear_facts(mlp, "0") if isinstance(mlp, nn.Sequential) else {"linear": False},
        },
        "weights": module_weights(module, BLOCK_ALL_WEIGHTS),
    }
    module.eval()
    x = case["x"]
    with torch.no_grad():
        got["out"] = module(x)
        got["attn_of_norm"] = module.attn(module.ln1(x))  # what the attention gives the block
        got["attn_of_x"] = module.attn(x)
    return got


# ---------------------------------------------------------------- what the modules should give
def attention_from(
    weights: dict,
    x: torch.Tensor,
    nhead: int,
    causal: bool = True,
    scale: float | None = None,
    project: bool = True,
) -> torch.Tensor:
    """Causal self-attention with the given qkv and proj weights, by PyTorch's SDPA."""
    b, length, width = x.shape
    qkv = F.linear(x, weights["qkv.weight"], weights["qkv.bias"])
    q, k, v = qkv.view(b, length, 3, nhead, width // nhead).permute(2, 0, 3, 1, 4)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    merged = heads.transpose(1, 2).reshape(x.shape)
    if not project:
        return merged
    return F.linear(merged, weights["proj.weight"], weights["proj.bias"])


def _reshape_heads(weights: dict, x: torch.Tensor, nhead: int) -> torch.Tensor:
    b, length, width = x.shape
    q, k, v = F.linear(x, weights["qkv.weight"], weights["qkv.bias"]).chunk(3, dim=-1)
    q, k, v = (t.reshape(b, nhead, length, width // nhead) for t in (q, k, v))
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(heads.reshape(x.shape), weights["proj.weight"], weights["proj.bias"])


def norm_from(weights: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    """The LayerNorm ``name`` (its weight and bias in ``weights``) applied to x."""
    return F.layer_norm(x, x.shape[-1:], weights[f"{name}.weight"], weights[f"{name}.bias"])


def _mlp(weights: dict, x: torch.Tensor, act: Callable[[torch.Tensor], torch.Tensor] = F.gelu):
    hidden = act(F.linear(x, weights["mlp.0.weight"], weights["mlp.0.bias"]))
    return F.linear(hidden, weights["mlp.2.weight"], weights["mlp.2.bias"])


def part(weights: dict, prefix: str) -> dict:
    """The tensors of ``weights`` under ``prefix`` (``"attn."``), named without it."""
    inside = [name for name in weights if name.startswith(prefix)]
    return {name.removeprefix(prefix): weights[name] for name in inside}


def block_from(weights: dict, x: torch.Tensor, nhead: int) -> torch.Tensor:
    """H's pre-norm block from its weights alone (``ln1.weight``, ``attn.qkv.weight``...)."""
    x = x + attention_from(part(weights, "attn."), norm_from(weights, "ln1", x), nhead)
    return x + _mlp(weights, norm_from(weights, "ln2", x))


# ---------------------------------------------------------------- judging the observations
def observed(got: object, name: str) -> dict:
    """The observation of a module (a dict); fails, naming ``name``, when building it raised."""
    got = returned(got, name)
    check(isinstance(got, dict), f"no observation of {name}")
    assert isinstance(got, dict)
    return got


def _linear_ok(facts: dict, owner: str, part: str, n_in: int, n_out: int) -> None:
    check(
        facts.get("linear") is True,
        f"{owner} should have {part} = nn.Linear({n_in}, {n_out}); got {facts.get('type')}.",
    )
    check(
        (facts["in"], facts["out"]) == (n_in, n_out),
        expected_got(
            f"{owner}.{part} has the wrong size.",
            f"nn.Linear({n_in}, {n_out})",
            f"nn.Linear({facts['in']}, {facts['out']})",
        ),
    )


def _attention_name(case: dict, what: str) -> str:
    return (
        f"{what}(d_model={case['d_model']}, nhead={case['nhead']}, block_size="
        f"{case['block_size']}, dropout={case['dropout']}) on x {tuple(case['x'].shape)}"
    )


def judge_attention(got: object, case: dict) -> None:
    """The facts (qkv, proj, the tril buffer) and the outputs of CausalSelfAttention."""
    name = _attention_name(case, "CausalSelfAttention")
    got = observed(got, name)
    d, nhead, block = case["d_model"], case["nhead"], case["block_size"]
    facts = got["facts"]
    _linear_ok(facts["qkv"], "CausalSelfAttention", "qkv", d, 3 * d)
    _linear_ok(facts["proj"], "CausalSelfAttention", "proj", d, d)
    tril = facts["tril"]
    check(
        not tril["parameter"],
        "CausalSelfAttention.tril is an nn.Parameter: the optimizer would train the mask. "
        "Register it with self.register_buffer('tril', ...).",
    )
    check(
        tril["buffer"],
        "CausalSelfAttention has no buffer named tril. Register the mask with "
        "self.register_buffer('tril', ...): a plain attribute does not follow .to(device) "
        "and is not in state_dict().",
    )
    value = tril["value"]
    expected = torch.tril(torch.ones(block, block)).view(1, 1, block, block)
    check(
        isinstance(value, torch.Tensor) and tuple(value.shape) == (1, 1, block, block),
        expected_got(
            "the tril buffer has the wrong shape (it is broadcast over batch and heads).",
            (1, 1, block, block),
            tuple(value.shape) if isinstance(value, torch.Tensor) else value,
        ),
    )
    check_close(value, expected, "the tril buffer (ones on and below the diagonal)")
    x, weights = case["x"], got["weights"]
    with torch.no_grad():
        reference = attention_from(weights, x, nhead)
        mistakes = {
            NO_MASK: attention_from(weights, x, nhead, causal=False),
            SCALE_D: attention_from(weights, x, nhead, scale=1 / math.sqrt(d)),
            NO_SCALE: attention_from(weights, x, nhead, scale=1.0),
            NO_PROJ: attention_from(weights, x, nhead, project=False),
        }
        if nhead > 1:
            mistakes[HEAD_SPLIT] = _reshape_heads(weights, x, nhead)
    check_against_reference(got["out"], reference, name, mistakes, atol=1e-5)
    check_close(
        got["changed"][:, :-1],
        got["out"][:, :-1],
        f"{name}: the outputs before the last position when only the last position changes",
        hint=NO_MASK,
    )


def judge_block(got: object, case: dict) -> None:
    """The parts and the output of Block, from the student's own attention output."""
    name = _attention_name(case, "Block")
    got = observed(got, name)
    d = case["d_model"]
    facts = got["facts"]
    check(all(facts["norms"]), "Block should have ln1 and ln2, each an nn.LayerNorm(d_model).")
    check(
        facts["mlp"] is not None and len(facts["mlp"]) == 4,
        expected_got(
            "Block.mlp should be nn.Sequential(Linear, GELU, Linear, Dropout).",
            ["Linear", "GELU", "Linear", "Dropout"],
            facts["mlp"],
        ),
    )
    _linear_ok(facts["up"], "Block.mlp", "0", d, 4 * d)
    weights, x = got["weights"], case["x"]
    missing = [n for n in BLOCK_WEIGHTS if n not in weights]
    check(not missing, f"Block has no {missing}: keep the names ln1, ln2 and mlp[0], mlp[2].")
    a = got["attn_of_norm"]
    with torch.no_grad():
        h = x + a
        reference = h + _mlp(weights, norm_from(weights, "ln2", h))
        mistakes = _block_mistakes(weights, x, a, got["attn_of_x"], case["nhead"])
    check_against_reference(got["out"], reference, name, mistakes, atol=1e-5)


def _block_mistakes(
    weights: dict, x: torch.Tensor, a: torch.Tensor, a_of_x: torch.Tensor, nhead: int
) -> dict[str, torch.Tensor]:
    """What each named mistake of Block gives, from the weights and the student's attention
    outputs ``a`` (on ln1(x)) and ``a_of_x`` (on x); the mistakes that call the attention on
    other inputs use the reference attention on its weights (named only when it is right)."""
    h = x + a
    n2 = norm_from(weights, "ln2", h)
    post = norm_from(weights, "ln1", x + a_of_x)
    stream = norm_from(weights, "ln2", norm_from(weights, "ln1", x) + a)
    mistakes = {
        POST_NORM: norm_from(weights, "ln2", post + _mlp(weights, post)),
        NORM_STREAM: stream + _mlp(weights, stream),
        LN1_TWICE: h + _mlp(weights, norm_from(weights, "ln1", h)),
        RELU: h + _mlp(weights, n2, F.relu),
        GELU_TANH: h + _mlp(weights, n2, lambda t: F.gelu(t, approximate="tanh")),
        NO_ATTN_RESIDUAL: a + _mlp(weights, norm_from(weights, "ln2", a)),
        NO_MLP_RESIDUAL: _mlp(weights, n2),
        NO_MLP: h,
        NO_ATTN: x + _mlp(weights, norm_from(weights, "ln2", x)),
    }
    attn = part(weights, "attn.")
    if all(name in attn for name in ATTENTION_WEIGHTS):
        swapped = x + attention_from(attn, norm_from(weights, "ln2", x), nhead)
        mistakes[LN_SWAPPED] = swapped + _mlp(weights, norm_from(weights, "ln1", swapped))
        first = x + _mlp(weights, norm_from(weights, "ln2", x))
        mistakes[MLP_FIRST] = first + attention_from(attn, norm_from(weights, "ln1", first), nhead)
    return mistakes


# ---------------------------------------------------------------- the test cells' entry points
def diagnose_attention(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge CausalSelfAttention on each case (a test cell)."""
    for case in cases:
        judge_attention(observe_attention(cls, case), case)


def diagnose_block(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge Block on each case (a test cell)."""
    for case in cases:
        judge_block(observe_block(cls, case), case)
