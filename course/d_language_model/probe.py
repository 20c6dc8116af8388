"""What the trusted judge needs from assignment D's code (see :mod:`course.verify`).

One item per test cell of the notebook. The inputs of the hidden items are drawn from the
grader's secret seed by the functions below, which the judge calls too. The model items build
the student's ``TransformerModel`` with torch seeded, and return its weights (``state_dict``),
its logits on inputs from the seed, and what the visible checks read (logits for inputs whose
later tokens differ, the input that ``pos_encoder`` received, ...). Nothing is trained here.
The items of the head scores call the student's two functions on one-hot patterns (built by
the checks) and on random attention weights drawn from the seed.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course.d_language_model.checks import (
    RANDOM_VALUES,
    causality_inputs,
    pos_encoder_inputs,
    run_model,
)
from course.d_language_model.head_checks import induction_inputs, previous_token_inputs
from course.probing import by_cell, draw, future_hidden, seed_of
from course.testcells import randomise_parameters
from course.verify import student

VISIBLE_BATCHES = [(10, 3), (100, 7)]  # (n_tokens, seq_len) of the visible cell
VISIBLE_NLLS = [0.0, math.log(5000)]  # a perfect model, a uniform guess over 5000 words
VISIBLE_MODEL = {"ntokens": 30, "d_model": 16, "nhead": 2, "d_hid": 32, "nlayers": 2}
# The one-hot patterns of the visible and hidden cells of the head scores: length (and period).
VISIBLE_PREVIOUS_LENGTH, HIDDEN_PREVIOUS_LENGTH = 6, 11
VISIBLE_INDUCTION, HIDDEN_INDUCTION = (8, 4), (12, 5)
VISIBLE_INDUCTION_UNIFORM = (8, 3)  # length, period of the visible cell's uniform heads
# The weights the hidden cell reads (not the position table, which the judge computes itself).
WEIGHTS = ("embedding.", "transformer_encoder.", "decoder.")


def batch_cases(seed: int) -> list[tuple[int, int, torch.Tensor]]:
    """(n_tokens, seq_len, random stream of ids): the edge cases, then random sizes."""
    gen = draw(seed, "batch_cases")
    sizes = [(31, 5), (26, 5), (6, 5), (1000, 35)]  # 26 = 5 * 5 + 1: every token used
    for _ in range(4):
        n_tokens = int(torch.randint(12, 400, (1,), generator=gen))
        sizes.append((n_tokens, int(torch.randint(2, 11, (1,), generator=gen))))
    return [(n, length, torch.randint(0, 50, (n,), generator=gen)) for n, length in sizes]


def hidden_nlls(seed: int) -> list[float]:
    """Losses small and large, then random ones in [0, 10)."""
    gen = draw(seed, "hidden_nlls")
    return [0.5, 1.0, 3.25, 9.5, 12.0, *(torch.rand(4, generator=gen) * 10).tolist()]


def model_cases(seed: int) -> list[dict]:
    """Sizes of the hidden models (as the hidden cell draws them), with their inputs ``src``."""
    gen = draw(seed, "model_cases")
    cases = []
    for trial, length in enumerate([1, 2, 9, 13, 20]):
        ntokens = int(torch.randint(5, 60, (1,), generator=gen))
        nhead = [2, 4][trial % 2]
        d_model = nhead * int(torch.randint(2, 9, (1,), generator=gen))
        batch = int(torch.randint(1, 5, (1,), generator=gen))
        cases.append(
            {
                "ntokens": ntokens,
                "d_model": d_model,
                "nhead": nhead,
                "d_hid": 2 * d_model,
                "nlayers": 1 + trial % 2,
                "src": torch.randint(0, ntokens, (batch, length), generator=gen),
                "encoder_input": torch.randn(batch, length, d_model, generator=gen),
            }
        )
    return cases


def uniform_heads(length: int) -> torch.Tensor:
    """The visible cells' two heads (2, L, L): uniform over the positions <= i (causal), and
    uniform over all L positions."""
    causal = torch.tril(torch.ones(length, length)) / torch.arange(1, length + 1).unsqueeze(1)
    return torch.stack([causal, torch.full((length, length), 1 / length)])


def _random_weights(gen: torch.Generator, heads: int, length: int, causal: bool) -> torch.Tensor:
    """Attention weights (H, L, L): the softmax of random scores, causal or not."""
    scores = 3 * torch.randn(heads, length, length, generator=gen)
    if causal:
        scores = future_hidden(scores)
    return torch.softmax(scores, dim=-1)


def previous_token_random(seed: int) -> list[torch.Tensor]:
    """The hidden cell's random weights: 2 to 6 heads, 2 to 20 positions, causal or not."""
    gen = draw(seed, "previous_token_random")
    cases = []
    for trial in range(6):
        heads = int(torch.randint(2, 7, (1,), generator=gen))
        length = int(torch.randint(2, 21, (1,), generator=gen))
        cases.append(_random_weights(gen, heads, length, causal=trial % 2 == 0))
    return cases


