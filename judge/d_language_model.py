"""Assignment D's verdicts: the training pairs, the perplexity, the model and the head scores.

The model cannot be rebuilt from the student's class, so the hidden item rebuilds what the
hidden cell calls (the embedding's weight, the encoder stack and the decoder) from the observed
``state_dict``, keeps the rebuilt encoder and decoder only if they give what the student's gave
on random vectors, and then computes the reference forward pass with those weights, as the
hidden cell does with the student's own modules. An encoder that no ``nn.TransformerEncoder``
of those weights reproduces (a stack of the student's own design) fails here, although the
hidden cell, which calls it as it is, could accept it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from course.d_language_model import checks, head_checks, probe
from course.testcells import (
    check,
    check_against_reference,
    check_number,
    check_tensor,
    fail,
    same_values,
)
from judge import core

# How close the rebuilt encoder and decoder must come to the student's on the same vectors.
REBUILT_ATOL = REBUILT_RTOL = 1e-4


# ---------------------------------------------------------------- input/target pairs
def reference_batches(stream: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = (len(stream) - 1) // seq_len
    inputs = stream[: n * seq_len].reshape(n, seq_len)
    return inputs, stream[1 : n * seq_len + 1].reshape(n, seq_len)


def batches_visible(seed: int, got: object) -> None:
    sizes = probe.VISIBLE_BATCHES
    check(isinstance(got, list) and len(got) == len(sizes), "not one observation per stream")
    for (n_tokens, seq_len), result in zip(sizes, got, strict=True):
        checks.diagnose_lm_batches_result(result, n_tokens, seq_len)


def batches_hidden(seed: int, got: object) -> None:
    cases = probe.batch_cases(seed)
    check(isinstance(got, list) and len(got) == len(cases), "not one observation per stream")
    for (n_tokens, seq_len, stream), seen in zip(cases, got, strict=True):
        checks.diagnose_lm_batches_result(seen["counting"], n_tokens, seq_len)
        result = seen["random"]
        name = f"make_lm_batches(random stream of {n_tokens} ids, seq_len={seq_len})"
        pair = isinstance(result, list) or isinstance(result, torch.Tensor) and result.dim() > 0
        check(pair and len(result) == 2, f"{name} should return a pair (inputs, targets).")
        inputs, targets = result
        ref_x, ref_y = reference_batches(stream, seq_len)
        n = ref_x.size(0)
        check_against_reference(inputs, ref_x, f"inputs of {name}", atol=0, rtol=0)
        check_against_reference(
            targets,
            ref_y,
            f"targets of {name}",
            mistakes={
                "the targets are not shifted (they equal the inputs)": ref_x,
                "the targets are shifted the wrong way": stream[: n * seq_len].reshape(n, seq_len),
            },
            atol=0,
            rtol=0,
        )


# ---------------------------------------------------------------- perplexity
def perplexity_visible(seed: int, got: object) -> None:
    """As the visible cell: perplexity(0) = 1 and perplexity(ln 5000) = 5000."""
    nlls = probe.VISIBLE_NLLS
    check(isinstance(got, list) and len(got) == len(nlls), "not one value per loss")
    names = ["perplexity(0.0)", "perplexity(ln 5000)"]
    for nll, expected, name, value in zip(nlls, [1.0, 5000.0], names, got, strict=True):
        checks.diagnose_perplexity_value(value, nll)
        check_number(value, expected, name, rel=1e-6)


def perplexity_hidden(seed: int, got: object) -> None:
    nlls = probe.hidden_nlls(seed)
    check(isinstance(got, list) and len(got) == len(nlls), "not one value per loss")
    for nll, value in zip(nlls, got, strict=True):
        checks.diagnose_perplexity_value(value, nll)
        check_number(value, math.exp(nll), f"perplexity({nll})", rel=1e-6)


# ---------------------------------------------------------------- the model
def model_visible(seed: int, got: object) -> None:
    """As the visible cell: shapes and no softmax (with and without the mask), causality,
    positions that matter, and pos_encoder's input scaled by sqrt(d_model) when it is called."""
    assert isinstance(got, dict)
    ntokens = probe.VISIBLE_MODEL["ntokens"]
    src = check_tensor(got["src"], "the visible input", shape=(3, 7), dtype=torch.long)
    check(bool(((src >= 0) & (src < ntokens)).all()), "the visible input is not token ids")
    name = f"model(src of shape {tuple(src.shape)}, mask)"
    masked = check_tensor(got["masked"], name)
    checks.diagnose_logits_result(masked, 3, 7, ntokens)
    unmasked = check_tensor(got["unmasked"], name)
    checks.diagnose_logits_result(unmasked, 3, 7, ntokens)
    _causality(masked, unmasked, got["changed"], 7)
    repeated = check_tensor(got["repeated"], "model(src of shape (1, 6), mask)")
    checks.diagnose_positions_result(repeated[0], got["pos_encoder_called"] is True)
    if got["pos_encoder_input"] is not None:
        weight = check_tensor(got["embedding"], "the embedding's weight")
        checks.diagnose_scaling_result(got["pos_encoder_input"], weight, src, weight.size(1))


