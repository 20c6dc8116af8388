"""What the trusted judge needs from assignment B's code (see :mod:`course.verify`).

One item per test cell of the notebook. The visible items call the student's code on the
visible cells' examples; the hidden items on inputs drawn from the grader's secret seed by the
functions below, which the judge calls too. Modules are built under a seed and observed with the
weights they hold (read through the attributes the tests copy them from), so that the judge can
compute what PyTorch's modules give with the same weights.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from course.b_attention.checks import (
    PROJECTIONS,
    layer_facts,
    output_projection_outputs,
    parameter_gradients,
    projection_facts,
)
from course.probing import by_cell, future_hidden, integer
from course.verify import student

NEG_INF = float("-inf")
LAYER_WEIGHTS = tuple(f"self_attn.{p}" for p in PROJECTIONS) + (
    "linear1",
    "linear2",
    "norm1",
    "norm2",
)

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]


# ---------------------------------------------------------------- inputs, visible cells
def attention_visible_inputs() -> list[Inputs]:
    """The visible cell's calls: the small example without and with a causal mask, a batch."""
    q = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    causal = torch.tensor([[0.0, NEG_INF], [0.0, 0.0]])
    gen = torch.Generator().manual_seed(0)
    qb, kb = torch.randn(3, 2, 5, 8, generator=gen), torch.randn(3, 2, 6, 8, generator=gen)
    vb = torch.randn(3, 2, 6, 4, generator=gen)
    return [(q, q, v, None), (q, q, v, causal), (qb, kb, vb, None)]


def heads_visible_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The visible cell's inputs: x (1, 3, 4) numbered 0..11, and the heads given to merge."""
    x = torch.arange(12.0).reshape(1, 3, 4)
    heads = torch.tensor(
        [[[[0.0, 1.0], [4.0, 5.0], [8.0, 9.0]], [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0]]]]
    )
    return x, heads


def norm_visible_inputs() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The visible cell's calls: gamma = 1 and beta = 0, then a scale and shift."""
    x = torch.tensor([[[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 4.0, 4.0], [5.0, 5.0, 5.0, 9.0]]])
    return [
        (x, torch.ones(4), torch.zeros(4)),
        (x, torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.0, -0.5, 1.0])),
    ]


