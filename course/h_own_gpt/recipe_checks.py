"""Checks for assignment H's training recipe and tokens: parameter groups, the learning-rate
schedule, sampling the next token and byte-pair merges.

As in :mod:`course.h_own_gpt.checks`, an ``observe_*`` function calls the student's code and
keeps what it returned, and a ``judge_*`` function decides from that. Where a verdict needs the
right answer (the schedule's values, the distribution to sample from, the merges), the caller
passes a function that computes it, and the same function with ``mistake=NAME`` computes what a
known mistake gives: the notebook's hidden cells define it inline, the trusted judge in
``judge/h_own_gpt.py``. The visible cells' checks use properties and worked examples only.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from course.probing import returned
from course.testcells import check, expected_got, fail

# ---------------------------------------------------------------- the mistakes, named
ALL_DECAY = (
    "every parameter is decayed. Weight decay pulls weights towards 0: right for the matrices, "
    "wrong for LayerNorm's gains (pulled towards 0 instead of 1) and the biases (offsets). "
    "Put parameters with p.dim() < 2 in the group with weight_decay 0.0."
)
BY_NAME = (
    "the groups were chosen by name ('weight' in the name), which puts LayerNorm's 1-D weight "
    "in the decayed group. Choose by shape: p.dim() >= 2 is decayed, the rest is not."
)
EMBEDDING_NO_DECAY = (
    "the embeddings are in the group without decay. The rule of this notebook is by shape: "
    "every parameter of 2 or more dimensions, embeddings included, is decayed."
)
TIED_TWICE = (
    "the tied weight is listed twice (as tok_emb.weight and head.weight): AdamW would update it "
    "twice per step and refuses it. Iterate over model.parameters() (or named_parameters()), "
    "which give a shared tensor once."
)
WARMUP_FROM_ZERO = (
    "the warm-up starts at 0 (max_lr * step / warmup_steps): the first step would not move the "
    "weights. Use max_lr * (step + 1) / warmup_steps."
)
COSINE_TO_ZERO = (
    "the cosine goes down to 0, not to min_lr: use min_lr + 0.5 (max_lr - min_lr)(...)."
)
PROGRESS_FROM_START = (
    "the cosine's progress counts from step 0 ((step) / total_steps); it should count from the "
    "end of the warm-up: (step - warmup_steps) / (total_steps - warmup_steps)."
)
NO_FLOOR = (
    "after total_steps the cosine goes on (the rate rises again); from total_steps on, return "
    "min_lr."
)
TIES_DROPPED = (
    "top_k keeps exactly k tokens (torch.topk's indices) and drops tokens tied with the k-th "
    "largest logit; keep every logit >= the k-th largest value."
)
CROSSING_DROPPED = (
    "top_p drops the token whose probability makes the total reach top_p. Keep the smallest set "
    "of most probable tokens whose total reaches top_p: that token included."
)
TOP_P_ON_ALL = (
    "top_p is computed on the softmax of all the logits; compute it on what top_k left (the "
    "softmax of the kept logits)."
)
TEMPERATURE_AFTER = (
    "the temperature has no effect here (dividing probabilities by it changes nothing once "
    "they are normalised). Divide the logits by the temperature before the softmax."
)
GLOBAL_GENERATOR = (
    "the draws do not follow the generator argument (PyTorch's global generator was used). "
    "Pass generator=generator to torch.multinomial."
)
END_OF_WORD = (
    "the merges hold an end-of-word marker (such as '</w>'); here every word starts as its "
    "characters only (the space is the word's leading '\u2581')."
)
NOT_WEIGHTED = "the pairs are counted once per distinct word; weight each by the word's count."
TIE_FIRST = (
    "a tie between pairs goes to the pair seen first; the contract breaks ties to the smallest "
    "pair in Python's tuple order (min over the tied pairs)."
)
NON_OVERLAPPING_COUNT = (
    "overlapping occurrences are counted once ('a a a' holds the pair (a, a) twice); count every "
    "adjacent pair of symbols."
)
STRING_REPLACE = (
    "the merge was done by replacing text in the space-joined word, which also matches where a "
    "symbol only ends or starts with the pair's symbols ('xa b' -> 'xab'). Merge on the list of "
    "symbols."
)


# ================================================================ optimizer_groups
class GroupModel(nn.Module):
    """A small model with every kind of parameter: embeddings (one tied to a head), a norm,
    biases, a 3-D weight and a 1-D parameter of its own."""

    def __init__(self, vocab: int, width: int, extra: int) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, width)
        self.pos_emb = nn.Embedding(extra, width)
        self.ln = nn.LayerNorm(width)
        self.proj = nn.Linear(width, width)
        self.conv = nn.Conv1d(width, width, 3)
        self.scale = nn.Parameter(torch.ones(width))
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok_emb.weight


def group_cases(seed: int, hidden: bool) -> list[dict]:
    """The models' sizes and the weight decay of each call of optimizer_groups."""
    if not hidden:
        return [{"vocab": 10, "width": 4, "extra": 3, "weight_decay": 0.1}]
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(2):
        values = torch.randint(2, 9, (3,), generator=gen).tolist()
        decay = round(float(torch.rand((), generator=gen)) * 0.2 + 0.01, 4)
        cases.append(
            {"vocab": values[0] + 4, "width": values[1], "extra": values[2], "weight_decay": decay}
        )
    return cases