def induction_random(seed: int) -> list[tuple[torch.Tensor, int]]:
    """The hidden cell's (weights, period): periods 2 to 8, lengths period + 1 to 3 * period
    (the first exactly two copies), causal or not."""
    gen = draw(seed, "induction_random")
    cases = []
    for trial in range(6):
        heads = int(torch.randint(2, 7, (1,), generator=gen))
        period = int(torch.randint(2, 9, (1,), generator=gen))
        length = period + int(torch.randint(1, 2 * period + 1, (1,), generator=gen))
        if trial == 0:
            length = 2 * period
        cases.append((_random_weights(gen, heads, length, causal=trial % 2 == 0), period))
    return cases


def _number(value: object) -> object:
    """A float or int subclass (numpy's float64, say) as the plain number it equals."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return value


def _encoder_settings(model: nn.Module) -> object:
    """What the first encoder layer says of its settings: a hint for the judge, which rebuilds
    the encoder from the weights and keeps only settings that give the student's outputs."""
    try:
        layer = model.transformer_encoder.layers[0]
        activation = layer.activation
        return {
            "nhead": int(layer.self_attn.num_heads),
            "norm_first": bool(layer.norm_first),
            "eps": float(layer.norm1.eps),
            "activation": str(getattr(activation, "__name__", type(activation).__name__)),
        }
    except Exception:  # noqa: BLE001 - another kind of encoder: no hint
        return None


def _logits(model: nn.Module, src: torch.Tensor, mask: torch.Tensor | None) -> object:
    """``model(src, mask)`` without gradients, the parameters kept as they are (the cell's
    :func:`run_model` would give them the values of ``RANDOM_VALUES``)."""
    with torch.no_grad():
        return model(src, mask)


# ---------------------------------------------------------------- items, by test cell
def batches_visible(ns: dict, seed: int) -> object:
    batches = student(ns, "make_lm_batches")
    return [batches(torch.arange(n), length) for n, length in VISIBLE_BATCHES]


def batches_hidden(ns: dict, seed: int) -> object:
    batches = student(ns, "make_lm_batches")
    return [
        {"counting": batches(torch.arange(n), length), "random": batches(stream.clone(), length)}
        for n, length, stream in batch_cases(seed)
    ]


def perplexity_visible(ns: dict, seed: int) -> object:
    ppl = student(ns, "perplexity")
    return [_number(ppl(nll)) for nll in VISIBLE_NLLS]


def perplexity_hidden(ns: dict, seed: int) -> object:
    ppl = student(ns, "perplexity")
    return [_number(ppl(nll)) for nll in hidden_nlls(seed)]


def model_visible(ns: dict, seed: int) -> object:
    """What the visible cell reads, on its own model (seed 0) and input."""
    sizes = VISIBLE_MODEL
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = student(ns, "TransformerModel")(**sizes, dropout=0.1)
        src = torch.randint(0, sizes["ntokens"], (3, 7))
    randomise_parameters(model, RANDOM_VALUES)  # as run_model gives them in the cell
    mask = future_hidden(torch.zeros(7, 7))
    masked = run_model(model, src, mask)
    unmasked = run_model(model, src, None)
    changed = [run_model(model, other, mask) for other in causality_inputs(src, 30)]

    calls: list[int] = []
    hook = model.pos_encoder.register_forward_hook(lambda mod, args, out: calls.append(1))
    try:
        repeated = run_model(
            model, torch.full((1, 6), 5, dtype=torch.long), future_hidden(torch.zeros(6, 6))
        )
    finally:
        hook.remove()

    seen = pos_encoder_inputs(model, src, mask)
    return {
        "src": src,
        "masked": masked,
        "unmasked": unmasked,
        "changed": changed,
        "repeated": repeated,
        "pos_encoder_called": bool(calls),
        "pos_encoder_input": seen[0] if seen else None,
        "embedding": model.embedding.weight if seen else None,
    }


