"""Assignment E's verdicts: the last token, the classifier, freezing, BERT's corruption and the
KV cache's attention step, checked on observations.

The inputs come from :mod:`course.e_pretraining.probe` (the visible cells' examples, or drawn
from the seed); what a classifier should output is recomputed here from the weights observed,
with this module's own copy of the given language model's forward pass.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course.e_pretraining import checks, probe
from course.probing import returned
from course.testcells import check, check_against_reference, check_number, check_tensor
from judge import core

IGNORE = checks.IGNORE


def one_per_case(got: object, cases: list) -> list:
    check(isinstance(got, list) and len(got) == len(cases), "not one observation per case")
    assert isinstance(got, list)
    return got


# ---------------------------------------------------------------- the given model, recomputed
def position_table(width: int, max_len: int = 5000) -> torch.Tensor:
    """The given sinusoidal table (max_len, D), computed as the given PositionalEncoding does."""
    position = torch.arange(max_len).unsqueeze(1)  # (max_len, 1)
    frequency = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
    table = torch.zeros(max_len, width)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


def reference_states(
    state: dict, width: int, heads: int, ids: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """The given TransformerLM's ``encode(ids, mask)`` (B, L, D), in eval mode, with the
    weights ``state`` (a classifier's state_dict: ``lm.embedding``, ``lm.transformer_encoder``)."""
    embedding = state["lm.embedding.weight"]
    dtype = embedding.dtype  # float32, unless the notebook changed the default dtype
    layer = nn.TransformerEncoderLayer(width, heads, 2 * width, 0.1, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(dtype)
    prefix = "lm.transformer_encoder."
    encoder.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    encoder.eval()
    with torch.no_grad():
        x = nn.functional.embedding(ids, embedding) * math.sqrt(width)  # (B, L, D)
        x = x + position_table(width)[: ids.size(1)].to(dtype)
        return encoder(x, mask=None if mask is None else mask.to(dtype))


# ---------------------------------------------------------------- the last real token
def last_token_visible(seed: int, got: object) -> None:
    """As the visible cell: the position-coded batch (4, 5, 6) with lengths [3, 1, 5, 4]."""
    lengths = torch.tensor(probe.VISIBLE_LENGTHS)
    checks.diagnose_last_token_result(returned(got, "last_token_states"), lengths, 5, 6)


def last_token_hidden(seed: int, got: object) -> None:
    """As the hidden cell, on six batches drawn from the seed: the positions taken (position-
    coded states), then the values on random float64 states, naming index -1 and index 0."""
    cases = probe.last_token_cases(seed)
    for (lengths, length, width, hidden), seen in zip(cases, one_per_case(got, cases), strict=True):
        result = returned(seen["positions"], "last_token_states")
        checks.diagnose_last_token_result(result, lengths, length, width)
        batch = lengths.numel()
        expected = torch.stack([hidden[b, lengths[b] - 1] for b in range(batch)])
        check_against_reference(
            returned(seen["random"], "last_token_states"),
            expected,
            f"last_token_states(hidden {tuple(hidden.shape)}, lengths {lengths.tolist()})",
            mistakes={
                "you took the last padded position (-1).": hidden[:, -1],
                "you took the first position.": hidden[:, 0],
            },
        )


# ---------------------------------------------------------------- the classifier
def _outputs(seen: dict, ids: torch.Tensor, lengths: torch.Tensor, n_classes: int) -> None:
    """checks.diagnose_classifier_output on the outputs the probe observed."""
    outputs = seen["outputs"]
    checks.diagnose_classifier_output_result(
        lambda key: returned(outputs[key], f"the classifier on the input '{key}'"),
        lambda: returned(seen["seen"], "the classifier, observed by checks.record_forward"),
        ids,
        lengths,
        n_classes,
    )


def classifier_visible(seed: int, got: object) -> None:
    """As the visible cell: the head of TransformerLM(50, 16, ...) and the padding,
    sentence-alone and last-word checks of its logits on the cell's batch."""
    assert isinstance(got, dict)
    checks.diagnose_head_facts(got["head"], d_model=16, vocab=50, n_classes=2)
    ids = check_tensor(got["ids"], "the visible batch", shape=(4, 5), dtype=torch.long)
    _outputs(got, ids, torch.tensor(probe.VISIBLE_LENGTHS), 2)


def classifier_hidden(seed: int, got: object) -> None:
    """As the hidden cell, on three classifiers drawn from the seed: the head, the checks of the
    visible cell, the logits against the given model recomputed from the observed weights
    (naming a missing causal mask, index -1, index 0 and the mean), and gradients in the base."""
    cases = probe.classifier_cases(seed)
    for case, seen in zip(cases, one_per_case(got, cases), strict=True):
        vocab, width, n_classes = case["vocab"], case["width"], case["n_classes"]
        ids, lengths = case["ids"], case["lengths"]
        checks.diagnose_head_facts(seen["head"], width, vocab, n_classes)
        _outputs(seen, ids, lengths, n_classes)
        state = returned(seen["state"], "model.state_dict()")
        assert isinstance(state, dict)

        def head(x: torch.Tensor, state: dict = state) -> torch.Tensor:
            return nn.functional.linear(x, state["lm.decoder.weight"], state.get("lm.decoder.bias"))

        length = ids.size(1)
        causal = reference_states(state, width, case["heads"], ids, core.future_mask(length))
        without_mask = reference_states(state, width, case["heads"], ids, None)
        rows = torch.arange(ids.size(0))
        check_against_reference(
            seen["outputs"]["batch"],
            head(causal[rows, lengths - 1]),
            f"SentimentClassifier(V={vocab}, d_model={width}, n_classes={n_classes})(ids, lengths)",
            mistakes={
                "the base ran without the causal mask: it was pretrained with it, and the "
                "last token's state then depends on the padding.": head(
                    without_mask[rows, lengths - 1]
                ),
                "you took the last padded position (index -1).": head(causal[:, -1]),
                "you took the first position.": head(causal[:, 0]),
                "you averaged the positions.": head(causal.mean(1)),
            },
            atol=1e-5,
        )
        no_grad = returned(seen["without_gradient"], "model(ids, lengths).sum().backward()")
        assert isinstance(no_grad, list)
        check(
            not any(n.startswith(("lm.embedding", "lm.transformer")) for n in no_grad),
            "No gradient reached the base: fine-tuning must be able to train it (no "
            "torch.no_grad() or .detach() in forward).",
        )


# ---------------------------------------------------------------- freezing and counting
def freeze_visible(seed: int, got: object) -> None:
    """As the visible cell: only the head of the frozen classifier requires a gradient, and the
    count of the module with a known answer (16)."""
    assert isinstance(got, dict)
    checks.diagnose_frozen_facts(got["frozen"])
    checks.diagnose_count_value(got["counted"])


def freeze_hidden(seed: int, got: object) -> None:
    """As the hidden cell, on two classifiers drawn from the seed: the known count, the head,
    the count before freezing (every parameter observed), the frozen flags, the count after
    (the head's d_model * n_classes + n_classes) and a training step that moves the head only."""
    assert isinstance(got, dict)
    checks.diagnose_count_value(returned(got["counted"], "count_trainable_parameters"))
    cases = probe.freeze_cases(seed)
    for case, seen in zip(cases, one_per_case(got["cases"], cases), strict=True):
        vocab, width, n_classes = case["vocab"], case["width"], case["n_classes"]
        checks.diagnose_head_facts(seen["head"], width, vocab, n_classes)
        total = sum(math.prod(shape) for shape in seen["shapes"].values())
        check_number(
            returned(seen["count_before"], "count_trainable_parameters"),
            total,
            f"count_trainable_parameters before freezing (V={vocab}, d_model={width})",
        )
        returned(seen["freeze"], "freeze_base(model)")
        checks.diagnose_frozen_facts(returned(seen["frozen"], "the frozen model"))
        check_number(
            returned(seen["count_after"], "count_trainable_parameters"),
            width * n_classes + n_classes,
            f"count_trainable_parameters after freeze_base (d_model={width}, "
            f"n_classes={n_classes})",
            hint="the head Linear(d_model, n_classes) has d_model * n_classes weights + "
            "n_classes biases",
        )
        step = returned(seen["step"], "a training step of the frozen model")
        assert isinstance(step, dict)
        before, after = step["before"], step["after"]
        moved = [n for n in before if not torch.equal(after[n], before[n])]
        check(
            bool(moved) and all(n.startswith("lm.decoder") for n in moved),
            f"After a training step of the frozen model these parameters moved: {moved}. Only "
            "the head (lm.decoder) should.",
        )


# ---------------------------------------------------------------- BERT's corruption
def mask_visible(seed: int, got: object) -> None:
    """As the visible cell: the statistical checks on its 32,768 positions (vocabulary 1000,
    generator seed 1), then reproducibility with generator seeds 11, 11, 12 and None."""
    assert isinstance(got, dict)
    original = checks.mask_tokens_input(1000, 0)
    checks.diagnose_mask_tokens_result(got["result"], got["ids"], original, 1000)
    runs = got["generator"]
    checks.diagnose_mask_generator_result(lambda i: returned(runs[i], "mask_tokens"))


def mask_hidden(seed: int, got: object) -> None:
    """As the hidden cell, with inputs from the seed: the statistical checks with another
    vocabulary, then two vocabularies and probabilities (the 80/10/10 shares to the cell's
    tolerances, the input unchanged, labels and inputs consistent), then a 1-D sequence."""
    assert isinstance(got, dict)
    vocab, ids_seed, _ = probe.mask_check_case(seed)
    original = checks.mask_tokens_input(vocab, ids_seed, probe.MASK_SHAPE)
    result = returned(got["check"]["result"], "mask_tokens")
    checks.diagnose_mask_tokens_result(result, got["check"]["ids"], original, vocab)
    cases = probe.mask_cases(seed)
    for (vocab, p, copy, _), seen in zip(cases, one_per_case(got["cases"], cases), strict=True):
        inputs, labels = returned(seen["result"], "mask_tokens")
        check(torch.equal(seen["ids"], copy), "mask_tokens modified its input.")
        shares = checks.mlm_shares(copy, inputs, labels, 3)
        check(
            abs(shares["chosen"] - p) < 0.01,
            f"With mlm_probability={p}, {shares['chosen']:.3f} of the positions were chosen.",
        )
        check(
            abs(shares["mask"] - 0.8) < 0.03
            and abs(shares["random"] - 0.1 * (1 - 1 / vocab)) < 0.025
            and abs(shares["kept"] - 0.1 * (1 + 1 / vocab)) < 0.025,
            f"With vocab_size={vocab}, mlm_probability={p}: shares among chosen positions "
            f"{ {k: round(v, 3) for k, v in shares.items()} }, expected about 0.8 mask, 0.1 "
            "random, 0.1 unchanged.",
        )
        check(
            torch.equal(labels[labels != IGNORE], copy[labels != IGNORE])
            and torch.equal(inputs[labels == IGNORE], copy[labels == IGNORE]),
            "Labels must be the original ids at chosen positions, and the other inputs unchanged.",
        )
    _, ids, _ = probe.mask_line_case(seed)
    inputs, labels = returned(got["line"], "mask_tokens")
    check(inputs.shape == ids.shape and labels.shape == ids.shape, "1-D input: wrong shapes.")
    check(
        abs((labels != IGNORE).float().mean().item() - 0.15) < 0.015,
        "1-D input: wrong share chosen.",
    )


# ---------------------------------------------------------------- the KV cache
def _attend(scores: torch.Tensor, allowed: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Each query's softmax over the keys it may see (``allowed``), then the sum of the values."""
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ values


def stepped_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Causal attention over a sequence (B, H, L, dh), which stepping with a cache must give at
    every position, and what the usual mistakes of attention_step give instead."""
    length, width = q.size(2), q.size(3)
    scores = q @ k.transpose(-2, -1)  # (B, H, L, L): query t, key j
    t = torch.arange(length).view(length, 1)
    j = torch.arange(length).view(1, length)
    n_keys = torch.arange(1, length + 1, dtype=q.dtype).view(length, 1)  # t + 1 keys at step t
    scaled = scores / math.sqrt(width)
    return _attend(scaled, j <= t, v), {
        "the scores are not scaled (divide q.k by sqrt(dh)).": _attend(scores, j <= t, v),
        "the scores are divided by sqrt(T), the square root of the number of keys, instead of "
        "sqrt(dh).": _attend(scores / n_keys.sqrt(), j <= t, v),
        "every step attended to its own key only: the cache was not updated.": v,
        "softmax over the wrong axis: every weight is 1.": v.cumsum(dim=2),
        "the new key was left out: each query attended to the cache only.": _attend(
            scaled, (j < t) | (j + t == 0), v
        ),
        "a causal mask hid the cached keys: each new query saw the first key only.": v[
            :, :, :1
        ].expand_as(v),
    }


def attention_step_visible(seed: int, got: object) -> None:
    """As the visible cell: the readable step (B=2, H=3, a cache of 5, dh=8), then a sequence
    of 6 positions fed one at a time against causal attention over the whole sequence."""
    assert isinstance(got, dict)
    inputs = checks.readable_step_inputs(*probe.VISIBLE_STEP, seed=0)
    checks.diagnose_attention_step_result(returned(got["step"], "attention_step"), *inputs)
    q, k, v = checks.sequence_inputs(*probe.VISIBLE_SEQUENCE, seed=0)
    out = checks.diagnose_steps_result(returned(got["steps"], "attention_step"), q, k, v)
    expected, _ = stepped_attention(q, k, v)
    check_against_reference(
        out, expected, "attention_step, one position at a time (B=2, H=3, L=6, dh=8)"
    )


def attention_step_hidden(seed: int, got: object) -> None:
    """As the hidden cell, with sizes and inputs from the seed: three readable steps (one with
    cache=None), then two float64 sequences fed one at a time against causal attention, naming
    the usual mistakes."""
    assert isinstance(got, dict)
    cases = probe.step_cases(seed)
    for case, seen in zip(cases, one_per_case(got["steps"], cases), strict=True):
        inputs = checks.readable_step_inputs(*case)
        checks.diagnose_attention_step_result(returned(seen, "attention_step"), *inputs)
    cases = probe.sequence_cases(seed)
    for case, seen in zip(cases, one_per_case(got["sequences"], cases), strict=True):
        batch, heads, length, width, case_seed = case
        q, k, v = checks.sequence_inputs(batch, heads, length, width, case_seed, torch.float64)
        out = checks.diagnose_steps_result(returned(seen, "attention_step"), q, k, v)
        expected, mistakes = stepped_attention(q, k, v)
        check_against_reference(
            out,
            expected,
            f"attention_step, one position at a time (B={batch}, H={heads}, L={length}, "
            f"dh={width})",
            mistakes=mistakes,
        )
