"""What every assignment's probe shares (``course/<assignment>/probe.py``, :mod:`course.verify`).

- **One table of test cells.** Each probe declares its graded test cells once, in ``CELLS``:
  grade_id -> the name of the function that observes that cell in the probe and judges it in
  ``judge/<assignment>.py`` (the same name on both sides). :func:`by_cell` finds either side's
  functions from that table; nothing else names a grade_id.
- **One observation of a call.** :func:`attempt` calls the student's code and gives what it
  returned, or ``{"error": ...}`` when it raised; wherever a verdict is decided (``judge/``, and
  the judging checks of G and H) :func:`returned` reads it back.
- **One reading of a module's parts.** :func:`linear_facts` and :func:`tril_facts` say what a
  student's module holds under a name (H's attention, F's synthesizer), for the judge to read.
- **One known state.** :func:`known_state` is the state every observation runs in (float32,
  autocast off, gradients on, the global generator forked), whatever the notebook's cells left.
- **One seeded draw.** :func:`draw` is the generator of one group of cases, from the grader's
  secret seed and the group's name (the function that draws; :func:`seed_of` gives the seed
  itself, for ``torch.manual_seed``); :func:`integer` draws one integer from it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from course import contract
from course.testcells import fail

Observation = object  # what a call returned (portable), or {"error": message}


def by_cell(cells: dict[str, str], functions: dict[str, object]) -> dict[str, Callable]:
    """grade_id -> the function of ``functions`` (a module's namespace) that ``cells`` names."""
    missing = sorted(name for name in cells.values() if not callable(functions.get(name)))
    if missing:
        raise LookupError(f"no function {', '.join(missing)} for the test cells")
    return {cell: functions[name] for cell, name in cells.items()}


def error_of(error: BaseException) -> dict[str, str]:
    """The observation of a call that raised ``error``."""
    return contract.error_observation(f"{type(error).__name__}: {error}")


def attempt(function: Callable, *args: object, **kwargs: object) -> Observation:
    """``function(*args, **kwargs)``, or ``{"error": ...}`` when it raises."""
    try:
        return function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a student's error is an observation
        return error_of(error)


def returned(observation: object, name: str = "the code", context: str = "") -> object:
    """What a call returned, as :func:`attempt` observed it; a failure that names ``name`` (and
    ``context``) when the call raised. The judge reads every observation of a call with this."""
    if contract.is_error(observation) and isinstance(observation["error"], str):
        fail(f"{name} raised {observation['error']}" + (f" ({context})" if context else ""))
    return observation


@contextmanager
def known_state() -> Iterator[None]:
    """float32 by default, autocast off, gradients on, the global generator forked: the state
    in which the judge draws the same cases, so a cell that left float64 as the default dtype (or
    an open autocast) cannot make the kernel's cases differ from the judge's. Given back after."""
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    try:
        with torch.random.fork_rng(devices=[]), torch.autocast("cpu", enabled=False):
            yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)


def seed_of(seed: int, *key: object) -> int:
    """The seed of one group of draws under the grader's ``seed``: ``key`` names the group (the
    function that draws, and what it draws for: ``seed_of(seed, "layer_hidden", trial)``)."""
    name = " ".join(str(part) for part in key)
    return (seed + zlib.crc32(name.encode())) % 2**63


def draw(seed: int, *key: object) -> torch.Generator:
    """The generator of the group of draws ``key`` under ``seed`` (:func:`seed_of`)."""
    return torch.Generator().manual_seed(seed_of(seed, *key))


def integer(gen: torch.Generator, low: int, high: int) -> int:
    """One integer in [low, high) drawn from ``gen``."""
    return int(torch.randint(low, high, (1,), generator=gen))


def layer_case(x: torch.Tensor, nhead: int, block: int, dropout: float, seed: int) -> dict:
    """One call of an attention layer or block: its sizes, dropout, module seed and input
    ``x`` (B, T, d_model)."""
    sizes = {"d_model": x.size(-1), "nhead": nhead, "block_size": block}
    return {**sizes, "dropout": dropout, "seed": seed, "x": x}


def visible_layer_case() -> dict:
    """The visible cells' call: d_model 8, 2 heads, block_size 8, x (2, 5, 8), seed 0."""
    return layer_case(
        torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1)), 2, 8, 0.0, 0
    )


def future_hidden(scores: torch.Tensor) -> torch.Tensor:
    """``scores`` with -inf above the diagonal of its last two dimensions.

    The probes build the additive causal masks they pass as ``future_hidden(torch.zeros(L, L))``:
    this takes a tensor, not a length, so that no function of the package gives assignment A's
    graded mask (``tests/test_no_answer_importable.py``).
    """
    future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
    return scores.masked_fill(future, float("-inf"))


def linear_facts(module: torch.nn.Module, name: str) -> dict:
    """What ``module.<name>`` is: an ``nn.Linear`` (its sizes and bias) or which type instead."""
    layer = getattr(module, name, None)
    if not isinstance(layer, torch.nn.Linear):
        return {"linear": False, "type": type(layer).__name__}
    return {
        "linear": True,
        "in": layer.in_features,
        "out": layer.out_features,
        "bias": layer.bias is not None,
    }


def tril_facts(module: torch.nn.Module) -> dict:
    """How ``module.tril`` is kept (buffer, parameter, saved in state_dict) and a copy of it."""
    buffers = dict(module.named_buffers(recurse=False))
    parameters = dict(module.named_parameters(recurse=False))
    value = buffers.get("tril", parameters.get("tril", getattr(module, "tril", None)))
    return {
        "buffer": "tril" in buffers,
        "parameter": "tril" in parameters,
        "saved": "tril" in module.state_dict(),
        "value": value.detach().clone() if isinstance(value, torch.Tensor) else None,
    }
