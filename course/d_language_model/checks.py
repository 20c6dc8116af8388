"""Checks for assignment D (a Transformer language model): they name the usual mistakes.

Each function checks a property the syllabus states (a shift by one, logits that are not
probabilities, a future that cannot change the past, positions that matter) and raises
:class:`GradingError` with a message that names the mistake. None of them computes the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

# The trained heads' checks live in head_checks.py; the notebook reads them here too (checks.X).
from course.d_language_model.head_checks import *  # noqa: F403
from course.testcells import check, check_tensor, expected_got, fail, randomise_parameters


# ---------------------------------------------------------------- input/target pairs
def diagnose_lm_batches_result(got: object, n_tokens: int, seq_len: int) -> None:
    """Check what ``make_lm_batches(torch.arange(n_tokens), seq_len)`` returned.

    With the stream 0, 1, 2, ... every id equals its position, so the shift and the cut can be
    read off the values: targets - inputs must be 1 everywhere, row r must start at r * seq_len.
    """
    name = f"make_lm_batches(torch.arange({n_tokens}), seq_len={seq_len})"
    inputs, targets = _lm_pair(got, n_tokens, seq_len, name)
    rows = (n_tokens - 1) // seq_len
    _diagnose_shift(inputs, targets, rows, name)
    starts = inputs[:, 0]
    expected_starts = torch.arange(rows) * seq_len
    if not bool((starts == expected_starts).all()):
        fail(
            expected_got(
                f"{name}: the rows should be consecutive, non-overlapping pieces of the stream "
                "starting at its first token: row r starts at r * seq_len.",
                expected_starts.tolist()[:6],
                starts.tolist()[:6],
            )
        )


def _lm_pair(
    got: object, n_tokens: int, seq_len: int, name: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (inputs, targets) of ``got``, checked: a pair of long tensors of the right shape."""
    check(
        isinstance(got, (tuple, list)) and len(got) == 2,
        expected_got(
            f"{name} should return a pair (inputs, targets).",
            "a tuple of two tensors",
            type(got).__name__ + (f" of length {len(got)}" if hasattr(got, "__len__") else ""),
        ),
    )
    rows = (n_tokens - 1) // seq_len
    inputs = check_tensor(got[0], f"inputs of {name}")
    targets = check_tensor(got[1], f"targets of {name}")
    for tensor, what in ((inputs, "inputs"), (targets, "targets")):
        check(
            tensor.dtype == torch.long,
            expected_got(f"{what} of {name} must hold token ids.", torch.long, tensor.dtype),
        )
        check(
            tuple(tensor.shape) == (rows, seq_len),
            expected_got(
                f"{what} of {name} has the wrong shape: (number of rows, seq_len), with "
                f"(N - 1) // seq_len = ({n_tokens} - 1) // {seq_len} = {rows} rows (the last "
                "token of the stream is only a target; an incomplete last row is dropped).",
                (rows, seq_len),
                tuple(tensor.shape),
            ),
        )
    return inputs, targets


def _diagnose_shift(inputs: torch.Tensor, targets: torch.Tensor, rows: int, name: str) -> None:
    """Each target is the token after its input (not the same one, not the one before)."""
    shift = targets - inputs
    if rows and bool((shift == 0).all()):
        fail(
            f"{name}: the targets are not shifted: they equal the inputs, so the model would be "
            "trained to repeat the token it reads. The target at position t is the NEXT token, "
            "stream[t + 1]."
        )
    if rows and bool((shift == -1).all()):
        fail(
            f"{name}: the targets are shifted the wrong way: each target is the token BEFORE "
            "its input (the model would learn to predict the past). The target at position t "
            "is the next token, stream[t + 1]."
        )
    if not bool((shift == 1).all()):
        r, c = (shift != 1).nonzero()[0].tolist()
        fail(
            expected_got(
                f"{name}: at row {r}, position {c}, the target is not the token that follows "
                "the input.",
                f"target {int(inputs[r, c]) + 1} after input {int(inputs[r, c])}",
                f"target {int(targets[r, c])}",
            )
        )


# ---------------------------------------------------------------- perplexity
def diagnose_perplexity(perplexity_fn: Callable[[float], object], mean_nll: float) -> float:
    """Check that ``perplexity_fn(mean_nll)`` is a Python float and name the usual mistakes."""
    return diagnose_perplexity_value(perplexity_fn(mean_nll), mean_nll)