def group_model(case: dict) -> nn.Module:
    """The model of a case (the same on both sides: its parameters are named, not valued)."""
    return GroupModel(case["vocab"], case["width"], case["extra"])


def observe_groups(optimizer_groups: Callable, case: dict) -> object:
    """The groups as parameter names, their weight decays, and whether AdamW accepts them."""
    model = group_model(case)
    groups = optimizer_groups(model, case["weight_decay"])
    if not isinstance(groups, (list, tuple)):
        return {"type": type(groups).__name__}
    names = {id(p): n for n, p in model.named_parameters()}
    seen = []
    for group in groups:
        if not isinstance(group, dict) or "params" not in group:
            return {"type": f"a list holding {type(group).__name__}"}
        seen.append(
            {
                "names": [
                    names.get(id(p), "<not a parameter of the model>") for p in group["params"]
                ],
                "weight_decay": group.get("weight_decay", "<missing>"),
            }
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a duplicate parameter: judged from the names
            torch.optim.AdamW(groups, lr=1e-3)
        adamw = None
    except Exception as error:  # noqa: BLE001 - AdamW's refusal is an observation
        adamw = f"{type(error).__name__}: {error}"[:300]
    return {"groups": seen, "adamw": adamw}


def judge_groups(got: object, case: dict) -> None:
    """Two groups; every parameter once; decay exactly the parameters of 2 or more dims."""
    name = f"optimizer_groups(model, weight_decay={case['weight_decay']})"
    got = returned(got, name)
    check(
        isinstance(got, dict) and "groups" in got,
        f"{name} should return a list of 2 dicts; got {got}",
    )
    assert isinstance(got, dict)
    groups = got["groups"]
    check(
        len(groups) == 2,
        expected_got(
            f"{name} should return two groups.", "[decay, no_decay]", f"{len(groups)} groups"
        ),
    )
    decays = [g["weight_decay"] for g in groups]
    check(
        decays[0] == case["weight_decay"] and decays[1] == 0.0,
        expected_got(f"{name}: the groups' weight_decay.", [case["weight_decay"], 0.0], decays),
    )
    model = group_model(case)
    dims = {n: p.dim() for n, p in model.named_parameters()}
    listed = [n for g in groups for n in g["names"]]
    if listed.count("tok_emb.weight") > 1:
        fail(f"{name}: {TIED_TWICE}")
    strangers = sorted({n for n in listed if n not in dims})
    check(not strangers, f"{name}: the groups hold tensors that are not parameters of the model.")
    twice = sorted({n for n in listed if listed.count(n) > 1})
    check(not twice, f"{name}: {twice} are in the groups more than once; each parameter once.")
    missing = sorted(set(dims) - set(listed))
    check(not missing, f"{name}: {missing} are in no group; every parameter must be in one.")
    decay, plain = set(groups[0]["names"]), set(groups[1]["names"])
    if decay == set(dims):
        fail(f"{name}: {ALL_DECAY}")
    if "ln.weight" in decay and "ln.bias" not in decay:
        fail(f"{name}: {BY_NAME}")
    if {"tok_emb.weight", "pos_emb.weight"} & plain:
        fail(f"{name}: {EMBEDDING_NO_DECAY}")
    expected = {n for n, d in dims.items() if d >= 2}
    check(
        decay == expected,
        expected_got(f"{name}: the decayed group.", sorted(expected), sorted(decay)),
    )
    check(got["adamw"] is None, f"{name}: torch.optim.AdamW refuses the groups: {got['adamw']}")


# ================================================================ lr_at
def lr_cases(seed: int) -> list[dict]:
    """Schedules drawn from ``seed``, each with the steps where it is read (all phases)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(3):
        warmup = int(torch.randint(1, 20, (1,), generator=gen))
        total = warmup + int(torch.randint(5, 200, (1,), generator=gen))
        max_lr = round(float(torch.rand((), generator=gen)) * 1e-2 + 1e-4, 6)
        min_lr = round(max_lr * float(torch.rand((), generator=gen)) * 0.5, 8)
        steps = sorted(set(range(0, warmup + 2)) | set(range(total - 2, total + 3)))
        steps += torch.randint(0, total + 20, (10,), generator=gen).tolist()
        cases.append(
            {
                "max_lr": max_lr,
                "warmup_steps": warmup,
                "total_steps": total,
                "min_lr": min_lr,
                "steps": steps,
            }
        )
    return cases


LR_VISIBLE = {
    "max_lr": 1.0,
    "warmup_steps": 10,
    "total_steps": 110,
    "min_lr": 0.1,
    "steps": list(range(0, 121)),
}


def observe_lr(lr_at: Callable, case: dict) -> list:
    """``lr_at`` at each step of the case."""
    args = (case["max_lr"], case["warmup_steps"], case["total_steps"], case["min_lr"])
    return [lr_at(step, *args) for step in case["steps"]]


def _lr_name(case: dict) -> str:
    return (
        f"lr_at(step, max_lr={case['max_lr']}, warmup_steps={case['warmup_steps']}, "
        f"total_steps={case['total_steps']}, min_lr={case['min_lr']})"
    )


def _numbers(got: object, n: int, name: str) -> list[float]:
    got = returned(got, name)
    check(
        isinstance(got, list) and len(got) == n,
        f"{name}: not one value per step",
    )
    assert isinstance(got, list)
    for value in got:
        check(
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value),
            expected_got(f"{name} should return a float.", "a finite float", repr(value)),
        )
    return [float(v) for v in got]


def judge_lr_visible(got: object) -> None:
    """The visible example: warm-up over 10 steps to 1.0, cosine to 0.1 at step 110.

    At a few steps the values of the known mistakes are worked out by hand, to name them.
    """
    case = LR_VISIBLE
    name = _lr_name(case)
    values = dict(zip(case["steps"], _numbers(got, len(case["steps"]), name), strict=True))

    def early(step: int) -> float:  # the cosine with its progress counted from step 0
        return 0.1 + 0.45 * (1 + math.cos(math.pi * step / 110))

    def near(step: int, expected: float, hint: str, wrong: dict[str, float]) -> None:
        value = values[step]
        if math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-9):
            return
        for message, mistaken in wrong.items():
            if math.isclose(value, mistaken, rel_tol=1e-6, abs_tol=1e-9):
                fail(f"{name}: {message} (step {step}: {value:.6g} instead of {expected})")
        fail(f"{name}: at step {step} expected {expected}, got {value:.6g}. {hint}")

    warmup = "Warm-up: max_lr * (step + 1) / warmup_steps."
    near(0, 0.1, warmup, {WARMUP_FROM_ZERO: 0.0})
    near(4, 0.5, warmup, {WARMUP_FROM_ZERO: 0.4})
    near(9, 1.0, "The last warm-up step reaches max_lr.", {WARMUP_FROM_ZERO: 0.9})
    near(10, 1.0, "The cosine starts at max_lr.", {PROGRESS_FROM_START: early(10)})
    halfway = "Halfway through the cosine: (max_lr + min_lr) / 2."
    near(60, 0.55, halfway, {COSINE_TO_ZERO: 0.5, PROGRESS_FROM_START: early(60)})
    near(110, 0.1, "At total_steps: min_lr.", {COSINE_TO_ZERO: 0.0})
    near(
        115,
        0.1,
        "After total_steps: min_lr.",
        {NO_FLOOR: 0.1 + 0.45 * (1 + math.cos(1.05 * math.pi))},
    )


def judge_lr(
    got: object, case: dict, schedule: Callable[..., float], mistakes: tuple[str, ...]
) -> None:
    """Compare with ``schedule(step, ...)``; name the mistake whose values ``got`` are."""
    name = _lr_name(case)
    values = _numbers(got, len(case["steps"]), name)
    args = (case["max_lr"], case["warmup_steps"], case["total_steps"], case["min_lr"])

    def same(expected: list[float]) -> bool:
        return all(
            math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
            for a, b in zip(values, expected, strict=True)
        )

    if same([schedule(s, *args) for s in case["steps"]]):
        return
    for mistake in mistakes:
        if same([schedule(s, *args, mistake=mistake) for s in case["steps"]]):
            fail(f"{name}: {globals()[mistake]}")
    for step, value in zip(case["steps"], values, strict=True):
        expected = schedule(step, *args)
        if not math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-12):
            fail(expected_got(f"{name} is wrong at step {step}.", expected, value))


def diagnose_groups(optimizer_groups: Callable, cases: list[dict]) -> None:
    """Observe and judge ``optimizer_groups`` on each case (a test cell)."""
    for case in cases:
        judge_groups(observe_groups(optimizer_groups, case), case)