def _causality(masked: torch.Tensor, unmasked: torch.Tensor, changed: object, length: int) -> None:
    check(
        isinstance(changed, list) and len(changed) == length - 1,
        "not one observation per changed future",
    )
    for other in changed:
        check_tensor(other, "the logits for a changed future")
    checks.diagnose_causality_result(masked, changed, lambda: unmasked)


def position_table(length: int, d_model: int) -> torch.Tensor:
    """The sinusoidal table (L, D), computed in float64 as the hidden cell does."""
    pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return table.float()


def _weights(state: dict, prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


# Activations an encoder layer may be given (by name, as the probe reads them).
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "elu": F.elu,
    "mish": F.mish,
    "leakyrelu": F.leaky_relu,
    "softplus": F.softplus,
}


def _settings(nhead: int, d_model: int, hint: object) -> Iterator[tuple[int, bool, object, float]]:
    """(nhead, norm_first, activation, layer_norm_eps) to try: the settings the student's first
    layer reported (``hint``; only a guess, the outputs decide), then the ones ``__init__`` gives,
    then the usual variants (other head counts, pre-norm, GELU)."""
    if isinstance(hint, dict):
        activation = ACTIVATIONS.get(str(hint.get("activation")).lower().replace("_", ""))
        heads, norm_first, eps = hint.get("nhead"), hint.get("norm_first"), hint.get("eps")
        if (
            activation is not None
            and type(heads) is int
            and 0 < heads <= d_model
            and d_model % heads == 0
            and type(norm_first) is bool
            and type(eps) is float
        ):
            yield heads, norm_first, activation, eps
    divisors = [h for h in range(1, d_model + 1) if d_model % h == 0 and h != nhead]
    for heads in [nhead, *divisors]:
        for norm_first in (False, True):
            for activation in (F.relu, F.gelu):
                yield heads, norm_first, activation, 1e-5


def _encoder_candidates(
    state: dict[str, torch.Tensor], nhead: int, hint: object
) -> Iterator[nn.TransformerEncoder]:
    """Encoder stacks that could hold ``state`` (see :func:`_settings`), weights loaded."""
    d_model = state["layers.0.self_attn.in_proj_weight"].size(1)
    d_hid = state["layers.0.linear1.weight"].size(0)
    nlayers = len({k.split(".")[1] for k in state if k.startswith("layers.")})
    bias = "layers.0.linear1.bias" in state
    for heads, norm_first, activation, eps in _settings(nhead, d_model, hint):
        layer = nn.TransformerEncoderLayer(
            d_model,
            heads,
            d_hid,
            dropout=0.0,
            activation=activation,
            layer_norm_eps=eps,
            batch_first=True,
            norm_first=norm_first,
            bias=bias,
        )
        norm = None
        if "norm.weight" in state:
            norm = nn.LayerNorm(d_model, eps=eps, bias="norm.bias" in state)
        encoder = nn.TransformerEncoder(layer, nlayers, norm=norm)
        try:
            encoder.load_state_dict(state)
        except RuntimeError:
            continue
        yield encoder.eval()


def rebuilt_encoder(seen: dict, nhead: int, x: torch.Tensor, mask: torch.Tensor) -> nn.Module:
    """The encoder stack of the observed weights that gives what the student's gave on ``x``."""
    state = _weights(seen["state"], "transformer_encoder.")
    wanted = [seen["encoder_masked"], seen["encoder_unmasked"]]
    if "layers.0.self_attn.in_proj_weight" in state and "layers.0.linear1.weight" in state:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            for encoder in _encoder_candidates(state, nhead, seen["encoder_settings"]):
                outputs = [encoder(x, mask=mask), encoder(x)]
                if all(
                    isinstance(w, torch.Tensor) and same_values(w, o, REBUILT_ATOL, REBUILT_RTOL)
                    for w, o in zip(wanted, outputs, strict=True)
                ):
                    return encoder
    fail(
        "The trusted check could not rebuild the model's transformer_encoder from its weights: "
        "it should be the stack that __init__ builds, nn.TransformerEncoder(nn."
        "TransformerEncoderLayer(d_model, nhead, d_hid, dropout, batch_first=True), nlayers)."
    )