def diagnose_perplexity_value(got: object, mean_nll: float) -> float:
    """:func:`diagnose_perplexity` on the value that ``perplexity(mean_nll)`` returned."""
    name, value = f"perplexity({mean_nll})", got
    if isinstance(value, torch.Tensor):
        fail(
            f"{name} returned a tensor ({value!r}); return a Python float (math.exp, or "
            ".item() on a tensor)."
        )
    check(
        isinstance(value, (int, float)) and not isinstance(value, bool),
        expected_got(f"{name} should be a number.", "float", type(value).__name__),
    )
    expected = math.exp(mean_nll)
    if math.isclose(value, expected, rel_tol=1e-6):
        return float(value)
    if math.isclose(value, 2.0**mean_nll, rel_tol=1e-6):
        fail(
            f"{name} = 2 ** mean_nll: base 2 is for a loss in bits. Cross-entropy in PyTorch "
            "uses the natural logarithm (nats), so the perplexity is e ** mean_nll."
        )
    if math.isclose(value, math.exp(-mean_nll), rel_tol=1e-6):
        fail(
            f"{name} = exp(-mean_nll): that is the (geometric) mean probability of the correct "
            "token. The perplexity is its inverse, exp(+mean_nll)."
        )
    if math.isclose(value, mean_nll, rel_tol=1e-9):
        fail(f"{name} returned the loss itself; the perplexity is exp(mean_nll).")
    fail(expected_got(f"{name} is wrong.", expected, value, "perplexity = exp(mean NLL in nats)"))
    return float(value)


# ---------------------------------------------------------------- the model
RANDOM_VALUES = 0  # the seed of the values the model's parameters get before it is checked


def run_model(model: nn.Module, src: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Run ``model(src, mask)`` in eval mode without gradients and check the output's type.

    First every parameter gets its own random values, the same at every call (seed
    :data:`RANDOM_VALUES`): the checks that compare the model with a computation on its weights
    then tell one weight or bias from another (the decoder's bias starts at 0)."""
    randomise_parameters(model, RANDOM_VALUES)
    model.eval()
    with torch.no_grad():
        out = model(src, mask)
    return check_tensor(out, f"model(src of shape {tuple(src.shape)}, mask)")


def diagnose_logits_result(got: torch.Tensor, batch: int, length: int, ntokens: int) -> None:
    """What forward returned: shape (B, L, ntokens), a float dtype, and raw scores rather than
    probabilities."""
    check_tensor(got, "the output of forward", shape=(batch, length, ntokens))
    logits = got
    check(
        logits.is_floating_point(),
        expected_got("forward must return float logits.", "torch.float32", logits.dtype),
    )
    check(not bool(torch.isnan(logits).any()), "forward returned NaN values.")
    sums = logits.sum(dim=-1)
    if bool((logits >= 0).all()) and bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-4)):
        fail(
            "forward applies a softmax: its rows are probabilities (non-negative, summing to 1). "
            "Return the logits; nn.functional.cross_entropy applies log-softmax itself, and a "
            "second softmax squashes the scores and stalls training."
        )
    if bool((logits <= 0).all()) and bool(
        torch.allclose(logits.exp().sum(-1), torch.ones_like(sums), atol=1e-4)
    ):
        fail(
            "forward applies a log-softmax. Return the raw logits (cross_entropy normalises them)."
        )


def diagnose_causality(
    model: nn.Module, src: torch.Tensor, mask: torch.Tensor, ntokens: int, seed: int = 0
) -> None:
    """With the causal mask, changing the tokens after position t must not change logits <= t."""
    base = run_model(model, src, mask)
    others = (run_model(model, changed, mask) for changed in causality_inputs(src, ntokens, seed))
    diagnose_causality_result(base, others, lambda: run_model(model, src, None))


def causality_inputs(src: torch.Tensor, ntokens: int, seed: int = 0) -> Iterator[torch.Tensor]:
    """For t = 0 .. L-2: ``src`` with the tokens after position t replaced by random ones."""
    gen = torch.Generator().manual_seed(seed)
    length = src.size(1)
    for t in range(length - 1):
        changed = src.clone()
        changed[:, t + 1 :] = torch.randint(
            0, ntokens, (src.size(0), length - t - 1), generator=gen
        )
        yield changed