def module_visible_input(*shape: int, seed: int) -> torch.Tensor:
    """A random input of the visible module cells (which draw it from the global generator)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- inputs, hidden cells
def attention_cases(seed: int) -> list[Inputs]:
    """(q, k, v, mask): 2-D to 4-D, Lq != Lk, dv != d; no mask, float masks, causal masks.

    As in the hidden cell, a batch dimension of 1 and values of width 1 are among them.
    """
    gen = torch.Generator().manual_seed(seed + 10)
    cases: list[Inputs] = []
    for trial in range(6):
        lead = [(), (integer(gen, 1, 4),), (integer(gen, 1, 4), integer(gen, 1, 5))][trial % 3]
        lq, lk, d, dv = (
            integer(gen, 2, 9),
            integer(gen, 2, 9),
            integer(gen, 2, 17),
            integer(gen, 1, 9),
        )
        if trial in (2, 5):  # a batch of 1 broadcast with heads; values of width 1 once
            lead = (1, lead[1])
            dv = 1 if trial == 2 else dv
        q = torch.randn(*lead, lq, d, generator=gen)
        k = torch.randn(*lead, lk, d, generator=gen)
        v = torch.randn(*lead, lk, dv, generator=gen)
        float_mask = torch.randn(*([1] * len(lead)), lq, lk, generator=gen)
        cases += [(q, k, v, None), (q, k, v, float_mask)]
        kc = torch.randn(*lead, lq, d, generator=gen)
        vc = torch.randn(*lead, lq, dv, generator=gen)
        cases.append((q, kc, vc, future_hidden(torch.zeros(lq, lq))))
    # A mask with its own batch dimension, broadcast over heads: (B, 1, Lq, Lk).
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen) for _ in range(3))
    cases.append((q, k, v, torch.randn(2, 1, 5, 5, generator=gen)))
    return cases


def attention_extras(seed: int) -> dict[str, list[torch.Tensor]]:
    """Inputs of the mask=None, in-place and gradient checks."""
    gen = torch.Generator().manual_seed(seed + 11)
    return {
        "plain": [torch.randn(2, 6, 8, generator=gen) for _ in range(3)],
        "grad": [torch.randn(2, 4, 8, generator=gen) for _ in range(4)],  # q, k, v, upstream
    }


def head_cases(seed: int) -> list[dict]:
    """Random sizes (L, H >= 2): x to split, heads to merge, a transposed (strided) input.

    As in the hidden cell, heads of width 1 and the smallest sizes are among them.
    """
    gen = torch.Generator().manual_seed(seed + 20)
    cases = []
    for trial in range(6):
        b, length, nhead, width = (
            integer(gen, 1, 6),
            integer(gen, 2, 7),
            integer(gen, 2, 7),
            integer(gen, 1, 7),
        )
        if trial == 0:
            width = 1
        elif trial == 1:
            b, length, nhead = 1, 2, 2
        cases.append(
            {
                "nhead": nhead,
                "x": torch.randn(b, length, nhead * width, generator=gen),
                "heads": torch.randn(b, nhead, length, width, generator=gen),
                "transposed": torch.randn(b, length, nhead, width, generator=gen).transpose(1, 2),
            }
        )
    return cases


def one_head_input(seed: int) -> torch.Tensor:
    """The input split into one head."""
    return torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(seed + 21))


FORCED_MHSA = {0: (4, 1, 1), 2: (1, 3, 1), 4: (1, 1, 3)}  # trial: (nhead, width, batch)


def mhsa_cases(seed: int) -> list[dict]:
    """Random sizes; masks: none, causal, random floats; x with its last token changed.

    As in the hidden cell, one head, heads of width 1 (d_model = 1 too) and a batch of 1 are
    among them.
    """
    gen = torch.Generator().manual_seed(seed + 30)
    cases = []
    for trial in range(5):
        nhead, width, batch = integer(gen, 1, 5), integer(gen, 1, 7), integer(gen, 1, 4)
        nhead, width, batch = FORCED_MHSA.get(trial, (nhead, width, batch))
        d_model, length = nhead * width, 2 + trial
        x = torch.randn(batch, length, d_model, generator=gen)
        masks = [
            None,
            future_hidden(torch.zeros(length, length)),
            torch.randn(length, length, generator=gen),
        ]
        changed = x.clone()
        changed[:, -1] = torch.randn(batch, d_model, generator=gen)
        cases.append(
            {"d_model": d_model, "nhead": nhead, "x": x, "masks": masks, "changed": changed}
        )
    return cases


def gradient_inputs(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    """Random inputs of a gradient check (the last one multiplies the output)."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen) for shape in shapes]


NORM_SHAPES = [(3, 4), (2, 5, 4), (2, 3, 6, 4), (4, 7, 3), (2, 9, 16), (1, 1, 33)]


