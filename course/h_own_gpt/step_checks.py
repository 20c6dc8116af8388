"""Checks for assignment H's training step, ``train_step(model, optimizer, x, y, step,
lr_schedule, grad_clip=1.0) -> float``: they name the usual mistakes.

The student's function is called on a small language model (:class:`StepModel`) whose
parameters were given seeded random values, with an optimizer that records what it saw
(:class:`RecordingSGD`: the learning rate of each group and the gradients when ``step()`` was
called, and each ``zero_grad`` call). Every parameter holds a stale gradient before the call,
as after a previous step. Zeroing it in place (``zero_grad(set_to_none=False)``, or
``p.grad.zero_()``) is as right as dropping it (``set_to_none=True``): every parameter of the
model gets a gradient, so the step is the same, and the gradients are judged by value.
:func:`observe_train_step` keeps that record, the value returned and the parameters afterwards;
:func:`judge_train_step` compares them with what PyTorch's own operations give on the same model
(autograd's gradients, clipped to the global norm like ``torch.nn.utils.clip_grad_norm_``; plain
SGD's update).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course.probing import integer, returned
from course.testcells import check, expected_got, fail, randomise_parameters, same_values

# ---------------------------------------------------------------- the mistakes, named
NO_STEP = "optimizer.step() was not called once: call it once, after clipping the gradients."
LR_NOT_SET = (
    "the learning rate was not set: optimizer.step() ran with the groups' old lr. Before the "
    "step, set group['lr'] = lr_schedule(step) for every group of optimizer.param_groups."
)
LR_ONE_GROUP = (
    "only the first parameter group got lr_schedule(step); set it on every group of "
    "optimizer.param_groups (the decayed and the not decayed)."
)
ZEROED_AFTER_BACKWARD = (
    "optimizer.step() saw no gradient: they were zeroed after backward (or backward was not "
    "called). The order: zero_grad, forward, backward, clip, step."
)
NO_ZERO_GRAD = (
    "the gradients were not zeroed: backward adds to the gradients left by the previous step, "
    "so the step used both. Call optimizer.zero_grad(set_to_none=True) before backward."
)
CLIP_AFTER_STEP = (
    "the gradients were clipped after optimizer.step(): the step used them unclipped. Clip "
    "between backward and step."
)
NO_CLIP = (
    "the gradients were not clipped: call torch.nn.utils.clip_grad_norm_(model.parameters(), "
    "grad_clip) between backward and step (skip it only when grad_clip is None)."
)
CLIP_BY_VALUE = (
    "each gradient value was clipped to +-grad_clip (clip_grad_value_); clip the global norm "
    "of all the gradients together, torch.nn.utils.clip_grad_norm_."
)
CLIP_PER_PARAMETER = (
    "each parameter's gradient was clipped to norm grad_clip on its own; clip the global norm "
    "of all the gradients together (one call of clip_grad_norm_ on model.parameters())."
)
CLIPPED_WITHOUT_LIMIT = "grad_clip=None should skip the clipping; the gradients were changed."
RETURNS_TENSOR = (
    "train_step returned a tensor; return loss.item(), a Python float (a tensor would keep the "
    "step's graph alive in the history of losses)."
)

STALE_LRS = (91.0, 47.0)  # the groups' lr before the call: no schedule gives these


# ---------------------------------------------------------------- the model and the optimizer
class StepModel(nn.Module):
    """A small language model with GPT's interface: ``forward(idx, targets=None) -> (logits,
    loss)``; an embedding, a LayerNorm and a linear read-out with a bias."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx (B, T) -> logits (B, T, V) and the mean cross-entropy against targets (or None)."""
        logits = self.out(self.norm(self.emb(idx)))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class RecordingSGD(torch.optim.SGD):
    """Plain SGD that records each ``zero_grad`` call and, at each ``step``, the groups' lr
    and the gradients it is about to use."""

    def __init__(self, model: nn.Module) -> None:
        matrices = [p for p in model.parameters() if p.dim() >= 2]
        vectors = [p for p in model.parameters() if p.dim() < 2]
        groups = [{"params": matrices, "lr": STALE_LRS[0]}, {"params": vectors, "lr": STALE_LRS[1]}]
        super().__init__(groups, lr=STALE_LRS[0])
        self.watched = list(model.parameters())
        self.log: list[dict] = []

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Record the call, then zero as SGD does."""
        self.log.append({"event": "zero_grad", "set_to_none": bool(set_to_none)})
        super().zero_grad(set_to_none)

    def step(self, closure: Callable | None = None) -> object:
        """Record the lr of each group and the gradients, then step as SGD does."""
        grads = [None if p.grad is None else p.grad.detach().clone() for p in self.watched]
        self.log.append(
            {
                "event": "step",
                "lrs": [float(g["lr"]) for g in self.param_groups],
                "grads": grads,
            }
        )
        return super().step(closure)


class StepSchedule:
    """A learning-rate schedule with a distinct value at every step: ``base / (step + 2)``."""

    def __init__(self, base: float) -> None:
        self.base = base

    def __call__(self, step: int) -> float:
        return self.base / (step + 2)


# ---------------------------------------------------------------- cases
def _case(gen: torch.Generator, grad_clip: float | None, given: bool) -> dict:
    vocab, width = integer(gen, 5, 17), integer(gen, 3, 9)
    batch, length = integer(gen, 1, 4), integer(gen, 2, 9)
    return {
        "vocab": vocab,
        "width": width,
        "seed": integer(gen, 0, 10_001),
        "x": torch.randint(vocab, (batch, length), generator=gen),
        "y": torch.randint(vocab, (batch, length), generator=gen),
        "step": integer(gen, 0, 500),
        "base_lr": round(0.01 + 0.2 * float(torch.rand((), generator=gen)), 4),
        "grad_clip": grad_clip,
        "clip_given": given,  # False: train_step is called without grad_clip (its default 1.0)
    }


STEP_VISIBLE = {
    "vocab": 6,
    "width": 4,
    "seed": 7,
    "x": torch.tensor([[0, 1, 2, 3, 4], [5, 4, 3, 2, 1]]),
    "y": torch.tensor([[1, 2, 3, 4, 5], [4, 3, 2, 1, 0]]),
    "step": 3,
    "base_lr": 0.1,
    "grad_clip": 0.05,
    "clip_given": True,
}


def step_cases(seed: int) -> list[dict]:
    """The hidden cases: a small and a large clip, no clip (None), and the default grad_clip."""
    gen = torch.Generator().manual_seed(seed)
    limits = ((0.01 + 0.1 * float(torch.rand((), generator=gen)), True), (1e3, True))
    limits += ((None, True), (1.0, False))
    return [_case(gen, clip, given) for clip, given in limits]


def step_model(case: dict) -> StepModel:
    """The case's model, with seeded random values (the same on both sides)."""
    with torch.random.fork_rng(devices=[]):
        model = StepModel(case["vocab"], case["width"])
    return randomise_parameters(model, case["seed"])


