"""Checks for assignment H's three modules: they name the usual mistakes.

Each module is built under a seed, observed (the facts the tests read of it, its weights, its
outputs on given inputs) by an ``observe_*`` function, and judged from that observation by a
``judge_*`` function: the notebook's test cells call both in the kernel, the trusted judge calls
the second on what the kernel recorded. The expected outputs are computed from the weights the
student's module holds, with PyTorch's own operations (``F.scaled_dot_product_attention``,
``F.layer_norm``, ``F.gelu``), as assignment B's checks compare with ``nn.MultiheadAttention``.

Each module is judged on its own: the block's check feeds the student's own attention output
into the expected computation, and the GPT's values are checked with no block (``nlayers=0``),
so one mistake costs the tests of one exercise. Every parameter gets its own random values
first (``ln1`` equals ``ln2`` at initialisation); the GPT's initial spreads are read before, for
:mod:`course.h_own_gpt.init_checks`. The recipe, the training step and the tokens: the modules
``recipe_checks``, ``step_checks`` and ``token_checks``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course.h_own_gpt.init_checks import (  # noqa: F401 - the messages, re-exported
    BIAS_NOT_ZERO,
    NO_INIT,
    NO_RESIDUAL_SCALING,
    initial_spreads,
    judge_initialisation,
)
from course.probing import integer, returned
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
NO_LN_F = "there is no final LayerNorm: apply ln_f to the last block's output before the head."
EMB_SCALED = (
    "the token embedding is multiplied by sqrt(d_model) (D's habit); GPT adds the token and "
    "position embeddings as they are."
)
LOSS_SHIFTED = (
    "the loss shifts the targets inside the model (logits[:, :-1] against targets[:, 1:]). The "
    "data step already shifted them: compare the logits at every position with targets at the "
    "same position."
)


# ---------------------------------------------------------------- inputs drawn from a seed


def attention_cases(seed: int, hidden: bool) -> list[dict]:
    """Sizes, module seed and input of each call of CausalSelfAttention (or Block)."""
    if not hidden:
        x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
        return [{"d_model": 8, "nhead": 2, "block_size": 8, "dropout": 0.0, "seed": 0, "x": x}]
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for nhead, dropout in ((1, 0.0), (integer(gen, 2, 5), 0.0), (integer(gen, 2, 5), 0.3)):
        d = nhead * integer(gen, 2, 7)
        block = integer(gen, 4, 13)
        length = block if len(cases) == 1 else integer(gen, 2, block)
        x = torch.randn(integer(gen, 1, 4), length, d, generator=gen)
        cases.append(
            {
                "d_model": d,
                "nhead": nhead,
                "block_size": block,
                "dropout": dropout,
                "seed": integer(gen, 0, 10_001),
                "x": x,
            }
        )
    return cases


def gpt_cases(seed: int, hidden: bool) -> list[dict]:
    """Sizes, module seed, token ids and targets of each GPT checked (nlayers 0 and more, and
    one wide GPT whose initial spreads are measured precisely)."""
    gen = torch.Generator().manual_seed(seed if hidden else 3)
    sizes = [(11, 8, 2, 0, 6), (13, 8, 2, 2, 6), (64, 32, 2, 2, 16)]
    if hidden:
        sizes = []
        for nlayers in (0, integer(gen, 1, 4)):
            nhead = integer(gen, 1, 4)
            sizes.append(
                (
                    integer(gen, 5, 41),
                    nhead * integer(gen, 2, 6),
                    nhead,
                    nlayers,
                    integer(gen, 4, 11),
                )
            )
        # wide enough (D * D >= 1024) for the initial spreads to tell 0.02 from the scaled std
        nhead = integer(gen, 1, 5)
        width = nhead * -(-integer(gen, 32, 49) // nhead)
        sizes.append((integer(gen, 40, 101), width, nhead, integer(gen, 1, 4), integer(gen, 8, 17)))
    cases = []
    for vocab, d, nhead, nlayers, block in sizes:
        length = integer(gen, 2, block + 1) if hidden else block - 1
        batch = integer(gen, 1, 4) if hidden else 2
        cases.append(
            {
                "vocab_size": vocab,
                "d_model": d,
                "nhead": nhead,
                "nlayers": nlayers,
                "block_size": block,
                "seed": integer(gen, 0, 10_001),
                "idx": torch.randint(vocab, (batch, length), generator=gen),
                "targets": torch.randint(vocab, (batch, length), generator=gen),
            }
        )
    return cases


# ---------------------------------------------------------------- reading a module
def _linear_facts(module: nn.Module, name: str) -> dict:
    layer = getattr(module, name, None)
    if not isinstance(layer, nn.Linear):
        return {"linear": False, "type": type(layer).__name__}
    return {
        "linear": True,
        "in": layer.in_features,
        "out": layer.out_features,
        "bias": layer.bias is not None,
    }


def _tril_facts(module: nn.Module) -> dict:
    buffers = dict(module.named_buffers(recurse=False))
    parameters = dict(module.named_parameters(recurse=False))
    value = buffers.get("tril", parameters.get("tril", getattr(module, "tril", None)))
    return {
        "buffer": "tril" in buffers,
        "parameter": "tril" in parameters,
        "saved": "tril" in module.state_dict(),
        "value": value.detach().clone() if isinstance(value, torch.Tensor) else None,
    }


def _weights(module: nn.Module, names: tuple[str, ...]) -> dict:
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


def observe_attention(cls: Callable[..., nn.Module], case: dict) -> dict:
    """Build ``cls(d_model, nhead, block_size, dropout)`` under the case's seed; observe it."""
    torch.manual_seed(case["seed"])
    module = cls(case["d_model"], case["nhead"], case["block_size"], case["dropout"])
    randomise_parameters(module, case["seed"])
    got: dict = {
        "facts": {
            "qkv": _linear_facts(module, "qkv"),
            "proj": _linear_facts(module, "proj"),
            "tril": _tril_facts(module),
        },
        "weights": _weights(module, ATTENTION_WEIGHTS),
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
            "up": _linear_facts(mlp, "0") if isinstance(mlp, nn.Sequential) else {"linear": False},
        },
        "weights": _weights(module, BLOCK_WEIGHTS),
    }
    module.eval()
    x = case["x"]
    with torch.no_grad():
        got["out"] = module(x)
        got["attn_of_norm"] = module.attn(module.ln1(x))  # what the attention gives the block
        got["attn_of_x"] = module.attn(x)
    return got


