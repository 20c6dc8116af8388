"""What the trusted judge needs from assignment H's code (see :mod:`course.verify`).

One item per test cell of the notebook. Every item builds the student's modules or calls the
student's functions on the inputs that the judge draws too (the visible cells' examples, or
cases drawn from the grader's secret seed), with the ``observe_*`` collectors the test cells
use, and keeps one observation per case: a case whose call raises is kept as ``{"error": ...}``
and fails that item only.
"""

from __future__ import annotations

from collections.abc import Callable

from course.h_own_gpt import checks, recipe_checks, step_checks, token_checks
from course.probing import attempt, by_cell
from course.verify import student


def _each(observe: Callable, target: object, cases: list) -> list:
    return [attempt(observe, target, case) for case in cases]


def _pair(name: str, observe: Callable, cases: Callable) -> tuple[Callable, Callable]:
    """The visible and the hidden item of one pair of test cells: the student's ``name``
    observed on the cases of seed 0 (the visible cell's) or of the grader's seed (hidden)."""

    def visible(ns: dict, seed: int) -> object:
        return _each(observe, student(ns, name), cases(0, hidden=False))

    def hidden(ns: dict, seed: int) -> object:
        return _each(observe, student(ns, name), cases(seed, hidden=True))

    return visible, hidden


attention_visible, attention_hidden = _pair(
    "CausalSelfAttention", checks.observe_attention, checks.attention_cases
)
block_visible, block_hidden = _pair("Block", checks.observe_block, checks.attention_cases)
gpt_visible, gpt_hidden = _pair("GPT", checks.observe_gpt, checks.gpt_cases)
groups_visible, groups_hidden = _pair(
    "optimizer_groups", recipe_checks.observe_groups, recipe_checks.group_cases
)


def lr_visible(ns: dict, seed: int) -> object:
    return recipe_checks.observe_lr(student(ns, "lr_at"), recipe_checks.LR_VISIBLE)


def lr_hidden(ns: dict, seed: int) -> object:
    return _each(recipe_checks.observe_lr, student(ns, "lr_at"), recipe_checks.lr_cases(seed))


def step_visible(ns: dict, seed: int) -> object:
    cases = [step_checks.STEP_VISIBLE]
    return _each(step_checks.observe_train_step, student(ns, "train_step"), cases)


def step_hidden(ns: dict, seed: int) -> object:
    cases = step_checks.step_cases(seed)
    return _each(step_checks.observe_train_step, student(ns, "train_step"), cases)


def sample_visible(ns: dict, seed: int) -> object:
    cases = token_checks.sample_visible_cases()
    return _each(token_checks.observe_sampling, student(ns, "sample_next"), cases)


def sample_hidden(ns: dict, seed: int) -> object:
    """The grader's cases, and the cases of the notebook's own hidden test (which the judge reads
    when the grader's fail: passing there too, the failure asks for a review, not a flag)."""
    sampler = student(ns, "sample_next")
    return {
        "grader": _each(token_checks.observe_sampling, sampler, token_checks.sample_cases(seed)),
        "notebook": _each(
            token_checks.observe_sampling,
            sampler,
            token_checks.sample_cases(token_checks.NOTEBOOK_SEED),
        ),
    }


def _merges(bpe_merges: Callable, case: tuple) -> object:
    counts, n = case
    return bpe_merges(dict(counts), n)


def bpe_visible(ns: dict, seed: int) -> object:
    return _each(_merges, student(ns, "bpe_merges"), [token_checks.BPE_VISIBLE])


def bpe_hidden(ns: dict, seed: int) -> object:
    return _each(_merges, student(ns, "bpe_merges"), token_checks.bpe_cases(seed))


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/h_own_gpt.py (course.probing).
CELLS = {
    "test_attention_visible": "attention_visible",
    "test_attention_hidden": "attention_hidden",
    "test_block_visible": "block_visible",
    "test_block_hidden": "block_hidden",
    "test_gpt_visible": "gpt_visible",
    "test_gpt_hidden": "gpt_hidden",
    "test_groups_visible": "groups_visible",
    "test_groups_hidden": "groups_hidden",
    "test_lr_visible": "lr_visible",
    "test_lr_hidden": "lr_hidden",
    "test_step_visible": "step_visible",
    "test_step_hidden": "step_hidden",
    "test_sample_visible": "sample_visible",
    "test_sample_hidden": "sample_hidden",
    "test_bpe_visible": "bpe_visible",
    "test_bpe_hidden": "bpe_hidden",
}
ITEMS = by_cell(CELLS, globals())