def rebuilt_decoder(seen: dict, x: torch.Tensor) -> nn.Module:
    """The linear decoder of the observed weights, if it gives what the student's gave on x."""
    state = _weights(seen["state"], "decoder.")
    weight = state.get("weight")
    if isinstance(weight, torch.Tensor) and weight.dim() == 2 and set(state) <= {"weight", "bias"}:
        decoder = nn.Linear(weight.size(1), weight.size(0), bias="bias" in state)
        try:
            decoder.load_state_dict(state)
        except RuntimeError:
            pass
        else:
            with torch.no_grad():
                out = decoder(x)
            wanted = seen["decoder"]
            if isinstance(wanted, torch.Tensor) and same_values(
                wanted, out, REBUILT_ATOL, REBUILT_RTOL
            ):
                return decoder
    fail(
        "The trusted check could not rebuild the model's decoder from its weights: it should "
        "be the nn.Linear(d_model, ntokens) that __init__ builds."
    )


def reference_outputs(
    weight: torch.Tensor, encoder: nn.Module, decoder: nn.Module, src: torch.Tensor, mask: object
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The reference logits and what each mistaken forward pass gives, as the hidden cell."""
    d_model = weight.size(1)
    emb = weight[src]  # (B, L, D)
    pe = position_table(src.size(1), d_model)
    with torch.no_grad():
        reference = decoder(encoder(emb * math.sqrt(d_model) + pe, mask=mask))
        mistakes = {
            "the embeddings are not multiplied by sqrt(d_model)": decoder(
                encoder(emb + pe, mask=mask)
            ),
            "the positional encoding is skipped": decoder(
                encoder(emb * math.sqrt(d_model), mask=mask)
            ),
            "the encoder is skipped (the decoder reads the embeddings and positions): pass x "
            "through self.transformer_encoder(x, mask=src_mask) before the decoder": decoder(
                emb * math.sqrt(d_model) + pe
            ),
            "the positional encoding is added after the encoder; the encoder's attention needs "
            "the positions, so add them first": decoder(
                encoder(emb * math.sqrt(d_model), mask=mask) + pe
            ),
            "a softmax is applied to the output (return logits)": torch.softmax(reference, -1),
            "a log-softmax is applied to the output (return logits)": torch.log_softmax(
                reference, -1
            ),
        }
        if mask is not None:
            mistakes["the mask is ignored (pass src_mask to the encoder)"] = decoder(
                encoder(emb * math.sqrt(d_model) + pe)
            )
    return reference, mistakes


def model_hidden(seed: int, got: object) -> None:
    """As the hidden cell: the logits against the reference forward pass with the model's own
    weights (mistakes named), with and without the mask; causality; dropout in train mode."""
    assert isinstance(got, dict)
    cases = probe.model_cases(seed)
    models = got["models"]
    check(isinstance(models, list) and len(models) == len(cases), "not one observation per model")
    for case, seen in zip(cases, models, strict=True):
        src, x = case["src"], case["encoder_input"]
        length = src.size(1)
        mask = core.future_mask(length)
        weight = check_tensor(seen["state"].get("embedding.weight"), "the embedding's weight")
        encoder = rebuilt_encoder(seen, case["nhead"], x, mask)
        decoder = rebuilt_decoder(seen, x)
        outputs = {}
        for key, src_mask in (("masked", mask), ("unmasked", None)):
            name = f"TransformerModel(ntokens={case['ntokens']}, d_model={case['d_model']}, "
            name += f"nhead={case['nhead']}, nlayers={case['nlayers']}) on src {tuple(src.shape)}"
            name += " with the causal mask" if src_mask is not None else " without a mask"
            out = check_tensor(seen[key], f"model(src of shape {tuple(src.shape)}, mask)")
            ref, mistakes = reference_outputs(weight, encoder, decoder, src, src_mask)
            check_against_reference(out, ref, name, mistakes=mistakes, atol=1e-4, rtol=1e-4)
            outputs[key] = out
        if length > 1:
            _causality(outputs["masked"], outputs["unmasked"], seen["changed"], length)
    first, second = got["train_mode"]
    check(
        not torch.allclose(first, second),
        "In train mode, dropout should make two forward passes differ.",
    )


# ---------------------------------------------------------------- what trained heads do
def reference_previous(weights: torch.Tensor) -> torch.Tensor:
    """Per head, the mean weight from position i to i - 1 over the rows i >= 1: (H,)."""
    rows = torch.arange(1, weights.size(-1))
    return weights[:, rows, rows - 1].mean(dim=1)


def mistaken_previous(weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """What each named mistake of previous_token_score gives on ``weights`` (the hidden cell's)."""
    length = weights.size(-1)
    rows = torch.arange(1, length)
    return {
        checks.DIAGONAL: weights[:, rows, rows].mean(dim=1),
        checks.DIAGONAL + " (Averaged here over all L rows.)": weights.diagonal(
            dim1=1, dim2=2
        ).mean(dim=1),
        checks.PREVIOUS_ALL_ROWS: weights[:, rows, rows - 1].sum(dim=1) / length,
        checks.PREVIOUS_SWAPPED: weights[:, rows - 1, rows].mean(dim=1),
    }


def reference_induction(weights: torch.Tensor, period: int) -> torch.Tensor:
    """Per head, the mean weight from i to i - period + 1 over the rows i >= period: (H,)."""
    rows = torch.arange(period, weights.size(-1))
    return weights[:, rows, rows - period + 1].mean(dim=1)


def mistaken_induction(weights: torch.Tensor, period: int) -> dict[str, torch.Tensor]:
    """What each named mistake of induction_score gives on ``weights`` (the hidden cell's)."""
    length = weights.size(-1)
    rows = torch.arange(period, length)
    early = torch.arange(period - 1, length)
    return {
        checks.INDUCTION_OFFSET: weights[:, rows, rows - period].mean(dim=1),
        checks.INDUCTION_ALL_ROWS: weights[:, rows, rows - period + 1].sum(dim=1) / length,
        checks.INDUCTION_FROM_PERIOD_MINUS_ONE: weights[:, early, early - period + 1].mean(dim=1),
        checks.INDUCTION_SWAPPED: weights[:, rows - period + 1, rows].mean(dim=1),
    }


def _uniform_scores(got: object, expected: list[float], name: str) -> None:
    scores = head_checks.diagnose_head_scores_result(got, 2, name)
    check_against_reference(scores, torch.tensor(expected), name, atol=1e-6, rtol=1e-6)


def previous_visible(seed: int, got: object) -> None:
    """As the visible cell: the one-hot patterns, then two uniform heads on 6 positions."""
    assert isinstance(got, dict)
    length = probe.VISIBLE_PREVIOUS_LENGTH
    head_checks.diagnose_previous_token_result(got["patterns"], length)
    causal = sum(1 / (i + 1) for i in range(1, length)) / (length - 1)
    name = f"previous_token_score(two uniform heads, L={length})"
    _uniform_scores(got["uniform"], [causal, 1 / length], name)


def previous_hidden(seed: int, got: object) -> None:
    """As the hidden cell: random weights against the reference (mistakes named), then the
    one-hot patterns on 11 positions."""
    assert isinstance(got, dict)
    cases = probe.previous_token_random(seed)
    results = got["random"]
    check(isinstance(results, list) and len(results) == len(cases), "not one result per case")
    for weights, result in zip(cases, results, strict=True):
        heads = weights.size(0)
        name = f"previous_token_score(random weights of shape {tuple(weights.shape)})"
        scores = head_checks.diagnose_head_scores_result(result, heads, name)
        check_against_reference(
            scores,
            reference_previous(weights),
            name,
            mistakes=mistaken_previous(weights),
            atol=1e-5,
            rtol=1e-5,
        )
    head_checks.diagnose_previous_token_result(got["patterns"], probe.HIDDEN_PREVIOUS_LENGTH)


def induction_visible(seed: int, got: object) -> None:
    """As the visible cell: the one-hot patterns, then two uniform heads on 8 positions."""
    assert isinstance(got, dict)
    head_checks.diagnose_induction_result(got["patterns"], *probe.VISIBLE_INDUCTION)
    length, period = probe.VISIBLE_INDUCTION_UNIFORM
    causal = sum(1 / (i + 1) for i in range(period, length)) / (length - period)
    name = f"induction_score(two uniform heads, L={length}, period={period})"
    _uniform_scores(got["uniform"], [causal, 1 / length], name)


def induction_hidden(seed: int, got: object) -> None:
    """As the hidden cell: random weights and periods against the reference (mistakes named),
    then the one-hot patterns on 12 positions with period 5."""
    assert isinstance(got, dict)
    cases = probe.induction_random(seed)
    results = got["random"]
    check(isinstance(results, list) and len(results) == len(cases), "not one result per case")
    for (weights, period), result in zip(cases, results, strict=True):
        heads = weights.size(0)
        name = f"induction_score(random weights of shape {tuple(weights.shape)}, period={period})"
        scores = head_checks.diagnose_head_scores_result(result, heads, name)
        check_against_reference(
            scores,
            reference_induction(weights, period),
            name,
            mistakes=mistaken_induction(weights, period),
            atol=1e-5,
            rtol=1e-5,
        )
    head_checks.diagnose_induction_result(got["patterns"], *probe.HIDDEN_INDUCTION)
