"""Checks for assignment F (attention exploration): they test what a construction does.

Every check calls the student's function on the keys (or vectors) it is given, runs attention
with the result and compares the read-out ``c`` with its target, with tolerances. None of them
builds a query or a matrix itself: they accept any construction that does the job, and when it
does not, they look for the usual reasons (a scale too small, a construction tied to the
standard basis, the same query for both heads, ...) and name them. The checks of the
synthesizer (a module, compared by value) are in ``synthesizer_checks``, re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from course.f_attention_exploration.experiments import (
    attend,
    attention_weights,
    sample_keys,
    spread_experiment,
)
from course.f_attention_exploration.synthesizer_checks import (  # noqa: F401 - re-exported
    SYNTHESIZER_MISTAKES,
    diagnose_synthesizer,
    judge_synthesizer_behaviour,
    judge_synthesizer_parts,
    observe_synthesizer,
    synthesizer_cases,
    synthesizer_hand_case,
    synthesizer_name,
    synthesizer_with,
)
from course.testcells import check, check_tensor, expected_got, fail

ALPHA = 1e-8  # the noise of the noisy-key exercises
SAMPLES = 500  # draws of the keys per check
TOL = 0.01  # |c - target| allowed for noiseless keys (values are unit vectors)


def _query(value: object, name: str, d: int) -> torch.Tensor:
    q = check_tensor(value, name, shape=(d,))
    check(q.is_floating_point(), expected_got(f"{name} must be a float tensor.", "float", q.dtype))
    check(bool(torch.isfinite(q).all()), f"{name} contains NaN or infinite values.")
    return q.detach().to(torch.float64)


def _weights_text(weights: torch.Tensor, wanted: list[int]) -> str:
    shown = ", ".join(f"alpha_{i} = {weights[i].item():.3f}" for i in wanted)
    others = 1.0 - sum(weights[i].item() for i in wanted)
    return f"{shown}, all other keys together {others:.3f}"


def _works_on_standard_basis(build: Callable[[torch.Tensor], torch.Tensor], target_ok) -> bool:
    try:
        return bool(target_ok(build))
    except Exception:  # the student's function may fail on other inputs: not our diagnosis
        return False


def diagnose_read_out(
    function: Callable,
    name: str,
    keys: torch.Tensor,
    values: torch.Tensor,
    wanted: list[int],
) -> None:
    """Check ``function(keys, *wanted)`` (a query) makes attention read the mean of ``v_wanted``.

    ``wanted`` is ``[j]`` for copying and ``[a, b]`` for an average of two; ``keys`` are
    orthonormal rows ``(n, d)``, ``values`` ``(n, dv)`` unit rows.
    """
    n, d = keys.shape
    call = f"{name}(keys, {', '.join(map(str, wanted))})"
    diagnose_read_out_result(
        function(keys.clone(), *wanted),
        call,
        keys,
        values,
        wanted,
        lambda: function(torch.eye(d)[:n].clone(), *wanted),
    )


def diagnose_read_out_result(
    got: object,
    call: str,
    keys: torch.Tensor,
    values: torch.Tensor,
    wanted: list[int],
    on_standard_basis: Callable[[], object],
) -> None:
    """:func:`diagnose_read_out` on the query ``call`` returned.

    ``on_standard_basis()`` gives the query built for the keys ``torch.eye(d)[:n]`` (the same
    ``wanted``); it is asked for only when the read-out is wrong, to name a query tied to the
    standard basis.
    """
    n, d = keys.shape
    q = _query(got, call, d)
    target = values.to(torch.float64)[wanted].mean(0)
    c = attend(q, keys, values)
    error = (c - target).norm().item()
    if error <= TOL:
        return
    weights = attention_weights(q, keys)
    goal = "alpha_j close to 1" if len(wanted) == 1 else "alpha_a and alpha_b both close to 1/2"
    what = (
        f"{call} gives |c - target| = {error:.3f} (allowed {TOL}) with {n} random orthonormal "
        f"keys in dimension {d}. Weights: {_weights_text(weights, wanted)}; the goal is {goal}."
    )
    if _tied_to_standard_basis(on_standard_basis, wanted, n, d):
        fail(
            what + " Your query works only for the standard basis: with the keys e_1, e_2, ... "
            "it reads the right values, with these keys it does not. It is built from one-hot "
            "vectors (torch.eye, e_j) instead of from the keys you are given; build q from "
            "keys[j] (the rows of `keys`)."
        )
    _diagnose_read_out_weights(q, weights, wanted, what)


def _diagnose_read_out_weights(
    q: torch.Tensor, weights: torch.Tensor, wanted: list[int], what: str
) -> None:
    """Why the query ``q`` gives the wrong ``weights``: one key only of two, unequal scores, a
    scale too small, a one-hot query. ``what`` opens every message."""
    others = weights.clone()
    others[wanted] = 0.0
    leak = others.sum().item()  # the weight of all the keys that should get none
    leading = all(bool(weights[i] > others.max()) for i in wanted)
    if len(wanted) == 2 and not leading and max(weights[i].item() for i in wanted) > 0.9:
        fail(what + " Only one of the two keys gets the weight: the two scores must be equal.")
    problems = []
    if len(wanted) == 2 and leading and abs(weights[wanted[0]] - weights[wanted[1]]) > 0.005:
        problems.append(
            "the two wanted keys get different weights: give k_a and k_b the same score "
            "k^T q, so that the softmax splits the weight evenly"
        )
    if leading and leak > 0.005:
        problems.append(
            "the right keys lead, but the scale is too small: the other keys still get "
            f"{leak:.3f} of the weight together (the softmax of scores that differ by a few "
            "units is far from one-hot). Multiply the query by a large scale s: the others' "
            "weights shrink like e^-s"
        )
    if problems:
        joined = "; and ".join(problems)
        fail(f"{what} {joined[0].upper()}{joined[1:]}.")
    count = int((q.abs() > 1e-9 * q.abs().max().clamp_min(1e-30)).sum())
    if 1 <= count <= len(wanted):
        fail(
            what + f" Your query has only {count} non-zero coordinate(s), like a one-hot "
            "vector (torch.eye, e_j): the keys are random orthonormal vectors, not the standard "
            "basis. Build q from keys[j] (the rows of `keys`)."
        )
    fail(what + " The attention does not pick the wanted keys: check which keys q points at.")


def _tied_to_standard_basis(
    on_standard_basis: Callable[[], object], wanted: list[int], n: int, d: int
) -> bool:
    """True when the query built for the standard basis as keys reads the right values there."""
    keys = torch.eye(d)[:n]
    values = torch.eye(d)[torch.arange(n).flip(0)]

    def ok(_: object) -> bool:
        q = on_standard_basis().detach().to(torch.float64)
        target = values.to(torch.float64)[wanted].mean(0)
        return (attend(q, keys, values) - target).norm().item() <= TOL

    return _works_on_standard_basis(lambda k: k, ok)


def _quantile(x: torch.Tensor, p: float) -> float:
    return torch.quantile(x, p).item()


def diagnose_noisy_average(
    function: Callable,
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
    alpha: float = ALPHA,
    samples: int = SAMPLES,
    seed: int = 0,
) -> None:
    """Check ``function(means, a, b)`` over noisy keys ``k_i ~ N(mu_i, alpha I)``
    (the notebook writes the noise variance alpha as sigma^2).

    Over ``samples`` draws the read-out must stay near ``(v_a + v_b)/2``: median distance
    at most 0.03 and 90 % of the draws within 0.08.
    """
    diagnose_noisy_average_result(
        function(means.clone(), a, b), means, values, a, b, alpha, samples, seed
    )


def diagnose_noisy_average_result(
    got: object,
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
    alpha: float = ALPHA,
    samples: int = SAMPLES,
    seed: int = 0,
) -> None:
    """:func:`diagnose_noisy_average` on the query ``query_for_average_noisy(means, a, b)``
    returned."""
    n, d = means.shape
    call = f"query_for_average_noisy(means, {a}, {b})"
    q = _query(got, call, d)
    generator = torch.Generator().manual_seed(seed)
    keys = sample_keys(means, alpha, samples, generator=generator)
    values64 = values.to(torch.float64)
    target = (values64[a] + values64[b]) / 2
    distance = (attend(q.expand(samples, -1), keys, values64) - target).norm(dim=-1)
    median, high = _quantile(distance, 0.5), _quantile(distance, 0.9)
    if median <= 0.03 and high <= 0.08:
        return
    what = (
        f"Over {samples} draws of the keys (noise variance sigma^2 = {alpha:g}, n = {n}, d = {d}), "
        f"|c - (v_a + v_b)/2| has median {median:.3f} (allowed 0.03) and 90th percentile "
        f"{high:.3f} (allowed 0.08)."
    )
    weights = attention_weights(q, means)
    others = 1.0 - weights[a].item() - weights[b].item()
    balanced = abs(weights[a].item() - weights[b].item()) <= 0.02
    # The direction of q alone, at a moderate scale (a huge scale turns even rounding errors
    # of the means into unequal scores).
    moderate = attention_weights(q * (70.0 / q.norm().clamp_min(1e-30)), means)
    aimed = abs(moderate[a].item() - moderate[b].item()) <= 0.02
    aimed = aimed and moderate[a].item() + moderate[b].item() >= 0.99
    noise = q.norm().item() * alpha**0.5  # typical change of a score from the noise
    if aimed and noise > 0.05:
        fail(
            what + " Your query points at k_a and k_b equally (its direction is right), "
            f"but your scale is too large: the noise moves each score by about "
            f"|q| sigma = {noise:.3g}, and when that is not small the softmax flips "
            "between k_a and k_b. Keep s large compared with log(n) but small compared with "
            "1/sigma (here s between 20 and 200 is safe)."
        )
    if not balanced and weights[a] + weights[b] > 0.5:
        fail(
            what + " Even with keys = means the weights are "
            f"{_weights_text(weights, [a, b])}: the two scores must be equal."
        )
    if balanced and others > 0.01:
        fail(
            what + " Even with keys = means the weights are "
            f"{_weights_text(weights, [a, b])}: the scale is too small."
        )
    fail(what + f" With keys = means the weights are {_weights_text(weights, [a, b])}.")


def diagnose_two_heads(
    function: Callable,
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
    alpha: float = ALPHA,
    samples: int = SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Check ``function(means, a, b) -> (q1, q2)`` with key ``a`` stretched.

    Key ``a`` has covariance ``alpha I + 1/2 mu_a mu_a^T``. The two heads' outputs, averaged,
    must stay near ``(v_a + v_b)/2``: the projection of ``c - (v_a + v_b)/2`` on
    ``(v_a - v_b)/|v_a - v_b|`` has a median within 0.05 of 0 and an interquartile range (the
    spread) at most 0.1, and at least 75 % of the draws lie within 0.1 of the average (the
    stretched key points backwards in about 8 % of the draws: no query can help then).
    Returns (median, spread).
    """
    return diagnose_two_heads_result(
        function(means.clone(), a, b), means, values, a, b, alpha, samples, seed
    )


