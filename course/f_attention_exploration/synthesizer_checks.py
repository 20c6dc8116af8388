"""Checks of assignment F's ``SynthesizerAttention`` (CS224N assignment 5's dense synthesizer).

The module is built under a case's seed, every parameter given its own random values, and
observed (:func:`observe_synthesizer`): the facts the tests read of it (its layers, the shapes of
``w2`` and ``b2``, the ``tril`` buffer), its weights, its outputs in evaluation mode, its outputs
when only the last position changes and, for a case with dropout, its outputs in training mode.
The checks here judge what needs no reference: the parts (:func:`judge_synthesizer_parts`),
causality and dropout (:func:`judge_synthesizer_behaviour`). The values are compared with a
reference computed from the recorded weights where the reference lives (the notebook's hidden
cell, the trusted judge), with the mistakes of :data:`SYNTHESIZER_MISTAKES` named.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from course import probing
from course.probing import error_of, integer, linear_facts, returned, tril_facts
from course.testcells import (
    check,
    check_close,
    check_tensor,
    expected_got,
    fail,
    randomise_parameters,
)

# ---------------------------------------------------------------- the mistakes, named
NOT_SLICED = (
    "Sizes that do not match where T < block_size: w2 and b2 are block_size wide, the sequence "
    "is T long. Cut them to the sequence: relu(w1(x)) @ w2[:, :T] + b2[:T], and the mask "
    "tril[:, :, :T, :T]."
)
W2_PER_HEAD = (
    "one w2 serves every head, of shape (D/H, block_size) (CS224N's dense synthesizer also has "
    "one, block_size - 1 wide because its inputs are at most block_size - 1 long): each head "
    "multiplies its own D/H features of relu(w1(x)) by the same w2."
)
# key (the judge's and the hidden cell's name for a computation) -> message.
SYNTHESIZER_MISTAKES = {
    "SCALED": (
        "the scores are divided by sqrt(D/H). The synthesizer has no 1/sqrt scaling: its "
        "scores are relu(w1(x)) @ w2[:, :T] + b2[:T], not a product of a query and a key."
    ),
    "SCALED_MODEL": (
        "the scores are divided by sqrt(d_model). The synthesizer has no 1/sqrt scaling: its "
        "scores are relu(w1(x)) @ w2[:, :T] + b2[:T]."
    ),
    "NO_MASK": (
        "the future is not masked: position t attends to later positions. Fill the scores "
        "where tril[:, :, :T, :T] == 0 with -inf before the softmax."
    ),
    "SOFTMAX_QUERIES": (
        "the softmax runs over the queries (dim=-2). Each row t of the scores (one position) "
        "must sum to 1 over the positions s <= t it reads: softmax(dim=-1)."
    ),
    "NO_RELU": "relu is missing: the hidden features are relu(w1(x)), then @ w2[:, :T].",
    "NO_B2": (
        "b2 is missing, or added along the wrong axis (one value per row t, which the softmax "
        "cancels): add b2[:T] to every row, one value per position s read."
    ),
    "HEADS_RESHAPED": (
        "the heads are cut with a plain reshape to (B, H, T, D/H), which mixes positions and "
        "heads. View as (B, T, H, D/H), then transpose(1, 2), for relu(w1(x)) and value(x)."
    ),
    "MERGE_NO_TRANSPOSE": (
        "the heads are merged with a plain reshape of (B, H, T, D/H) to (B, T, D), which "
        "mixes positions and heads: transpose(1, 2) first, then reshape."
    ),
    "VALUE_NOT_SPLIT": (
        "each head's weights average the whole of value(x), and the heads are averaged. Head h "
        "reads only its block of D/H columns of value(x); the heads are put side by side."
    ),
    "NO_VALUE": "value is missing: the weights average x itself; they must average value(x).",
    "NO_PROJ": "proj is missing: the merged heads go through proj (nn.Linear(D, D)) at the end.",
}
WEIGHTS = (
    "w1.weight",
    "w1.bias",
    "w2",
    "b2",
    "value.weight",
    "value.bias",
    "proj.weight",
    "proj.bias",
)
DROPOUT_OUTPUT = (
    "The output gets no dropout after proj (or it comes before proj, which spreads it over "
    "every feature): the last step is dropout(proj(merged heads))."
)
DROPOUT_TWICE = "That is about 1 - (1 - p)^2: the output goes through dropout twice; once is right."
NO_ATTENTION_DROPOUT = (
    "The attention weights get no dropout: position 0, which reads only itself with weight 1, "
    "never loses that weight. Apply dropout to the weights after the softmax, before @ value."
)
DROPOUT_PLACE = (
    "Position 0 reads only itself, with weight 1; dropout on the weights makes that 0 or "
    "1/(1-p) for the whole head, so its output before the last dropout is proj's bias or "
    "bias + (out - bias)/(1-p). Yours is neither: the dropout acts elsewhere (on the scores, on "
    "value(x), on the heads' outputs entry by entry) or twice. Apply it once to the weights, "
    "after the softmax."
)
DROPOUT_NAN = (
    "NaN or infinite outputs: dropout multiplies the masked scores (-inf) by 0. Apply the "
    "dropout to the weights, after the softmax."
)
TRAIN_BATCH = 256  # sequences of the dropout case: enough draws to count the dropped entries


# ---------------------------------------------------------------- inputs drawn from a seed
def synthesizer_cases(seed: int, hidden: bool) -> list[dict]:
    """Sizes, module seed and input of each SynthesizerAttention checked.

    Visible: d_model 8, 2 heads, block_size 8, x (2, 5, 8). Hidden: 2 to 4 heads with T =
    block_size; 2 to 4 heads with T < block_size; one head (D/H from 2 to 6, batches 1 to 3);
    and one head with dropout 0.3 or 0.5, d_model 6 to 10, on 256 sequences (observed in
    training mode too).
    """
    if not hidden:
        return [probing.visible_layer_case()]
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for kind in ("full", "short", "one head", "dropout"):
        nhead = 1 if kind in ("one head", "dropout") else integer(gen, 2, 5)
        d = nhead * integer(gen, 2, 7) if kind != "dropout" else integer(gen, 6, 11)
        block = integer(gen, 4, 11)
        length = block if kind == "full" else integer(gen, 2, block)
        batch = TRAIN_BATCH if kind == "dropout" else integer(gen, 1, 4)
        dropout = (0.3, 0.5)[integer(gen, 0, 2)] if kind == "dropout" else 0.0
        module_seed = integer(gen, 0, 10_001)
        x = torch.randn(batch, length, d, generator=gen)
        cases.append(probing.layer_case(x, nhead, block, dropout, module_seed))
    return cases


def synthesizer_hand_case() -> dict:
    """The visible cell's case by hand: d_model 4, 2 heads, block_size 6, x (1, 5, 4).

    ``w1``'s weight is 0 and its bias -1 on head 0's features and 2 on head 1's, so relu(w1(x))
    is 0 for head 0 and 2 for head 1 at every position; ``value(x)`` is ``2 x + 1`` and ``proj``
    reverses the features.
    """
    gen = torch.Generator().manual_seed(5)
    weights = {
        "w1.weight": torch.zeros(4, 4),
        "w1.bias": torch.tensor([-1.0, -1.0, 2.0, 2.0]),
        "w2": torch.randn(2, 6, generator=gen),
        "b2": torch.randn(6, generator=gen),
        "value.weight": 2.0 * torch.eye(4),
        "value.bias": torch.ones(4),
        "proj.weight": torch.eye(4).flip(0),
        "proj.bias": torch.zeros(4),
    }
    x = torch.randn(1, 5, 4, generator=gen)
    return {"d_model": 4, "nhead": 2, "block_size": 6, "dropout": 0.0, "x": x, "weights": weights}


# ---------------------------------------------------------------- building and observing
def synthesizer_with(cls: Callable[..., nn.Module], case: dict) -> nn.Module:
    """``cls(d_model, nhead, block_size, dropout)`` built under the case's seed, with its given
    weights (a hand case) or every parameter given its own random values; in evaluation mode."""
    torch.manual_seed(case.get("seed", 0))
    module = cls(case["d_model"], case["nhead"], case["block_size"], case["dropout"])
    if "weights" in case:
        state = module.state_dict()
        with torch.no_grad():
            for name, value in case["weights"].items():
                check(name in state, f"SynthesizerAttention has no {name} (see the exercise).")
                state[name].copy_(value)
    else:
        randomise_parameters(module, case["seed"])
    return module.eval()


def _parameter_facts(module: nn.Module, name: str) -> dict:
    own = dict(module.named_parameters(recurse=False))
    value = getattr(module, name, None)
    shape = list(value.shape) if isinstance(value, torch.Tensor) else None
    return {"parameter": name in own, "shape": shape}


def _change_last(x: torch.Tensor) -> torch.Tensor:
    changed = x.clone()
    changed[:, -1] = changed[:, -1].flip(-1) + 1.0
    return changed


def observe_synthesizer(cls: Callable[..., nn.Module], case: dict) -> object:
    """Build the case's module (:func:`synthesizer_with`); its facts, weights and outputs, or
    ``{"error": ...}`` when building or calling it raised (a stub's NotImplementedError is
    raised, as the notebook's cells show it)."""
    try:
        return _observe(cls, case)
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - a student's error is an observation
        return error_of(error)


def _observe(cls: Callable[..., nn.Module], case: dict) -> dict:
    module = synthesizer_with(cls, case)
    state = module.state_dict()
    got: dict = {
        "facts": {
            **{part: linear_facts(module, part) for part in ("w1", "value", "proj")},
            **{part: _parameter_facts(module, part) for part in ("w2", "b2")},
            "tril": tril_facts(module),
        },
        "weights": {n: state[n].detach().clone() for n in WEIGHTS if n in state},
    }
    x = case["x"]
    with torch.no_grad():
        got["out"] = module(x)
        got["changed"] = module(_change_last(x))
        if case["dropout"] > 0:
            module.train()
            torch.manual_seed(case["seed"])
            got["train"] = module(x)
    return got


# ---------------------------------------------------------------- judging the parts
def synthesizer_name(case: dict) -> str:
    """How the messages name the call of a case."""
    return (
        f"SynthesizerAttention(d_model={case['d_model']}, nhead={case['nhead']}, block_size="
        f"{case['block_size']}, dropout={case['dropout']}) on x {tuple(case['x'].shape)}"
    )


def _linear_ok(facts: dict, part: str, d: int) -> None:
    want = f"nn.Linear({d}, {d})"
    check(
        facts.get("linear") is True,
        f"SynthesizerAttention.{part} should be {want}; got {facts.get('type')}.",
    )
    check(
        (facts["in"], facts["out"], facts["bias"]) == (d, d, True),
        expected_got(
            f"SynthesizerAttention.{part} has the wrong size (or no bias).",
            f"{want} with its bias",
            f"nn.Linear({facts['in']}, {facts['out']}, bias={facts['bias']})",
        ),
    )


def _parameter_ok(facts: dict, part: str, shape: tuple[int, ...], case: dict) -> None:
    check(
        facts["parameter"],
        f"SynthesizerAttention.{part} should be an nn.Parameter of shape {shape} (a plain "
        "tensor is not trained, and is not in parameters()).",
    )
    got = tuple(facts["shape"])
    if got != shape and part == "w2":
        d, nhead, block = case["d_model"], case["nhead"], case["block_size"]
        if got in {(d, block), (nhead, d // nhead, block)} and nhead > 1:
            what = f"SynthesizerAttention.w2 has the wrong shape: {W2_PER_HEAD}"
            fail(expected_got(what, shape, got))
    what = f"SynthesizerAttention.{part} has the wrong shape."
    check(got == shape, expected_got(what, shape, got))


def _tril_ok(facts: dict, block: int) -> None:
    check(
        not facts["parameter"],
        "SynthesizerAttention.tril is an nn.Parameter: the optimizer would train the mask. "
        "Register it with self.register_buffer('tril', ...).",
    )
    check(
        facts["buffer"],
        "SynthesizerAttention has no buffer named tril. Register the mask with "
        "self.register_buffer('tril', ...), as in H's CausalSelfAttention.",
    )
    value = facts["value"]
    expected = torch.tril(torch.ones(block, block)).view(1, 1, block, block)
    check_tensor(value, "the tril buffer", shape=(1, 1, block, block))
    check_close(value, expected, "the tril buffer (ones on and below the diagonal)")


def judge_synthesizer_parts(got: object, case: dict) -> dict:
    """The layers, ``w2``, ``b2``, the ``tril`` buffer and the output's shape; the observation.

    A call that raised about sizes where T < block_size is named as ``w2``/``b2`` not cut to T.
    """
    name = synthesizer_name(case)
    d, nhead, block = case["d_model"], case["nhead"], case["block_size"]
    error = str(got.get("error", "")) if isinstance(got, dict) else ""
    sizes = case["x"].shape[1] < block and ("size" in error or "shape" in error)
    got = returned(got, name, NOT_SLICED if sizes else "")
    check(isinstance(got, dict), f"no observation of {name}")
    assert isinstance(got, dict)
    facts = got["facts"]
    for part in ("w1", "value", "proj"):
        _linear_ok(facts[part], part, d)
    _parameter_ok(facts["w2"], "w2", (d // nhead, block), case)
    _parameter_ok(facts["b2"], "b2", (block,), case)
    _tril_ok(facts["tril"], block)
    out = check_tensor(got["out"], name, shape=tuple(case["x"].shape))
    check(bool(torch.isfinite(out).all()), f"{name} returned NaN or infinite values.")
    return got


def judge_synthesizer_behaviour(got: dict, case: dict) -> None:
    """Causality (the outputs before the last position ignore it) and, with dropout, where the
    dropout acts (:func:`judge_synthesizer_dropout`)."""
    name = synthesizer_name(case)
    check_close(
        got["changed"][:, :-1],
        got["out"][:, :-1],
        f"{name}: the outputs before the last position when only the last position changes",
        hint=SYNTHESIZER_MISTAKES["NO_MASK"],
    )
    if case["dropout"] > 0:
        judge_synthesizer_dropout(got, case)


def diagnose_synthesizer(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build and observe each case's module; judge its parts, causality and dropout."""
    for case in cases:
        got = judge_synthesizer_parts(observe_synthesizer(cls, case), case)
        judge_synthesizer_behaviour(got, case)


def judge_synthesizer_dropout(got: dict, case: dict) -> None:
    """Where the dropout acts, from the outputs in training mode of a one-head case.

    ``nn.Dropout(p)`` zeroes each entry with probability p and scales the others by 1/(1-p).
    After proj, about a share p of the outputs must be exactly 0. Position 0 reads only itself,
    with weight 1, which the dropout on the weights turns into 0 (the output before the last
    dropout is then proj's bias) or 1/(1-p) (then bias + (out - bias)/(1-p), ``out`` the output
    in evaluation mode); in about a share p of the sequences it is 0.
    """
    name, p = synthesizer_name(case), case["dropout"]
    train = check_tensor(got.get("train"), f"{name} in training mode", shape=case["x"].shape)
    train = train.detach().double()
    check(bool(torch.isfinite(train).all()), f"{name}, in training mode: {DROPOUT_NAN}")
    zeros = (train == 0).double().mean().item()
    if abs(zeros - p) > 0.08:
        twice = abs(zeros - (1 - (1 - p) ** 2)) <= 0.08
        fail(
            f"{name}, in training mode: {zeros:.0%} of the outputs are exactly 0, where "
            f"dropout({p}) after proj zeroes about {p:.0%}. "
            + (DROPOUT_TWICE if twice else DROPOUT_OUTPUT)
        )
    bias = got["weights"]["proj.bias"].double()
    out = got["out"][:, 0].detach().double()  # (B, D): position 0 in evaluation mode
    seen = train[:, 0] * (1 - p)  # the last dropout's scale undone; its zeros stay 0

    def matches(candidate: torch.Tensor) -> torch.Tensor:  # (B,): every kept entry agrees
        close = (seen - candidate).abs() <= 1e-4 * (1 + candidate.abs())
        return (close | (seen == 0)).all(dim=-1)

    shown = (seen != 0).any(dim=-1)  # the rows the last dropout did not wipe out
    dropped, kept = matches(bias.expand_as(out)) & shown, matches(bias + (out - bias) / (1 - p))
    if bool(matches(out).all()) and not bool(dropped.any()):
        fail(f"{name}, in training mode: {NO_ATTENTION_DROPOUT}")
    check(bool((dropped | kept).all()), f"{name}, in training mode: {DROPOUT_PLACE}")
    share = dropped.double().sum().item() / max(1, int(shown.sum()))
    check(
        abs(share - p) <= 0.2,
        f"{name}, in training mode: position 0 loses its weight in {share:.0%} of the "
        f"{int(shown.sum())} sequences seen, where dropout({p}) on the weights drops it in "
        f"about {p:.0%}. Apply the dropout once to the weights, after the softmax.",
    )