def model_hidden(ns: dict, seed: int) -> object:
    """Per model: its weights, its logits with and without the mask, logits for changed futures,
    its encoder's and decoder's outputs on random vectors; then two passes in training mode."""
    build = student(ns, "TransformerModel")
    observed = []
    with torch.random.fork_rng(devices=[]):
        for trial, case in enumerate(model_cases(seed)):
            sizes = {k: case[k] for k in ("ntokens", "d_model", "nhead", "d_hid", "nlayers")}
            torch.manual_seed(seed_of(seed, "model_hidden", trial))
            model = build(**sizes, dropout=0.3)
            # values of the submission's own (the cell's run_model gives RANDOM_VALUES); the
            # judge rebuilds the model from them
            randomise_parameters(model, seed_of(seed, "model_hidden values", trial))
            model.eval()
            src, length = case["src"], case["src"].size(1)
            mask = future_hidden(torch.zeros(length, length))
            state = model.state_dict()
            seen = {
                "state": {k: v.clone() for k, v in state.items() if k.startswith(WEIGHTS)},
                "masked": _logits(model, src, mask),
                "unmasked": _logits(model, src, None),
            }
            encoder, x = model.transformer_encoder, case["encoder_input"]
            with torch.no_grad():
                seen["encoder_masked"] = encoder(x.clone(), mask=mask)
                seen["encoder_unmasked"] = encoder(x.clone())
                seen["decoder"] = model.decoder(x.clone())
            seen["encoder_settings"] = _encoder_settings(model)
            if length > 1:
                inputs = causality_inputs(src, case["ntokens"], seed=trial)
                seen["changed"] = [_logits(model, other, mask) for other in inputs]
            observed.append(seen)
        model.train()
        dropped = [model(src, mask), model(src, mask)]
    return {"models": observed, "train_mode": dropped}


def previous_visible(ns: dict, seed: int) -> object:
    score = student(ns, "previous_token_score")
    cases = previous_token_inputs(VISIBLE_PREVIOUS_LENGTH)
    return {
        "patterns": [score(weights.clone()) for weights in cases],
        "uniform": score(uniform_heads(VISIBLE_PREVIOUS_LENGTH)),
    }


def previous_hidden(ns: dict, seed: int) -> object:
    score = student(ns, "previous_token_score")
    return {
        "random": [score(weights.clone()) for weights in previous_token_random(seed)],
        "patterns": [score(w.clone()) for w in previous_token_inputs(HIDDEN_PREVIOUS_LENGTH)],
    }


def induction_visible(ns: dict, seed: int) -> object:
    score = student(ns, "induction_score")
    length, period = VISIBLE_INDUCTION
    uniform_length, uniform_period = VISIBLE_INDUCTION_UNIFORM
    return {
        "patterns": [score(w.clone(), period) for w in induction_inputs(length, period)],
        "uniform": score(uniform_heads(uniform_length), uniform_period),
    }


def induction_hidden(ns: dict, seed: int) -> object:
    score = student(ns, "induction_score")
    length, period = HIDDEN_INDUCTION
    return {
        "random": [score(weights.clone(), p) for weights, p in induction_random(seed)],
        "patterns": [score(w.clone(), period) for w in induction_inputs(length, period)],
    }


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/d_language_model.py (course.probing).
CELLS = {
    "test_batches_visible": "batches_visible",
    "test_batches_hidden": "batches_hidden",
    "test_perplexity_visible": "perplexity_visible",
    "test_perplexity_hidden": "perplexity_hidden",
    "test_model_visible": "model_visible",
    "test_model_hidden": "model_hidden",
    "test_previous_token_visible": "previous_visible",
    "test_previous_token_hidden": "previous_hidden",
    "test_induction_visible": "induction_visible",
    "test_induction_hidden": "induction_hidden",
}
ITEMS = by_cell(CELLS, globals())