def norm_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(x, gamma, beta) for each shape: small D (where D - 1 is far from D) and larger ones."""
    gen = torch.Generator().manual_seed(seed + 40)
    cases = []
    for shape in NORM_SHAPES:
        x = 3 * torch.randn(*shape, generator=gen) + 1
        gamma = torch.randn(shape[-1], generator=gen)
        cases.append((x, gamma, torch.randn(shape[-1], generator=gen)))
    return cases


NORM_EPS = (1e-5, 0.1)  # 1e-5 is left to the default


def layer_cases(seed: int) -> list[dict]:
    """Random sizes, post-norm and pre-norm in turn (one head in both, as in the hidden cell)."""
    gen = torch.Generator().manual_seed(seed + 50)
    cases = []
    for trial in range(6):
        nhead, width = integer(gen, 1, 4), integer(gen, 2, 6)
        d_model, d_ff = nhead * width, integer(gen, 4, 20)
        batch, length = integer(gen, 1, 4), integer(gen, 2, 8)
        if trial < 2:
            nhead, d_model = 1, width
        elif trial == 2:
            batch, length = 1, 2
        cases.append(
            {
                "d_model": d_model,
                "nhead": nhead,
                "d_ff": d_ff,
                "norm_first": bool(trial % 2),
                "x": torch.randn(batch, length, d_model, generator=gen),
            }
        )
    return cases


def cross_cases(seed: int) -> list[dict]:
    """Random sizes (Lq = Lk, then Lq != Lk); masks: none, random floats, the last memory
    position blocked; for each mask, x with its first position changed. As in the hidden cell,
    one head, a batch of 1 and a memory longer than x are among them."""
    gen = torch.Generator().manual_seed(seed + 60)
    cases = []
    for trial in range(5):
        nhead, width, batch = integer(gen, 1, 5), integer(gen, 1, 7), integer(gen, 1, 4)
        d_model, lq = nhead * width, integer(gen, 2, 8)
        lk = lq if trial < 2 else integer(gen, 2, 10)
        if trial == 0:
            nhead, batch, d_model = 1, 1, width
        elif trial == 4:
            nhead, batch, d_model, lk = 1, 1, width, lq + 2
        x = torch.randn(batch, lq, d_model, generator=gen)
        memory = torch.randn(batch, lk, d_model, generator=gen)
        blocked = torch.zeros(lq, lk)
        blocked[:, -1] = NEG_INF
        masks = [None, torch.randn(lq, lk, generator=gen), blocked]
        changed = []
        for _ in masks:
            y = x.clone()
            y[:, 0] = torch.randn(batch, d_model, generator=gen)
            changed.append(y)
        cases.append(
            {
                "d_model": d_model,
                "nhead": nhead,
                "x": x,
                "memory": memory,
                "masks": masks,
                "changed": changed,
            }
        )
    return cases


# ---------------------------------------------------------------- observing
def _pair(result: object) -> dict:
    """An attention call's result: its items when it is a tuple, else the name of its type."""
    if isinstance(result, tuple):
        return {"items": list(result)}
    return {"type": type(result).__name__}


def _weights(module: nn.Module, parts: tuple[str, ...]) -> dict[str, object]:
    """The weight and bias of each part (a dotted path), read as the tests read them."""
    found = {}
    for part in parts:
        sub = module
        for name in part.split("."):
            sub = getattr(sub, name)
        found[f"{part}.weight"], found[f"{part}.bias"] = sub.weight, sub.bias
    return found


def _after_facts(facts: dict, rest: Callable[[], dict]) -> dict:
    """``facts`` and what ``rest`` observes; if ``rest`` raises, the error after the facts
    (the test cells check the module's parts before they call it)."""
    try:
        return {"facts": facts, **rest()}
    except Exception as error:  # noqa: BLE001 - a student's error is an observation
        return {"facts": facts, "raised": f"{type(error).__name__}: {error}"[:500]}


def _fresh(*tensors: torch.Tensor | None) -> list:
    """Copies of the inputs of one call, so that a call that modifies its inputs in place does
    not change those of the next (the judge compares with outputs on the inputs as drawn)."""
    return [None if t is None else t.clone() for t in tensors]


def _attempt(compute: Callable[[], object]) -> dict:
    """``{"value": compute()}``, or ``{"raised": ...}`` when it raises: a later part of a test
    cell, observed on its own so that the judge reports the earlier parts first."""
    try:
        return {"value": compute()}
    except Exception as error:  # noqa: BLE001 - a student's error is an observation
        return {"raised": f"{type(error).__name__}: {error}"[:500]}


def _leaves(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.clone().requires_grad_(True) for t in inputs]


def _gradients(
    module: nn.Module, inputs: list[torch.Tensor], upstream: torch.Tensor, *args: object
) -> dict:
    """The gradients of the module's parameters (and of the inputs that require one) after one
    backward pass of ``(module(*inputs, *args) * upstream).sum()``."""

    def compute() -> dict:
        (module(*inputs, *args) * upstream).sum().backward()
        return {"parameters": parameter_gradients(module), "inputs": [t.grad for t in inputs]}

    return _attempt(compute)


# ---------------------------------------------------------------- items, by test cell
def sdpa_visible(ns: dict, seed: int) -> object:
    attend = student(ns, "scaled_dot_product_attention")
    return [
        _pair(attend(*_fresh(q, k, v)) if mask is None else attend(*_fresh(q, k, v, mask)))
        for q, k, v, mask in attention_visible_inputs()
    ]