def stale_gradients(model: nn.Module, case: dict) -> list[torch.Tensor]:
    """What a previous step would have left in ``.grad``: seeded values, as large as real ones."""
    gen = torch.Generator().manual_seed(case["seed"] + 1)
    return [torch.randn(p.shape, generator=gen) for p in model.parameters()]


# ---------------------------------------------------------------- observing and judging
def _name(case: dict) -> str:
    clip = f", grad_clip={case['grad_clip']}" if case["clip_given"] else ""
    return f"train_step(model, optimizer, x {tuple(case['x'].shape)}, y, step={case['step']}, " + (
        f"lr_schedule{clip})"
    )


def observe_train_step(train_step: Callable, case: dict) -> dict:
    """Call ``train_step`` once on the case's model and a recording optimizer."""
    model = step_model(case)
    stale = stale_gradients(model, case)
    for parameter, grad in zip(model.parameters(), stale, strict=True):
        parameter.grad = grad
    optimizer = RecordingSGD(model)
    args = (model, optimizer, case["x"].clone(), case["y"].clone(), case["step"])
    schedule = StepSchedule(case["base_lr"])
    with warnings.catch_warnings():  # float(loss) warns; it is a right way to get the float
        warnings.simplefilter("ignore")
        if case["clip_given"]:
            value = train_step(*args, schedule, case["grad_clip"])
        else:
            value = train_step(*args, schedule)
    if isinstance(value, torch.Tensor):
        value = {"tensor": value.detach().clone()}
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)  # numpy's float64 too, as the plain number it equals
    else:
        value = {"type": type(value).__name__}
    return {
        "returned": value,
        "log": optimizer.log,
        "after": [p.detach().clone() for p in model.parameters()],
        "grads_after": [
            None if p.grad is None else p.grad.detach().clone() for p in model.parameters()
        ],
    }


def expected_step(case: dict) -> dict:
    """What PyTorch gives: the loss, the raw and the clipped gradients, the parameters after."""
    model = step_model(case)
    _, loss = model(case["x"], case["y"])
    raw = list(torch.autograd.grad(loss, list(model.parameters())))
    clip = case["grad_clip"]
    clipped = _clipped(raw, clip)
    lr = StepSchedule(case["base_lr"])(case["step"])
    with torch.no_grad():
        after = [p - lr * g for p, g in zip(model.parameters(), clipped, strict=True)]
    return {
        "loss": loss.item(),
        "raw": raw,
        "norm": _global_norm(raw),
        "clipped": clipped,
        "lr": lr,
        "after": after,
    }


