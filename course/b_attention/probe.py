"""What the trusted judge needs from assignment B's code (see :mod:`course.verify`).

One item per test cell of the notebook. The visible items call the student's code on the
visible cells' examples; the hidden items on inputs drawn from the grader's secret seed by
:mod:`course.b_attention.draws`, which the judge calls too. Modules are built under a seed and
observed with the weights they hold (read through the attributes the tests copy them from), so
that the judge can compute what PyTorch's modules give with the same weights.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from course.b_attention.checks import (
    PROJECTIONS,
    RANDOM_VALUES,
    layer_facts,
    output_projection_outputs,
    parameter_gradients,
    projection_facts,
)
from course.b_attention.draws import (
    NORM_EPS,
    attention_cases,
    attention_extras,
    attention_visible_inputs,
    cross_cases,
    gradient_inputs,
    head_cases,
    heads_visible_inputs,
    layer_cases,
    mhsa_cases,
    module_visible_input,
    norm_cases,
    norm_visible_inputs,
    one_head_input,
)
from course.probing import attempt, by_cell, draw, error_of, future_hidden, seed_of
from course.testcells import randomise_parameters
from course.verify import student

LAYER_WEIGHTS = tuple(f"self_attn.{p}" for p in PROJECTIONS) + (
    "linear1",
    "linear2",
    "norm1",
    "norm2",
)


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


def _after_facts(facts: dict, rest: Callable[[], dict], module: nn.Module | None) -> dict:
    """``facts`` and what ``rest`` observes once the module's parameters got their own random
    values (as the test cells' checks of the parts give them); if ``rest`` raises, the error
    after the facts (the test cells check the module's parts before they call it). ``None``:
    the caller gave them already."""
    if module is not None:
        randomise_parameters(module, RANDOM_VALUES)
    try:
        return {"facts": facts, **rest()}
    except Exception as error:  # noqa: BLE001 - a student's error is an observation
        return {"facts": facts, **error_of(error)}


def _fresh(*tensors: torch.Tensor | None) -> list:
    """Copies of the inputs of one call, so that a call that modifies its inputs in place does
    not change those of the next (the judge compares with outputs on the inputs as drawn)."""
    return [None if t is None else t.clone() for t in tensors]


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

    return attempt(compute)


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
        "grads": attempt(gradients),
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

    return _after_facts(projection_facts(module), rest, module)


def _module_cases(seed: int, name: str, make: Callable, cases: list, observe: Callable) -> list:
    """The hidden cases of an attention module: for each case, ``make(d_model, nhead)`` under the
    case's seed, its facts, its weights drawn afresh for this submission, then what
    ``observe(module, case)`` returns, observed after the facts."""
    observed = []
    for trial, case in enumerate(cases):
        torch.manual_seed(seed_of(seed, name, trial))
        module = make(case["d_model"], case["nhead"]).eval()
        facts = projection_facts(module)
        randomise_parameters(module, seed_of(seed, f"{name} values", trial))  # per submission
        observed.append(_after_facts(facts, partial(observe, module, case), None))
    return observed


def _mhsa_outputs(module: nn.Module, case: dict) -> dict:
    x, causal = case["x"], case["masks"][1]
    probes = output_projection_outputs(module, x.clone())
    with torch.no_grad():
        outs = [module(*_fresh(x, mask)) for mask in case["masks"]]
        changed = module(*_fresh(case["changed"], causal))
        again = module(*_fresh(x, causal))
    weights = _weights(module, PROJECTIONS)
    return {"probes": probes, "weights": weights, "outs": outs, "causal": [changed, again]}


def mhsa_hidden(ns: dict, seed: int) -> object:
    attention = student(ns, "MultiHeadSelfAttention")
    cases = _module_cases(seed, "mhsa_hidden", attention, mhsa_cases(seed), _mhsa_outputs)
    torch.manual_seed(seed_of(seed, "mhsa_hidden gradients"))
    module = attention(12, 3)
    x, upstream = gradient_inputs(
        seed_of(seed, "mhsa_hidden gradient inputs"), (2, 6, 12), (2, 6, 12)
    )
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
    *inputs, upstream = gradient_inputs(
        seed_of(seed, "norm_hidden gradient inputs"), (3, 5, 6), (6,), (6,), (3, 5, 6)
    )
    leaves = _leaves(inputs)

    def gradients() -> list:
        (norm(*leaves) * upstream).sum().backward()
        return [t.grad for t in leaves]

    return {"cases": cases, "constant": constant, "grads": attempt(gradients)}


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
        observed.append(_after_facts(layer_facts(module), _layer(module, x, None), module))
    return observed


def layer_hidden(ns: dict, seed: int) -> object:
    layer = student(ns, "TransformerLayer")
    cases = []
    for trial, case in enumerate(layer_cases(seed)):
        torch.manual_seed(seed_of(seed, "layer_hidden", trial))
        module = layer(
            case["d_model"], case["nhead"], case["d_ff"], norm_first=case["norm_first"]
        ).eval()
        facts = layer_facts(module)
        randomise_parameters(module, RANDOM_VALUES)  # as diagnose_layer_parts, then the noise
        noise = draw(seed, "layer_hidden noise", trial)
        with torch.no_grad():  # random LayerNorm scales and shifts too
            for parameter in module.parameters():
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=noise))
        masks = [None, future_hidden(torch.zeros(case["x"].shape[1], case["x"].shape[1]))]
        cases.append(_after_facts(facts, _layer(module, case["x"], masks), None))
    grads = []
    for norm_first in (False, True):
        torch.manual_seed(seed_of(seed, "layer_hidden gradients", norm_first))
        module = layer(12, 3, 24, norm_first=norm_first)
        x, upstream = gradient_inputs(
            seed_of(seed, "layer_hidden gradient inputs", norm_first), (2, 6, 12), (2, 6, 12)
        )
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

    return _after_facts(projection_facts(module), rest, module)


def _cross_outputs(module: nn.Module, case: dict) -> dict:
    x, memory = case["x"], case["memory"]
    with torch.no_grad():
        outs = [module(*_fresh(x, memory, mask)) for mask in case["masks"]]
        changed = [
            module(*_fresh(y, memory, mask))
            for y, mask in zip(case["changed"], case["masks"], strict=True)
        ]
    return {"weights": _weights(module, PROJECTIONS), "outs": outs, "changed": changed}


def cross_hidden(ns: dict, seed: int) -> object:
    cross = student(ns, "MultiHeadCrossAttention")
    cases = _module_cases(seed, "cross_hidden", cross, cross_cases(seed), _cross_outputs)
    torch.manual_seed(seed_of(seed, "cross_hidden gradients"))
    module = cross(12, 3)
    *inputs, upstream = gradient_inputs(
        seed_of(seed, "cross_hidden gradient inputs"), (2, 4, 12), (2, 7, 12), (2, 4, 12)
    )
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
