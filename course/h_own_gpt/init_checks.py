"""Checks of GPT-2's initialisation in assignment H's ``GPT.__init__``.

The kernel reads the spread of every parameter as ``__init__`` left it
(:func:`initial_spreads`), before the module checks give the parameters random values; the
verdict (:func:`judge_initialisation`, called by :func:`course.h_own_gpt.checks.judge_gpt`)
compares each with GPT-2's std: 0.02 for every ``nn.Linear`` and ``nn.Embedding`` weight,
``0.02 / sqrt(2 * nlayers)`` for the last projection of each residual branch, 0 for the biases.
"""

from __future__ import annotations

import math

from torch import nn

from course.testcells import check, fail

NO_INIT = (
    "the weights keep PyTorch's default initialisation (nn.Embedding draws from N(0, 1), "
    "nn.Linear uniformly in +-1/sqrt(fan-in)). GPT-2's: every nn.Linear and nn.Embedding "
    "weight from N(0, 0.02^2), every bias 0, in GPT.__init__."
)
NO_RESIDUAL_SCALING = (
    "the last projection of each residual branch (attn.proj and the MLP's second Linear) has "
    "std 0.02 like the other weights. GPT-2 scales it down to 0.02 / sqrt(2 * nlayers): each "
    "of the 2 * nlayers branches adds to the residual stream, whose variance would grow with "
    "depth."
)
BIAS_NOT_ZERO = "a bias is not 0 after initialisation: GPT-2 starts every bias at 0."


def initial_spreads(model: nn.Module) -> dict[str, dict]:
    """Each parameter's size, root mean square and largest magnitude, as initialised."""
    spreads = {}
    for name, parameter in model.named_parameters():  # a tied tensor once
        values = parameter.detach().double()
        spreads[name] = {
            "numel": values.numel(),
            "rms": float(values.square().mean().sqrt()) if values.numel() else 0.0,
            "max": float(values.abs().max()) if values.numel() else 0.0,
        }
    return spreads


GPT2_STD = 0.02
RESIDUAL_PROJECTIONS = (".attn.proj.weight", ".mlp.2.weight")


def expected_spread(name: str, nlayers: int) -> float | None:
    """GPT-2's std for the parameter ``name`` of a GPT (0 for a bias; None: not judged)."""
    if name.endswith(".bias"):
        return 0.0
    if name.startswith("blocks.") and name.endswith(RESIDUAL_PROJECTIONS):
        return GPT2_STD / math.sqrt(2 * nlayers)
    if name in ("tok_emb.weight", "pos_emb.weight", "head.weight") or name.endswith(
        (".attn.qkv.weight", ".mlp.0.weight")
    ):
        return GPT2_STD
    return None


def _near(rms: float, std: float, numel: int) -> bool:
    """Whether a sample of ``numel`` values of rms ``rms`` may come from N(0, std^2)."""
    return abs(rms - std) <= 5 * std / math.sqrt(2 * numel)  # five standard errors


def judge_initialisation(spreads: dict, case: dict) -> None:
    """GPT-2's initialisation, from the spread of each parameter as GPT.__init__ left it."""
    nlayers = case["nlayers"]
    for name, spread in spreads.items():
        std = expected_spread(name, nlayers)
        if std is None:
            continue
        if std == 0.0:
            check(
                spread["max"] == 0.0,
                f"{name}: {BIAS_NOT_ZERO} (its largest value: {spread['max']:.3g})",
            )
            continue
        rms, numel = spread["rms"], spread["numel"]
        if _near(rms, std, numel):
            continue
        said = f"GPT(nlayers={nlayers}).{name} starts with std {rms:.4f}, not {std:.4f}"
        if std != GPT2_STD and _near(rms, GPT2_STD, numel):
            fail(f"{said}: {NO_RESIDUAL_SCALING}")
        if rms > 3 * GPT2_STD:
            fail(f"{said}: {NO_INIT}")
        fail(
            f"{said}. GPT-2's initialisation: N(0, 0.02^2) for every nn.Linear and nn.Embedding "
            "weight, 0.02 / sqrt(2 * nlayers) for attn.proj and the MLP's second Linear."
        )