def observe_gpt(cls: Callable[..., nn.Module], case: dict) -> dict:
    """Build ``cls(vocab_size, d_model, nhead, nlayers, block_size)``; observe it."""
    torch.manual_seed(case["seed"])
    keys = ("vocab_size", "d_model", "nhead", "nlayers", "block_size")
    model = cls(*(case[k] for k in keys))
    head, emb = getattr(model, "head", None), getattr(model, "tok_emb", None)
    pos = getattr(model, "pos_emb", None)
    spreads = initial_spreads(model)  # before the values are replaced
    randomise_parameters(model, case["seed"])
    got: dict = {
        "spreads": spreads,
        "facts": {
            "tied": head is not None and emb is not None and head.weight is emb.weight,
            "head_bias": getattr(head, "bias", None) is not None,
            "pos": list(pos.weight.shape) if isinstance(pos, nn.Embedding) else None,
            "parameters": sum(p.numel() for p in model.parameters()),
        },
        "weights": _weights(
            model, ("tok_emb.weight", "pos_emb.weight", "ln_f.weight", "ln_f.bias")
        ),
    }
    model.eval()
    idx, targets = case["idx"], case["targets"]
    with torch.no_grad():
        got["logits"], got["loss"] = model(idx, targets)
        _, got["loss_none"] = model(idx)
    return got