def sdpa_hidden(ns: dict, seed: int) -> object:
    attend = student(ns, "scaled_dot_product_attention")
    cases = [_pair(attend(*_fresh(q, k, v, mask))) for q, k, v, mask in attention_cases(seed)]
    extras = attention_extras(seed)
    q, k, v = extras["plain"]  # as in the cell, both calls get them, then they are compared
    out_none, _ = attend(q, k, v)
    out_zero, _ = attend(q, k, v, torch.zeros(6, 6))
    *inputs, upstream = extras["grad"]
    leaves = _leaves(inputs)

    def gradients() -> list:
        out, _ = attend(*leaves)
        (out * upstream).sum().backward()
        return [t.grad for t in leaves]

    after = [q, k, v]
    return {
        "cases": cases,
        "none": out_none,
        "zero": out_zero,
        "after": after,
        "grads": _attempt(gradients),
    }


def heads_visible(ns: dict, seed: int) -> object:
    x, heads = heads_visible_inputs()
    return {
        "split": student(ns, "split_heads")(x, 2),
        "merged": student(ns, "merge_heads")(heads),
    }


def heads_hidden(ns: dict, seed: int) -> object:
    split, merge = student(ns, "split_heads"), student(ns, "merge_heads")
    cases = [
        {
            "split": split(*_fresh(case["x"]), case["nhead"]),
            "merged": merge(*_fresh(case["heads"])),
            "round_trip": merge(split(*_fresh(case["x"]), case["nhead"])),
            "transposed": merge(case["transposed"]),  # not contiguous
        }
        for case in head_cases(seed)
    ]
    return {"cases": cases, "one_head": split(one_head_input(seed), 1)}


def mhsa_visible(ns: dict, seed: int) -> object:
    torch.manual_seed(1)
    module = student(ns, "MultiHeadSelfAttention")(8, 2)
    x = module_visible_input(2, 5, 8, seed=1)

    def rest() -> dict:
        probes = output_projection_outputs(module, x.clone())
        with torch.no_grad():
            out = module(x.clone())
        return {"probes": probes, "weights": _weights(module, PROJECTIONS), "out": out}

    return _after_facts(projection_facts(module), rest)


def mhsa_hidden(ns: dict, seed: int) -> object:
    attention = student(ns, "MultiHeadSelfAttention")
    cases = []
    for trial, case in enumerate(mhsa_cases(seed)):
        torch.manual_seed(seed + 100 + trial)
        module = attention(case["d_model"], case["nhead"]).eval()

        def rest(module: nn.Module = module, case: dict = case) -> dict:
            x, causal = case["x"], case["masks"][1]
            probes = output_projection_outputs(module, x.clone())
            with torch.no_grad():
                outs = [module(*_fresh(x, mask)) for mask in case["masks"]]
                changed = module(*_fresh(case["changed"], causal))
                again = module(*_fresh(x, causal))
            weights = _weights(module, PROJECTIONS)
            return {"probes": probes, "weights": weights, "outs": outs, "causal": [changed, again]}

        cases.append(_after_facts(projection_facts(module), rest))
    torch.manual_seed(seed + 110)
    module = attention(12, 3)
    x, upstream = gradient_inputs(seed + 111, (2, 6, 12), (2, 6, 12))
    return {"cases": cases, "grads": _gradients(module, [x], upstream)}


def norm_visible(ns: dict, seed: int) -> object:
    norm = student(ns, "layer_norm")
    return [norm(*_fresh(x, gamma, beta)) for x, gamma, beta in norm_visible_inputs()]


def norm_hidden(ns: dict, seed: int) -> object:
    norm = student(ns, "layer_norm")
    cases = []
    for x, gamma, beta in norm_cases(seed):
        for eps in NORM_EPS:
            args = _fresh(x, gamma, beta)  # x is compared afterwards, as in the cell
            out = norm(*args) if eps == 1e-5 else norm(*args, eps)
            cases.append({"out": out, "x": args[0]})
    constant = norm(torch.full((2, 4), 3.0), torch.ones(4), torch.arange(4.0))
    *inputs, upstream = gradient_inputs(seed + 41, (3, 5, 6), (6,), (6,), (3, 5, 6))
    leaves = _leaves(inputs)

    def gradients() -> list:
        (norm(*leaves) * upstream).sum().backward()
        return [t.grad for t in leaves]

    return {"cases": cases, "constant": constant, "grads": _attempt(gradients)}


