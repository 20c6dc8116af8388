"""Assignment H's verdicts: the GPT's modules, its training recipe and its tokens, on observations.

The modules are judged by :mod:`course.h_own_gpt.checks` from the weights and outputs the
kernel recorded (expected outputs from PyTorch's operations on those weights); the recipe and
the tokens by :mod:`course.h_own_gpt.recipe_checks` and :mod:`course.h_own_gpt.token_checks`,
given the references below: the schedule, the distribution ``sample_next`` must draw from and
the merges, each also computing what a known mistake gives (``mistake=NAME``). The inputs are
drawn from the per-submission seed by the same functions the probe uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from course import contract
from course.h_own_gpt import checks, recipe_checks, step_checks, token_checks
from course.testcells import GradingError, check, fail

LR_MISTAKES = ("WARMUP_FROM_ZERO", "COSINE_TO_ZERO", "PROGRESS_FROM_START", "NO_FLOOR")
BPE_MISTAKES = ("NOT_WEIGHTED", "TIE_FIRST", "NON_OVERLAPPING_COUNT", "STRING_REPLACE")


# ---------------------------------------------------------------- references
def schedule(step, max_lr, warmup_steps, total_steps, min_lr, mistake=None) -> float:
    """Linear warm-up, then a cosine from max_lr to min_lr, then min_lr."""
    if step < warmup_steps:
        return max_lr * (step + (mistake != "WARMUP_FROM_ZERO")) / warmup_steps
    if step >= total_steps and mistake != "NO_FLOOR":
        return min_lr
    floor = 0.0 if mistake == "COSINE_TO_ZERO" else min_lr
    if mistake == "PROGRESS_FROM_START":
        progress = step / total_steps
    else:
        progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return floor + 0.5 * (max_lr - floor) * (1 + math.cos(math.pi * progress))


def _nucleus(probs: torch.Tensor, top_p: float, crossing: bool = True) -> torch.Tensor:
    """The tokens kept by top_p: most probable first, until the total reaches top_p."""
    order = torch.argsort(probs, descending=True, stable=True)
    total = torch.cumsum(probs[order], 0)
    before = total - probs[order]  # the total of the more probable tokens
    keep_sorted = before < top_p if crossing else total < top_p
    keep_sorted[0] = True
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order[keep_sorted]] = True
    return keep


def distribution(logits, temperature, top_k, top_p, mistake=None) -> list[float]:
    """The probabilities sample_next draws from (float64)."""
    z = logits.double() / (1.0 if mistake == "TEMPERATURE_AFTER" else temperature)
    if top_k is not None:
        keep = torch.zeros_like(z, dtype=torch.bool)
        if mistake == "TIES_DROPPED":
            keep[torch.topk(z, top_k).indices] = True
        else:
            keep = z >= torch.topk(z, top_k).values[-1]
        z = z.masked_fill(~keep, float("-inf"))
    if top_p is not None:
        base = logits.double() / temperature if mistake == "TOP_P_ON_ALL" else z
        keep = _nucleus(torch.softmax(base, 0), top_p, crossing=mistake != "CROSSING_DROPPED")
        z = z.masked_fill(~keep, float("-inf"))
    return torch.softmax(z, 0).tolist()


def _merge(symbols: list[str], pair: tuple[str, str], by_text: bool) -> list[str]:
    if by_text:
        return " ".join(symbols).replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1]).split(" ")
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def merges(word_counts, num_merges, mistake=None) -> list[tuple[str, str]]:
    """Byte-pair merges: most frequent adjacent pair, ties to the smallest, merged left to right."""
    words = [(list(word), count) for word, count in word_counts.items()]
    learned: list[tuple[str, str]] = []
    for _ in range(num_merges):
        counts: dict[tuple[str, str], int] = {}
        for symbols, count in words:
            weight = 1 if mistake == "NOT_WEIGHTED" else count
            pairs = list(zip(symbols, symbols[1:], strict=False))
            if mistake == "NON_OVERLAPPING_COUNT":
                seen = {p: len(symbols) - len(_merge(symbols, p, False)) for p in pairs}
            else:
                seen = {p: pairs.count(p) for p in pairs}
            for pair, n in seen.items():
                counts[pair] = counts.get(pair, 0) + n * weight
        if not counts:
            break
        best = max(counts.values())
        tied = [pair for pair, n in counts.items() if n == best]
        pair = tied[0] if mistake == "TIE_FIRST" else min(tied)
        learned.append(pair)
        words = [(_merge(s, pair, mistake == "STRING_REPLACE"), c) for s, c in words]
    return learned


# ---------------------------------------------------------------- verdicts
def _each(got: object, cases: list, judge) -> None:
    check(isinstance(got, list) and len(got) == len(cases), "not one observation per case")
    assert isinstance(got, list)
    for value, case in zip(got, cases, strict=True):
        judge(value, case)


def _pair(cases: Callable, judge: Callable) -> tuple[Callable, Callable]:
    """The verdicts of one pair of test cells: each case of seed 0 (the visible cell's) or of the
    grader's seed (hidden) judged against what the probe observed."""

    def visible(seed: int, got: object) -> None:
        _each(got, cases(0, hidden=False), judge)

    def hidden(seed: int, got: object) -> None:
        _each(got, cases(seed, hidden=True), judge)

    return visible, hidden


attention_visible, attention_hidden = _pair(checks.attention_cases, checks.judge_attention)
block_visible, block_hidden = _pair(checks.attention_cases, checks.judge_block)
gpt_visible, gpt_hidden = _pair(checks.gpt_cases, checks.judge_gpt)
groups_visible, groups_hidden = _pair(recipe_checks.group_cases, recipe_checks.judge_groups)


def lr_visible(seed: int, got: object) -> None:
    recipe_checks.judge_lr_visible(got)


def lr_hidden(seed: int, got: object) -> None:
    _each(
        got,
        recipe_checks.lr_cases(seed),
        lambda value, case: recipe_checks.judge_lr(value, case, schedule, LR_MISTAKES),
    )


def step_visible(seed: int, got: object) -> None:
    _each(got, [step_checks.STEP_VISIBLE], step_checks.judge_train_step)


def step_hidden(seed: int, got: object) -> None:
    _each(got, step_checks.step_cases(seed), step_checks.judge_train_step)


def sample_visible(seed: int, got: object) -> None:
    cases = token_checks.sample_visible_cases()
    check(isinstance(got, list) and len(got) == len(cases), "not one observation per case")
    assert isinstance(got, list)
    for value, case, probs, wrong in zip(
        got, cases, token_checks.VISIBLE_PROBABILITIES, token_checks.VISIBLE_MISTAKES, strict=True
    ):
        token_checks.judge_sampling(value, case, probs, wrong)


def _sample_judge(value: object, case: dict) -> None:
    args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
    wrong = {m: distribution(*args, mistake=m) for m in token_checks.SAMPLE_MISTAKES}
    token_checks.judge_sampling(value, case, distribution(*args), wrong)


def sample_hidden(seed: int, got: object) -> None:
    """The grader's cases. A failure there, when the notebook's own hidden cases (those the
    kernel's test drew, and passed) pass here too, asks for a review with the numbers: the kernel
    and the judge then part by their cases (a rounding, or a mistake those cases miss), not by a
    test that was changed. A statistical failure asks for one anyway; a failure of the notebook's
    own cases stands (with the kernel's pass, a flag)."""
    check(
        isinstance(got, dict) and set(got) == {"grader", "notebook"},
        "no observation of the grader's and the notebook's cases",
    )
    assert isinstance(got, dict)
    cases = token_checks.sample_cases(seed)
    check(isinstance(got["grader"], list) and len(got["grader"]) == len(cases), "not one per case")
    for value, case in zip(got["grader"], cases, strict=True):
        try:
            _sample_judge(value, case)
        except GradingError as error:
            if error.mistake.startswith(contract.STATISTICAL):
                raise
            try:
                own = token_checks.sample_cases(token_checks.NOTEBOOK_SEED)
                _each(got["notebook"], own, _sample_judge)
            except GradingError:
                raise error from None  # the kernel passed cases that fail here: it stands
            args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
            shown = token_checks.numbers(value, distribution(*args))
            fail(
                f"{token_checks.case_name(case)}: the notebook's own hidden cases pass here "
                f"too, this one does not; {shown}\n{error}",
                contract.CASES_DIFFER + error.mistake,
            )


def bpe_visible(seed: int, got: object) -> None:
    check(isinstance(got, list) and len(got) == 1, "no observation of bpe_merges")
    assert isinstance(got, list)
    token_checks.judge_bpe_visible(got[0], tuples=False)


def bpe_hidden(seed: int, got: object) -> None:
    cases = token_checks.bpe_cases(seed)
    token_checks.judge_bpe(got, cases, merges, BPE_MISTAKES, tuples=False)