def diagnose_causality_result(
    got: torch.Tensor,
    others: Iterable[torch.Tensor],
    unmasked: Callable[[], torch.Tensor],
) -> None:
    """:func:`diagnose_causality` on the logits: ``got`` for ``src``, ``others`` for the inputs
    of :func:`causality_inputs` (all with the mask), ``unmasked()`` for ``src`` without it."""
    for t, other in enumerate(others):
        if not torch.allclose(got[:, : t + 1], other[:, : t + 1], atol=1e-5, rtol=1e-4):
            leak = (
                f"with the causal mask passed, changing the tokens after position {t} changed "
                f"the logits at positions <= {t}: the future leaks."
            )
            if torch.allclose(got, unmasked(), atol=1e-6, rtol=1e-6):
                fail(
                    f"The mask is ignored: {leak} The logits are the same with the mask and "
                    "without it. Pass src_mask to the encoder: "
                    "self.transformer_encoder(x, mask=src_mask)."
                )
            fail(
                f"The causal mask does not hold: {leak} Pass src_mask, as given, to the "
                "encoder: self.transformer_encoder(x, mask=src_mask)."
            )


def diagnose_positions(model: nn.Module, token: int, length: int, mask: torch.Tensor) -> None:
    """A row of one repeated token: without positions every position gives the same logits."""
    src = torch.full((1, length), token, dtype=torch.long)
    calls: list[int] = []
    hook = model.pos_encoder.register_forward_hook(lambda mod, args, out: calls.append(1))
    try:
        out = run_model(model, src, mask)[0]  # (L, V)
    finally:
        hook.remove()
    diagnose_positions_result(out, bool(calls))


def diagnose_positions_result(got: torch.Tensor, called: bool) -> None:
    """:func:`diagnose_positions` on the logits (L, V) of the repeated token; ``called``: whether
    ``pos_encoder`` ran."""
    out = got
    if bool(torch.allclose(out, out[:1].expand_as(out), atol=1e-5)):
        same = (
            "for a sequence of one repeated token, every position gets the same logits, so the "
            "model cannot tell positions apart."
        )
        if not called:
            fail(
                f"The positional encoding is skipped (pos_encoder is never called): {same} Add "
                "the position table with self.pos_encoder(x) after the embedding."
            )
        fail(
            f"No position information reaches the encoder: {same} Pass the scaled embeddings "
            "through self.pos_encoder and give its output to the encoder."
        )


def diagnose_scaling(model: nn.Module, src: torch.Tensor, mask: torch.Tensor) -> None:
    """If forward calls ``model.pos_encoder``, its input must be embedding(src) * sqrt(d_model).

    (Implementations that add the table another way are not checked here.)
    """
    seen = pos_encoder_inputs(model, src, mask)
    if not seen:
        return
    d_model = model.embedding.embedding_dim
    diagnose_scaling_result(seen[0], model.embedding.weight, src, d_model)


def pos_encoder_inputs(
    model: nn.Module, src: torch.Tensor, mask: torch.Tensor | None
) -> list[torch.Tensor]:
    """What ``model.pos_encoder`` receives while the model runs on ``src`` (empty: not called)."""
    seen: list[torch.Tensor] = []
    hook = model.pos_encoder.register_forward_hook(lambda mod, args, out: seen.append(args[0]))
    try:
        run_model(model, src, mask)
    finally:
        hook.remove()
    return seen


def diagnose_scaling_result(
    got: torch.Tensor, weight: torch.Tensor, src: torch.Tensor, d_model: int
) -> None:
    """:func:`diagnose_scaling` on what ``pos_encoder`` received (``got``), given the embedding's
    weight (ntokens, d_model)."""
    emb = weight.detach()[src]  # (B, L, D)
    got = got.detach()
    if got.shape == emb.shape and torch.allclose(got, emb, atol=1e-6):
        fail(
            "The embeddings are not scaled: multiply them by sqrt(d_model) before adding the "
            f"positional encoding (here sqrt({d_model}) = {math.sqrt(d_model):.3g}); otherwise "
            "the position table, of size about 1 per entry, drowns the small embeddings."
        )
    scaled = emb * math.sqrt(d_model)
    check(
        got.shape == scaled.shape and bool(torch.allclose(got, scaled, atol=1e-5, rtol=1e-5)),
        "The input of pos_encoder is not embedding(src) * sqrt(d_model).",
    )
