"""Assignment F's verdicts: queries, heads, K/Q/V matrices, counts and the synthesizer.

Every item runs the check of its test cell (``course.f_attention_exploration.checks``) on what
the student's functions returned, with the keys, values and noise regenerated here. Where a check
would call the student's function again to name a mistake (on the standard basis), it gets the
answer the probe observed there instead. The synthesizer's outputs are compared with
:func:`reference_synthesizer` on the weights the kernel recorded, each known mistake named by
computing what it gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from course.f_attention_exploration import checks, probe
from course.f_attention_exploration.experiments import spread_experiment
from course.probing import returned
from course.testcells import check, check_against_reference, check_close

HALF = "half the count: add QK^T and weights @ V."


def _observed(value: object) -> Callable[[], object]:
    """A callable that gives an observed answer, as the checks ask for it."""
    return lambda: value


def _observed_matrices(value: object) -> Callable[[], object]:
    """As :func:`_observed`, raising TypeError (as the check's own call may) unless tensors."""

    def matrices() -> object:
        if not isinstance(value, list) or not all(isinstance(m, torch.Tensor) for m in value):
            raise TypeError("kqv_matrices did not return tensors on the standard basis")
        return value

    return matrices


def _each(got: object, cases: list, what: str) -> list:
    check(isinstance(got, list) and len(got) == len(cases), f"not one {what} per case")
    assert isinstance(got, list)
    return got


# ---------------------------------------------------------------- copying and averaging
def _read_out(
    got: object, name: str, keys: torch.Tensor, values: torch.Tensor, wanted: list[int]
) -> None:
    assert isinstance(got, dict)
    call = f"{name}(keys, {', '.join(map(str, wanted))})"
    basis = _observed(got["basis"])
    checks.diagnose_read_out_result(got["query"], call, keys, values, wanted, basis)


def _read_out_pair(
    function: str, visible: tuple, cases: Callable, wanted: Callable
) -> tuple[Callable, Callable]:
    """The visible and hidden verdicts of a read-out cell (``function(keys, a...)``): on the
    cell's basis ``visible`` (cell seed, wanted rows), then on each of ``cases(seed)``, whose
    last item ``wanted`` turns into the rows to read."""

    def visible_verdict(seed: int, got: object) -> None:
        cell_seed, rows = visible
        _read_out(got, function, *probe.visible_basis(cell_seed), rows)

    def hidden_verdict(seed: int, got: object) -> None:
        drawn = cases(seed)
        for (keys, values, last), seen in zip(drawn, _each(got, drawn, "query"), strict=True):
            _read_out(seen, function, keys, values, wanted(last))

    return visible_verdict, hidden_verdict


copy_visible, copy_hidden = _read_out_pair(
    "query_to_copy", probe.VISIBLE_COPY, probe.copy_cases, lambda j: [j]
)
average_visible, average_hidden = _read_out_pair(
    "query_for_average", probe.VISIBLE_AVERAGE, probe.average_cases, lambda rows: rows
)


# ---------------------------------------------------------------- noisy keys, two heads
def _noisy_pair(
    diagnose: Callable, visible: tuple, cases: Callable, what: str, then: Callable | None = None
) -> tuple[Callable, Callable]:
    """The visible and hidden verdicts of a cell on noisy keys: ``diagnose(got, means, values,
    a, b)`` on the cell's basis ``visible`` (cell seed, (a, b)), then on each of ``cases(seed)``
    with its noise seed, followed by ``then(result, means, values, a, b, noise)`` if given."""

    def visible_verdict(seed: int, got: object) -> None:
        cell_seed, (a, b) = visible
        diagnose(got, *probe.visible_basis(cell_seed), a, b)

    def hidden_verdict(seed: int, got: object) -> None:
        drawn = cases(seed)
        for (means, values, a, b, noise), seen in zip(drawn, _each(got, drawn, what), strict=True):
            result = diagnose(seen, means, values, a, b, seed=noise)
            if then is not None:
                then(result, means, values, a, b, noise)

    return visible_verdict, hidden_verdict


def _narrower_than_one_head(result: tuple, means, values, a: int, b: int, noise: int) -> None:
    """As the hidden cell: the two heads' spread far below that of one head s (mu_a + mu_b)."""
    _, spread = result
    one_head = [50.0 * (means[a] + means[b])]
    single = spread_experiment(one_head, means, values, a, b, checks.ALPHA, seed=noise)
    single_spread = (torch.quantile(single, 0.75) - torch.quantile(single, 0.25)).item()
    check(
        spread < 0.2 * single_spread,
        f"The two heads' spread {spread:.3f} is not much smaller than one head's "
        f"{single_spread:.3f}.",
    )


noisy_visible, noisy_hidden = _noisy_pair(
    checks.diagnose_noisy_average_result, probe.VISIBLE_NOISY, probe.noisy_cases, "query"
)
two_heads_visible, two_heads_hidden = _noisy_pair(
    checks.diagnose_two_heads_result,
    probe.VISIBLE_TWO_HEADS,
    probe.two_heads_cases,
    "pair",
    then=_narrower_than_one_head,
)


# ---------------------------------------------------------------- key, query, value matrices
def _kqv(got: object, us: torch.Tensor) -> None:
    assert isinstance(got, dict)
    checks.diagnose_kqv_result(got["out"], us, _observed_matrices(got["basis"]))


def kqv_visible(seed: int, got: object) -> None:
    _kqv(got, probe.visible_us())


def kqv_hidden(seed: int, got: object) -> None:
    cases = probe.kqv_cases(seed)
    for us, seen in zip(cases, _each(got, cases, "(K, Q, V)"), strict=True):
        _kqv(seen, us)


# ---------------------------------------------------------------- counts
def reference_flops(m: int, n: int, k: int) -> dict[str, int]:
    """Multiply-adds of QK^T plus weights @ V: 2 L_q L_k k per block."""
    return {
        "encoder_self": 2 * m * m * k,
        "decoder_encoder": 2 * n * m * k,
        "decoder_self": 2 * n * n * k,
    }


def _unambiguous(pairs: list[tuple[int, str]]) -> dict[int, str]:
    """{wrong count: message}, leaving out a count that two mistakes would both give."""
    counts = [count for count, _ in pairs]
    return {count: message for count, message in pairs if counts.count(count) == 1}


def flops_visible(seed: int, got: object) -> None:
    m, n, k = probe.VISIBLE_FLOPS
    half = "half the count: add both products, QK^T and weights @ V."
    checks.check_counts(
        got,
        reference_flops(m, n, k),
        f"attention_flops({m}, {n}, {k})",
        {
            "encoder_self": {
                2 * m * n * k: "2*M*N*k is the cross-attention count: in encoder self-attention "
                "each of the M source queries meets all M source keys (M^2 pairs).",
                m * m * k: half,
            },
            "decoder_encoder": {n * m * k: half},
            "decoder_self": {
                2 * m * m * k: "the decoder's self-attention pairs target with target: N^2, "
                "not M^2.",
                n * n * k: half,
            },
        },
    )


def flops_hidden(seed: int, got: object) -> None:
    cases = probe.flops_cases(seed)
    for (m, n, k), seen in zip(cases, _each(got, cases, "dict of counts"), strict=True):
        expected = reference_flops(m, n, k)
        cross = (
            "2*M*N*k is the cross-attention count: encoder self-attention pairs the M source "
            "tokens with themselves (M^2)."
        )
        checks.check_counts(
            seen,
            expected,
            f"attention_flops({m}, {n}, {k})",
            {
                "encoder_self": _unambiguous(
                    [(2 * m * n * k, cross), (expected["encoder_self"] // 2, HALF)]
                ),
                "decoder_encoder": {expected["decoder_encoder"] // 2: HALF},
                "decoder_self": _unambiguous(
                    [
                        (2 * m * m * k, "decoder self-attention is N^2, not M^2."),
                        (expected["decoder_self"] // 2, HALF),
                    ]
                ),
            },
        )


# ---------------------------------------------------------------- the synthesizer
def reference_synthesizer(
    weights: dict, x: torch.Tensor, nhead: int, mistake: str | None = None
) -> torch.Tensor:
    """CS224N's dense synthesizer, causal, in float64, on the recorded weights; with
    ``mistake`` (a key of ``SYNTHESIZER_MISTAKES``), what that mistake computes instead."""
    w = {name: value.double() for name, value in weights.items()}
    x = x.double()
    b, length, width = x.shape

    def heads(z: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, H, T, D/H)
        if mistake == "HEADS_RESHAPED":
            return z.reshape(b, nhead, length, width // nhead)
        return z.view(b, length, nhead, width // nhead).transpose(1, 2)

    hidden = F.linear(x, w["w1.weight"], w["w1.bias"])
    hidden = hidden if mistake == "NO_RELU" else hidden.relu()
    scores = heads(hidden) @ w["w2"][:, :length]  # (B, H, T, T)
    scores = scores if mistake == "NO_B2" else scores + w["b2"][:length]
    divisor = {"SCALED": width // nhead, "SCALED_MODEL": width}.get(mistake or "", 1)
    scores = scores / math.sqrt(divisor)
    if mistake != "NO_MASK":
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    attention = torch.softmax(scores, dim=-2 if mistake == "SOFTMAX_QUERIES" else -1)
    value = x if mistake == "NO_VALUE" else F.linear(x, w["value.weight"], w["value.bias"])
    if mistake == "VALUE_NOT_SPLIT":
        merged = (attention @ value.unsqueeze(1)).mean(1)
    elif mistake == "MERGE_NO_TRANSPOSE":
        merged = (attention @ heads(value)).reshape(b, length, width)
    else:
        merged = (attention @ heads(value)).transpose(1, 2).reshape(b, length, width)
    if mistake == "NO_PROJ":
        return merged
    return F.linear(merged, w["proj.weight"], w["proj.bias"])


def _synthesizer_values(got: dict, case: dict) -> None:
    """The outputs against the reference, every known mistake named."""
    weights, x, nhead = got["weights"], case["x"], case["nhead"]
    with torch.no_grad():
        expected = reference_synthesizer(weights, x, nhead)
        mistakes = {
            message: reference_synthesizer(weights, x, nhead, key)
            for key, message in checks.SYNTHESIZER_MISTAKES.items()
        }
    name = checks.synthesizer_name(case)
    check_against_reference(got["out"], expected, name, mistakes, atol=1e-5, rtol=1e-4)


def synthesizer_visible(seed: int, got: object) -> None:
    """As the visible cell: the random case's parts and causality, the case by hand's values."""
    cases = [*checks.synthesizer_cases(0, hidden=False), checks.synthesizer_hand_case()]
    seen = _each(got, cases, "observation")
    checks.judge_synthesizer_behaviour(checks.judge_synthesizer_parts(seen[0], cases[0]), cases[0])
    hand = cases[1]
    out = returned(seen[1], checks.synthesizer_name(hand))
    assert isinstance(out, dict)
    expected = reference_synthesizer(hand["weights"], hand["x"], hand["nhead"])
    check_close(out["out"], expected, "SynthesizerAttention on the case by hand", atol=1e-5)


def synthesizer_hidden(seed: int, got: object) -> None:
    """As the hidden cell: parts, values against the reference, causality and dropout."""
    cases = checks.synthesizer_cases(seed, hidden=True)
    for case, seen in zip(cases, _each(got, cases, "observation"), strict=True):
        observed = checks.judge_synthesizer_parts(seen, case)
        _synthesizer_values(observed, case)
        checks.judge_synthesizer_behaviour(observed, case)