def _layer(module: nn.Module, x: torch.Tensor, masks: list | None) -> Callable[[], dict]:
    """Observe the layer on x with each mask (``None``: called as ``module(x)``)."""

    def rest() -> dict:
        with torch.no_grad():
            if masks is None:
                outs = [module(x.clone())]
            else:
                outs = [module(*_fresh(x, mask)) for mask in masks]
        return {"weights": _weights(module, LAYER_WEIGHTS), "outs": outs}

    return rest


def layer_visible(ns: dict, seed: int) -> object:
    layer = student(ns, "TransformerLayer")
    x = module_visible_input(2, 5, 8, seed=2)
    observed = []
    for norm_first in (False, True):
        torch.manual_seed(2)
        module = layer(8, 2, 16, norm_first=norm_first).eval()
        observed.append(_after_facts(layer_facts(module), _layer(module, x, None)))
    return observed


def layer_hidden(ns: dict, seed: int) -> object:
    layer = student(ns, "TransformerLayer")
    cases = []
    for trial, case in enumerate(layer_cases(seed)):
        torch.manual_seed(seed + 200 + trial)
        module = layer(
            case["d_model"], case["nhead"], case["d_ff"], norm_first=case["norm_first"]
        ).eval()
        facts = layer_facts(module)
        noise = torch.Generator().manual_seed(seed + 210 + trial)
        with torch.no_grad():  # random LayerNorm scales and shifts too
            for parameter in module.parameters():
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=noise))
        masks = [None, future_hidden(torch.zeros(case["x"].shape[1], case["x"].shape[1]))]
        cases.append(_after_facts(facts, _layer(module, case["x"], masks)))
    grads = []
    for norm_first in (False, True):
        torch.manual_seed(seed + 220 + norm_first)
        module = layer(12, 3, 24, norm_first=norm_first)
        x, upstream = gradient_inputs(seed + 221 + norm_first, (2, 6, 12), (2, 6, 12))
        grads.append(_gradients(module, [x], upstream, future_hidden(torch.zeros(6, 6))))
    return {"cases": cases, "grads": grads}


def cross_visible(ns: dict, seed: int) -> object:
    torch.manual_seed(5)
    module = student(ns, "MultiHeadCrossAttention")(8, 2)
    x, memory = module_visible_input(2, 3, 8, seed=5), module_visible_input(2, 5, 8, seed=6)

    def rest() -> dict:
        with torch.no_grad():
            out = module(*_fresh(x, memory))
        return {"weights": _weights(module, PROJECTIONS), "out": out}

    return _after_facts(projection_facts(module), rest)


def cross_hidden(ns: dict, seed: int) -> object:
    cross = student(ns, "MultiHeadCrossAttention")
    cases = []
    for trial, case in enumerate(cross_cases(seed)):
        torch.manual_seed(seed + 300 + trial)
        module = cross(case["d_model"], case["nhead"]).eval()

        def rest(module: nn.Module = module, case: dict = case) -> dict:
            x, memory = case["x"], case["memory"]
            with torch.no_grad():
                outs = [module(*_fresh(x, memory, mask)) for mask in case["masks"]]
                changed = [
                    module(*_fresh(y, memory, mask))
                    for y, mask in zip(case["changed"], case["masks"], strict=True)
                ]
            return {"weights": _weights(module, PROJECTIONS), "outs": outs, "changed": changed}

        cases.append(_after_facts(projection_facts(module), rest))
    torch.manual_seed(seed + 310)
    module = cross(12, 3)
    *inputs, upstream = gradient_inputs(seed + 311, (2, 4, 12), (2, 7, 12), (2, 4, 12))
    return {"cases": cases, "grads": _gradients(module, _leaves(inputs), upstream)}


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/b_attention.py (course.probing).
CELLS = {
    "test_sdpa_visible": "sdpa_visible",
    "test_sdpa_hidden": "sdpa_hidden",
    "test_heads_visible": "heads_visible",
    "test_heads_hidden": "heads_hidden",
    "test_mhsa_visible": "mhsa_visible",
    "test_mhsa_hidden": "mhsa_hidden",
    "test_layernorm_visible": "norm_visible",
    "test_layernorm_hidden": "norm_hidden",
    "test_layer_visible": "layer_visible",
    "test_layer_hidden": "layer_hidden",
    "test_cross_visible": "cross_visible",
    "test_cross_hidden": "cross_hidden",
}
ITEMS = by_cell(CELLS, globals())