def diagnose_two_heads_result(
    got: object,
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
    alpha: float = ALPHA,
    samples: int = SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """:func:`diagnose_two_heads` on ``got = two_head_queries(means, a, b)``."""
    n, d = means.shape
    call = f"two_head_queries(means, {a}, {b})"
    check(
        isinstance(got, (tuple, list)) and len(got) == 2,
        expected_got(f"{call} must return two queries (q1, q2).", "a tuple of 2 tensors", got),
    )
    q1, q2 = (_query(q, f"{call}[{i}]", d) for i, q in enumerate(got))
    projection = spread_experiment([q1, q2], means, values, a, b, alpha, samples, seed)
    generator = torch.Generator().manual_seed(seed)
    keys = sample_keys(means, alpha, samples, stretched=a, generator=generator)
    values64 = values.to(torch.float64)
    c = (
        attend(q1.expand(samples, -1), keys, values64)
        + attend(q2.expand(samples, -1), keys, values64)
    ) / 2
    near = ((c - (values64[a] + values64[b]) / 2).norm(dim=-1) <= 0.1).double().mean().item()
    median = _quantile(projection, 0.5)
    spread = _quantile(projection, 0.75) - _quantile(projection, 0.25)
    if abs(median) <= 0.05 and spread <= 0.1 and near >= 0.75:
        return median, spread
    what = (
        f"Over {samples} draws of the keys (key {a} stretched, sigma^2 = {alpha:g}, n = {n}, "
        f"d = {d}), the two-head output c along (v_a - v_b) has median {median:+.3f} (allowed "
        f"+-0.05) and spread (interquartile range) {spread:.3f} (allowed 0.1); {near:.0%} of "
        "the draws are within 0.1 of (v_a + v_b)/2 (75 % needed)."
    )
    if torch.allclose(q1, q2, rtol=1e-3, atol=1e-9 * float(q1.abs().max())):
        fail(
            what + " Both heads use the same query, so the average of the two heads is just "
            "one head again: the stretched key still wins or loses against k_b from draw to "
            "draw. Give each head its own key to look at."
        )
    w1, w2 = attention_weights(q1, means), attention_weights(q2, means)
    if spread > 0.1 and any(bool(w[a] > 0.2) and bool(w[b] > 0.2) for w in (w1, w2)):
        fail(
            what + " The output swings between v_a and v_b: one of your heads scores both "
            "k_a and k_b, so it compares their lengths, which change from draw to draw."
        )
    if max(w1[a], w2[a]) < 0.9 or max(w1[b], w2[b]) < 0.9:
        if {int(w1.argmax()), int(w2.argmax())} == {a, b}:
            fail(
                what + " Each head points at one of k_a, k_b, but not sharply enough (weights "
                f"{max(w1[a], w2[a]):.2f} on k_a and {max(w1[b], w2[b]):.2f} on k_b with "
                "keys = means): the scale is too small."
            )
        fail(what + " Between them the heads must pick k_a (one head) and k_b (the other).")
    fail(what)


def diagnose_kqv(function: Callable, us: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Check ``function(u_a, u_b, u_c, u_d) -> (K, Q, V)`` on orthogonal rows ``us`` (4, d).

    With x1 = u_d + u_b, x2 = u_a, x3 = u_c + u_b, k_i = K x_i, q_i = Q x_i, v_i = V x_i and
    c_i = sum_j softmax_j(k_j^T q_i) v_j, the check wants |c2 - u_b| and |c1 - (u_b - u_c)|
    at most 0.02 beta (beta = |u|). Returns (c1, c2).
    """
    d = us.shape[1]
    beta = us[0].norm().item()
    eye_us = beta * torch.eye(d)[:4]
    return diagnose_kqv_result(function(*us.clone()), us, lambda: function(*eye_us.clone()))


def diagnose_kqv_result(
    got: object, us: torch.Tensor, on_standard_basis: Callable[[], object]
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`diagnose_kqv` on ``got = kqv_matrices(*us)``.

    ``on_standard_basis()`` gives ``kqv_matrices`` of ``beta * torch.eye(d)[:4]`` (beta = |u|);
    it is asked for only when ``got`` is wrong, to name a construction tied to the standard
    basis.
    """
    d = us.shape[1]
    beta = us[0].norm().item()
    check(
        isinstance(got, (tuple, list)) and len(got) == 3,
        expected_got("kqv_matrices must return (K, Q, V).", "a tuple of 3 tensors", got),
    )
    mats = [check_tensor(m, name, shape=(d, d)) for m, name in zip(got, "KQV", strict=True)]
    for m, name in zip(mats, "KQV", strict=True):
        check(bool(torch.isfinite(m).all()), f"{name} contains NaN or infinite values.")
    c1, c2, error1, error2 = _kqv_errors(mats, us)
    if error1 <= 0.02 and error2 <= 0.02:
        return c1, c2
    what = (
        f"With beta = {beta:.3g} and d = {d}: |c2 - u_b| / beta = {error2:.3f} and "
        f"|c1 - (u_b - u_c)| / beta = {error1:.3f} (each must be at most 0.02)."
    )
    transposed = _kqv_errors([m.T for m in mats], us)
    if transposed[2] <= 0.02 and transposed[3] <= 0.02:
        fail(
            what + " Your matrices work when transposed: here keys are k_i = K x_i (a matrix "
            "times a column vector), not x_i^T K."
        )
    eye_us = beta * torch.eye(d)[:4]
    try:
        on_eye = _kqv_errors([m for m in on_standard_basis()], eye_us)
        if on_eye[2] <= 0.02 and on_eye[3] <= 0.02:
            fail(
                what + " Your construction works only for the standard basis (u_a = beta e_1, "
                "...): build K, Q and V from the vectors u_a, u_b, u_c, u_d you are given "
                "(outer products such as u_b u_b^T / beta^2)."
            )
    except (RuntimeError, TypeError, ValueError, IndexError):
        pass
    if error2 <= 0.02:
        fail(
            what + " c2 is right but c1 is not: x1 must attend to x3 (whose value should be "
            "u_b - u_c) while x2 attends to x1 (whose value should be u_b)."
        )
    fail(
        what + " Check the values first (V x1 = u_b, V x3 = u_b - u_c), then the scores: "
        "q2 must score k1 far above k2 and k3 (a gap of many units, not about 1)."
    )


def _kqv_errors(
    mats: list[torch.Tensor], us: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    k, q, v = (m.detach().to(torch.float64) for m in mats)
    u_a, u_b, u_c, u_d = us.to(torch.float64)
    x = torch.stack([u_d + u_b, u_a, u_c + u_b])  # (3, d), rows x1, x2, x3
    keys, queries, vals = x @ k.T, x @ q.T, x @ v.T
    c = torch.softmax(queries @ keys.T, dim=-1) @ vals
    beta = u_a.norm()
    error1 = ((c[0] - (u_b - u_c)).norm() / beta).item()
    error2 = ((c[1] - u_b).norm() / beta).item()
    return c[0], c[1], error1, error2


BLOCKS = ("encoder_self", "decoder_encoder", "decoder_self")


def check_counts(
    got: object,
    expected: Mapping[str, int],
    call: str,
    mistakes: Mapping[str, Mapping[int, str]] | None = None,
) -> None:
    """Check ``got``, a dict of operation counts, against ``expected``; name a known wrong count.

    ``mistakes`` maps a block to {wrong count: message naming the mistake}.
    """
    counts = got
    check(
        isinstance(counts, Mapping),
        expected_got(f"{call} must return a dict.", "dict", type(counts).__name__),
    )
    assert isinstance(counts, Mapping)
    check(
        set(counts) == set(BLOCKS),
        expected_got(f"{call} has the wrong keys.", sorted(BLOCKS), sorted(map(str, counts))),
    )
    for block in BLOCKS:
        value = counts[block]
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        check(
            isinstance(value, (int, float)) and not isinstance(value, bool),
            expected_got(f"{call}['{block}'] must be a number.", "int", type(value).__name__),
        )
        if value == expected[block]:
            continue
        known = (mistakes or {}).get(block, {})
        hint = known.get(int(value), "") if float(value).is_integer() else ""
        fail(expected_got(f"{call}['{block}'] is wrong.", expected[block], value, hint))