# ---------------------------------------------------------------- what the modules should give
def attention_from(
    weights: dict, x: torch.Tensor, nhead: int, causal: bool = True, scale: float | None = None
) -> torch.Tensor:
    """Causal self-attention with the given qkv and proj weights, by PyTorch's SDPA."""
    b, length, width = x.shape
    qkv = F.linear(x, weights["qkv.weight"], weights["qkv.bias"])
    q, k, v = qkv.view(b, length, 3, nhead, width // nhead).permute(2, 0, 3, 1, 4)
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    merged = heads.transpose(1, 2).reshape(x.shape)
    return F.linear(merged, weights["proj.weight"], weights["proj.bias"])


def _reshape_heads(weights: dict, x: torch.Tensor, nhead: int) -> torch.Tensor:
    b, length, width = x.shape
    q, k, v = F.linear(x, weights["qkv.weight"], weights["qkv.bias"]).chunk(3, dim=-1)
    q, k, v = (t.reshape(b, nhead, length, width // nhead) for t in (q, k, v))
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(heads.reshape(x.shape), weights["proj.weight"], weights["proj.bias"])


def _norm(weights: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weights[f"{name}.weight"], weights[f"{name}.bias"])


def _mlp(weights: dict, x: torch.Tensor, act: Callable[[torch.Tensor], torch.Tensor]):
    hidden = act(F.linear(x, weights["mlp.0.weight"], weights["mlp.0.bias"]))
    return F.linear(hidden, weights["mlp.2.weight"], weights["mlp.2.bias"])


# ---------------------------------------------------------------- judging the observations
def _returned(got: object, name: str) -> dict:
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
    got = _returned(got, name)
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
    got = _returned(got, name)
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
        reference = h + _mlp(weights, _norm(weights, "ln2", h), F.gelu)
        post = _norm(weights, "ln1", x + got["attn_of_x"])
        n1 = _norm(weights, "ln1", x)
        stream = _norm(weights, "ln2", n1 + a)
        mistakes = {
            POST_NORM: _norm(weights, "ln2", post + _mlp(weights, post, F.gelu)),
            NORM_STREAM: stream + _mlp(weights, stream, F.gelu),
            LN1_TWICE: h + _mlp(weights, _norm(weights, "ln1", h), F.gelu),
            RELU: h + _mlp(weights, _norm(weights, "ln2", h), F.relu),
            GELU_TANH: h
            + _mlp(weights, _norm(weights, "ln2", h), lambda t: F.gelu(t, approximate="tanh")),
        }
    check_against_reference(got["out"], reference, name, mistakes, atol=1e-5)


def gpt_parameters(vocab: int, d: int, nlayers: int, block: int) -> int:
    """The parameters of a GPT with a tied head (C's formulas, each matrix counted once)."""
    per_block = 12 * d * d + 13 * d  # qkv, proj, two MLP matrices and their biases, two norms
    return vocab * d + block * d + nlayers * per_block + 2 * d


def judge_gpt(got: object, case: dict) -> None:
    """Tying, the positions, the logits (with no block), causality and the loss of GPT."""
    keys = ("vocab_size", "d_model", "nhead", "nlayers", "block_size")
    name = "GPT(" + ", ".join(f"{k}={case[k]}" for k in keys) + ")"
    got = _returned(got, name)
    vocab, d, nlayers, block = (case[k] for k in ("vocab_size", "d_model", "nlayers", "block_size"))
    facts = got["facts"]
    check(
        facts["tied"],
        f"{name}: head.weight is not tok_emb.weight. Tie them (self.head.weight = "
        "self.tok_emb.weight): one tensor, not a copy of its values.",
    )
    check(not facts["head_bias"], f"{name}: the head has a bias; use nn.Linear(D, V, bias=False).")
    check(
        facts["pos"] == [block, d],
        expected_got(
            f"{name}: pos_emb should be nn.Embedding(block_size, d_model), learned positions.",
            [block, d],
            facts["pos"],
        ),
    )
    count = gpt_parameters(vocab, d, nlayers, block)
    check(
        facts["parameters"] == count,
        expected_got(f"{name} has the wrong number of parameters.", count, facts["parameters"]),
    )
    idx, targets = case["idx"], case["targets"]
    logits = got["logits"]
    shape = (*idx.shape, vocab)
    check(
        isinstance(logits, torch.Tensor) and tuple(logits.shape) == shape,
        expected_got(f"{name}: the logits have the wrong shape.", shape, _shape(logits)),
    )
    if nlayers == 0:
        w = got["weights"]
        with torch.no_grad():
            h = w["tok_emb.weight"][idx] + w["pos_emb.weight"][: idx.size(1)]
            reference = _norm(w, "ln_f", h) @ w["tok_emb.weight"].T
            scaled = w["tok_emb.weight"][idx] * math.sqrt(d) + w["pos_emb.weight"][: idx.size(1)]
            mistakes = {
                NO_LN_F: h @ w["tok_emb.weight"].T,
                EMB_SCALED: _norm(w, "ln_f", scaled) @ w["tok_emb.weight"].T,
            }
        check_against_reference(logits, reference, f"{name}: the logits", mistakes, atol=1e-5)
    check(got["loss_none"] is None, f"{name}(idx) without targets should return loss None.")
    loss = got["loss"]
    check(
        isinstance(loss, torch.Tensor) and loss.dim() == 0,
        expected_got(f"{name}: the loss should be a scalar tensor.", "shape ()", _shape(loss)),
    )
    with torch.no_grad():
        flat = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        shifted = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), targets[:, 1:].reshape(-1))
    check_against_reference(
        loss, flat, f"{name}: the loss", {LOSS_SHIFTED: shifted}, atol=1e-5, rtol=1e-4
    )
    judge_initialisation(got["spreads"], case)


def _shape(value: object) -> object:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__


# ---------------------------------------------------------------- the test cells' entry points
def diagnose_attention(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge CausalSelfAttention on each case (a test cell)."""
    for case in cases:
        judge_attention(observe_attention(cls, case), case)


def diagnose_block(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge Block on each case (a test cell)."""
    for case in cases:
        judge_block(observe_block(cls, case), case)


def diagnose_gpt(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge GPT on each case (a test cell)."""
    for case in cases:
        judge_gpt(observe_gpt(cls, case), case)