def _global_norm(grads: list[torch.Tensor]) -> float:
    return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))


def _clipped(grads: list[torch.Tensor], clip: float | None) -> list[torch.Tensor]:
    """The gradients scaled as clip_grad_norm_ scales them (unchanged when clip is None)."""
    factor = 1.0 if clip is None else min(1.0, clip / (_global_norm(grads) + 1e-6))
    return [g * factor for g in grads]


def _same(got: list, expected: list) -> bool:
    return all(
        isinstance(a, torch.Tensor) and a.shape == b.shape and same_values(a, b, 1e-6, 1e-4)
        for a, b in zip(got, expected, strict=True)
    )


def _judge_lrs(lrs: list[float], lr: float, name: str) -> None:
    if all(math.isclose(v, lr, rel_tol=1e-9) for v in lrs):
        return
    if [float(v) for v in lrs] == list(STALE_LRS):
        fail(f"{name}: {LR_NOT_SET}")
    if math.isclose(lrs[0], lr, rel_tol=1e-9):
        fail(f"{name}: {LR_ONE_GROUP}")
    fail(expected_got(f"{name}: the groups' lr at optimizer.step().", [lr, lr], lrs))


def _clip_mistakes(raw: list[torch.Tensor], clip: float) -> dict[str, list[torch.Tensor]]:
    per_parameter = [g * min(1.0, clip / (float(g.norm()) + 1e-6)) for g in raw]
    return {
        CLIP_BY_VALUE: [g.clamp(-clip, clip) for g in raw],
        CLIP_PER_PARAMETER: per_parameter,
    }


def _judge_gradients(got: dict, step: dict, expected: dict, case: dict, name: str) -> None:
    grads = step["grads"]
    if all(g is None for g in grads):
        fail(f"{name}: {ZEROED_AFTER_BACKWARD}")
    if _same(grads, expected["clipped"]):  # zeroed in place or dropped: the same step
        return
    clip, raw = case["grad_clip"], expected["raw"]
    stale = stale_gradients(step_model(case), case)
    summed = [s + g for s, g in zip(stale, raw, strict=True)]
    if _same(grads, _clipped(summed, clip)) or _same(grads, summed):
        fail(f"{name}: {NO_ZERO_GRAD}")
    if clip is None:
        fail(f"{name}: {CLIPPED_WITHOUT_LIMIT}")
    if _same(grads, raw):
        after = got["grads_after"]
        clipped_later = all(a is not None for a in after) and _same(after, expected["clipped"])
        fail(f"{name}: {CLIP_AFTER_STEP if clipped_later else NO_CLIP}")
    for message, wrong in _clip_mistakes(raw, clip).items():
        if _same(grads, wrong):
            fail(f"{name}: {message}")
    fail(
        f"{name}: the gradients at optimizer.step() are not those of the loss, clipped to a "
        f"global norm of {clip} (raw norm {expected['norm']:.4g})."
    )


def judge_train_step(got: object, case: dict) -> None:
    """The lr set, the gradients zeroed, computed and clipped, one step, the loss returned."""
    name = _name(case)
    got = returned(got, name)
    check(isinstance(got, dict) and "log" in got, f"no observation of {name}")
    assert isinstance(got, dict)
    expected = expected_step(case)
    steps = [event for event in got["log"] if event["event"] == "step"]
    check(len(steps) == 1, f"{name}: {NO_STEP} (it was called {len(steps)} times)")
    _judge_lrs(steps[0]["lrs"], expected["lr"], name)
    _judge_gradients(got, steps[0], expected, case, name)
    value = got["returned"]
    if isinstance(value, dict) and "tensor" in value:
        fail(f"{name}: {RETURNS_TENSOR}")
    check(
        isinstance(value, float),
        expected_got(f"{name} should return the loss as a float.", "a float", value),
    )
    check(
        math.isclose(float(value), expected["loss"], rel_tol=1e-5, abs_tol=1e-6),
        expected_got(
            f"{name} should return the loss of this batch, before the step (loss.item()).",
            expected["loss"],
            value,
        ),
    )
    check(
        _same(got["after"], expected["after"]),
        f"{name}: the parameters after the call are not those of one step of the optimizer with "
        "the clipped gradients.",
    )


def diagnose_train_step(train_step: Callable, cases: list[dict]) -> None:
    """Observe and judge ``train_step`` on each case (a test cell)."""
    for case in cases:
        judge_train_step(observe_train_step(train_step, case), case)
