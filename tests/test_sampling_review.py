"""H's ``sample_next`` judged without chance where it can be, and chance never read as tampering.

A correct sampler once failed the trusted check of a graded notebook, which passed it in the
kernel: its 4,000 draws of one case looked like a sampler that drops top-p's crossing token, and
the notebook was flagged. The observation now records what the sampler gave ``torch.multinomial``
(the contract's way to draw), so a sampler that draws that way is judged on its probabilities,
whatever the random stream drew; the observation runs in a state of its own (the global
generator, the default dtype, autocast); and a disagreement between the kernel's check and the
judge's on frequencies (a sampler that draws another way) asks for a review instead of a flag.
Correct samplers of another order or precision give the judge's probabilities to within 1e-6, so
rounding does not part the two; what can is the cases, since the kernel's hidden test draws its
own (seed 2024) and the judge the grader's: a failure on the grader's cases alone, the
notebook's passing in the judge too, asks for a review with the numbers, and one on the
notebook's own cases, which the kernel passed, is still a flag.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from course import contract, verify
from course.h_own_gpt import probe, recipe_checks, token_checks
from grader.shared import finish, verification
from judge import core
from judge import h_own_gpt as judge
from tests.test_own_gpt import cells, reference

CASES = token_checks.sample_cases(2024)


def reference_sampler():
    return reference()["sample_next"]


def sorted_sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A correct sampler of another style: it draws among the sorted tokens, then maps back."""
    probs = torch.softmax(logits / temperature, dim=-1)
    values, order = torch.sort(probs, dim=-1, descending=True)
    if top_k is not None:
        values = values.masked_fill(values < values[:, top_k - 1 : top_k], 0.0)
    if top_p is not None:
        values = values / values.sum(-1, keepdim=True)
        values = values.masked_fill(torch.cumsum(values, -1) - values >= top_p, 0.0)
    picked = torch.multinomial(values, 1, generator=generator)
    return order.gather(-1, picked).squeeze(-1)


def crossing_dropped(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A wrong sampler, drawing by itself (no torch.multinomial): top-p drops its crossing token."""
    first = judge.distribution(logits[0], temperature, top_k, top_p, "CROSSING_DROPPED")
    cumulative = torch.tensor(first).cumsum(0)
    u = torch.rand(len(logits), generator=generator, dtype=torch.float64)
    return torch.searchsorted(cumulative, u).clamp(max=len(first) - 1)


def judged(sampler, case: dict) -> None:
    args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
    wrong = {m: judge.distribution(*args, mistake=m) for m in token_checks.SAMPLE_MISTAKES}
    got = token_checks.observe_sampling(sampler, case)
    token_checks.judge_sampling(got, case, judge.distribution(*args), wrong)


def test_the_reference_is_judged_on_the_probabilities_it_draws_from() -> None:
    sampler = reference_sampler()
    for case in CASES:
        got = token_checks.observe_sampling(sampler, case)
        assert torch.equal(got["multinomial"].reshape(-1), got["draws"])
        judged(sampler, case)


def test_no_drawn_case_sits_on_a_filter_edge() -> None:
    """Rounding never decides what a filter keeps: moving top_p by half the margin (300 seeds),
    or computing in float32 (40), keeps the same tokens as the judge's float64."""
    for seed in range(300):
        for case in token_checks.sample_cases(seed):
            args = (case["logits"], case["temperature"], case["top_k"])
            kept = torch.tensor(judge.distribution(*args, case["top_p"])) > 0
            if case["top_p"] is not None:
                for nudge in (-token_checks.EDGE / 2, token_checks.EDGE / 2):
                    moved = torch.tensor(judge.distribution(*args, case["top_p"] + nudge)) > 0
                    assert torch.equal(moved, kept), (seed, case)
            if seed < 40:  # the reference, in float32, keeps the same tokens
                got = token_checks.observe_sampling(reference_sampler(), case)
                assert torch.equal(got["drawn_from"] > 0, kept), (seed, case)


def test_the_verdict_does_not_hang_on_the_stream_when_the_probabilities_are_known() -> None:
    """The flake's case: draws that never hit top-p's crossing token (as a rare stream could give),
    from the right probabilities: the verdict follows the probabilities."""
    case = next(c for c in CASES if c["top_p"] is not None and c["top_k"] is not None)
    got = token_checks.observe_sampling(reference_sampler(), case)
    args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
    probs = torch.tensor(judge.distribution(*args))
    crossing = torch.tensor(judge.distribution(*args, mistake="CROSSING_DROPPED"))
    (dropped,) = torch.nonzero((probs > 0) & (crossing == 0)).flatten().tolist()
    kept = torch.nonzero(crossing > 0).flatten()
    unlucky = kept[torch.arange(token_checks.DRAWS) % len(kept)]  # never the crossing token
    got |= {"draws": unlucky, "again": unlucky, "multinomial": unlucky[:, None]}
    assert dropped not in unlucky.tolist()
    wrong = {m: judge.distribution(*args, mistake=m) for m in token_checks.SAMPLE_MISTAKES}
    token_checks.judge_sampling(got, case, probs.tolist(), wrong)  # passes
    got["drawn_from"] = crossing  # the same draws from the wrong probabilities: named, certain
    with pytest.raises(
        AssertionError, match="the token whose probability makes the total"
    ) as error:
        token_checks.judge_sampling(got, case, probs.tolist(), wrong)
    assert not error.value.mistake.startswith(contract.STATISTICAL)


def test_the_observation_ignores_the_state_the_notebook_left() -> None:
    sampler, case = reference_sampler(), CASES[5]
    clean = token_checks.observe_sampling(sampler, case)
    torch.manual_seed(123)
    rng = torch.get_rng_state()
    torch.set_default_dtype(torch.float64)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            left = token_checks.observe_sampling(sampler, case)
        assert torch.get_default_dtype() == torch.float64  # given back as it was
    finally:
        torch.set_default_dtype(torch.float32)
    assert torch.equal(torch.get_rng_state(), rng)
    assert torch.equal(left["draws"], clean["draws"])
    assert torch.equal(left["drawn_from"], clean["drawn_from"])


def test_the_kernel_draws_the_judges_cases_whatever_the_notebook_left(tmp_path) -> None:
    """A notebook that left float64 as the default dtype and autocast open: the kernel's hidden
    cases are still the judge's (drawn in float32), and the judge passes the reference."""
    namespace = {"sample_next": reference_sampler()}
    clean, left = tmp_path / "clean.pt", tmp_path / "left.pt"
    verify.observe("h_own_gpt", 31, str(clean), namespace)
    torch.set_default_dtype(torch.float64)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            verify.observe("h_own_gpt", 31, str(left), namespace)
        assert torch.get_default_dtype() == torch.float64  # given back as it was
    finally:
        torch.set_default_dtype(torch.float32)
    got = torch.load(left, weights_only=True)["test_sample_hidden"]
    expected = torch.load(clean, weights_only=True)["test_sample_hidden"]
    for one, other in zip(got["grader"], expected["grader"], strict=True):
        assert torch.equal(one["drawn_from"], other["drawn_from"])
    judge.sample_hidden(31, got)  # passes


def test_a_sampler_of_another_style_is_judged_on_its_frequencies() -> None:
    for case in CASES:
        got = token_checks.observe_sampling(sorted_sampler, case)
        assert not torch.equal(got["multinomial"].reshape(-1), got["draws"])  # mapped back
        judged(sorted_sampler, case)
    case = next(c for c in CASES if c["top_p"] is not None and c["top_k"] is not None)
    with pytest.raises(AssertionError, match=recipe_checks.CROSSING_DROPPED[:40]) as error:
        judged(crossing_dropped, case)
    assert error.value.mistake.startswith(contract.STATISTICAL)


def test_a_token_no_filter_keeps_is_a_certain_failure() -> None:
    case = next(c for c in CASES if c["top_k"] is not None and c["top_p"] is None)

    def everything(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        rows = torch.arange(len(logits)) % logits.shape[-1]
        return rows[torch.randperm(len(logits), generator=generator)]

    with pytest.raises(AssertionError, match="which the filters should have removed") as error:
        judged(everything, case)
    assert not error.value.mistake.startswith(contract.STATISTICAL)


def row(scores: dict[str, float]) -> SimpleNamespace:
    grades = [
        SimpleNamespace(name=name, auto_score=points, needs_manual_grade=False)
        for name, points in scores.items()
    ]
    return SimpleNamespace(grades=grades, flagged=False)


def test_a_statistical_disagreement_asks_for_a_review_not_a_flag() -> None:
    checked = verification.Verification(
        verdicts={"test_sample_hidden": "the frequencies do not follow", "test_bpe_hidden": None},
        mistakes={"test_sample_hidden": {"key": contract.STATISTICAL + "x:y+1", "message": "m"}},
    )
    notebook = row({"test_sample_hidden": 3.0, "test_bpe_hidden": 2.0})
    reasons = verification.apply_verdicts(notebook, checked)
    assert not notebook.flagged
    sample, bpe = notebook.grades
    assert (sample.auto_score, sample.needs_manual_grade) == (3.0, True)
    assert (bpe.auto_score, bpe.needs_manual_grade) == (2.0, False)
    (reason,) = reasons
    assert reason.startswith(verification.REVIEW) and "test_sample_hidden" in reason
    assert finish.status_of(reasons, False, "") == finish.FOR_REVIEW


def test_a_certain_disagreement_still_flags_and_beats_a_review() -> None:
    checked = verification.Verification(
        verdicts={"test_sample_hidden": "drew tokens [3]", "test_step_hidden": "no step"},
        mistakes={
            "test_sample_hidden": {"key": contract.STATISTICAL + "x:y+1", "message": "m"},
            "test_step_hidden": {"key": "course.h_own_gpt.step_checks:judge+3", "message": "m"},
        },
    )
    notebook = row({"test_sample_hidden": 3.0, "test_step_hidden": 2.0})
    reasons = verification.apply_verdicts(notebook, checked)
    assert notebook.flagged
    assert [g.auto_score for g in notebook.grades] == [3.0, 0.0]
    assert finish.status_of(reasons, False, "") == finish.FLAGGED


# ---------------------------------------------------------------- honest, or a changed test
# Samplers that follow the contract in another order or precision: the brief's suspects for the
# flag of a correct sampler. Each hands torch.multinomial the contract's probabilities to within
# 1e-6, ten times inside the judge's tolerance (1e-5 + 1e-4 p), on the notebook's cases and on
# another seed's: none of them gives a disagreement.
def float64_sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return reference_sampler()(logits.double(), temperature, top_k, top_p, generator)


def renormalising_sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Softmax first (temperature as a product), then each filter zeroes and renormalises."""
    probs = torch.softmax(logits * (1.0 / temperature), dim=-1)
    if top_k is not None:
        probs = probs.masked_fill(probs < torch.topk(probs, top_k).values[:, -1:], 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        values, order = torch.sort(probs, descending=True)
        drop = torch.cumsum(values, -1) > top_p
        drop[:, 1:] = drop[:, :-1].clone()  # keep the token that crosses top_p
        drop[:, 0] = False
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def ascending_sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Hugging Face's order: top-p from the least probable tokens' running total."""
    scores = logits / temperature
    if top_k is not None:
        scores = scores.masked_fill(scores < torch.topk(scores, top_k)[0][:, -1:], -torch.inf)
    if top_p is not None:
        values, order = torch.sort(scores, descending=False)
        drop = values.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[:, -1] = False
        scores = scores.masked_fill(drop.scatter(1, order, drop), -torch.inf)
    return torch.multinomial(scores.softmax(-1), 1, generator=generator).squeeze(-1)


@pytest.mark.parametrize(
    "sampler", [float64_sampler, renormalising_sampler, ascending_sampler], ids=lambda f: f.__name__
)
def test_correct_samplers_of_another_order_or_precision_agree_with_the_judge(sampler) -> None:
    for seed in (token_checks.NOTEBOOK_SEED, 7):
        for case in token_checks.sample_cases(seed):
            got = token_checks.observe_sampling(sampler, case)
            args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
            expected = torch.tensor(judge.distribution(*args), dtype=torch.float64)
            assert (got["drawn_from"] - expected).abs().max() < 1e-6, (seed, case)
        judge.sample_hidden(seed, probe.sample_hidden({"sample_next": sampler}, seed))


def test_the_probe_replays_the_notebooks_own_hidden_cases() -> None:
    """The judge reads the cases the notebook's hidden test drew: its seed is the probe's."""
    (hidden,) = [c for c in cells("tests") if "token_checks.sample_cases(" in "".join(c["source"])]
    assert f"token_checks.sample_cases({token_checks.NOTEBOOK_SEED})" in "".join(hidden["source"])


def nudged(observation: dict, case: dict, by: float) -> dict:
    """The observation of ``case`` as if the sampler's probabilities had moved ``by`` from its two
    most probable tokens' first to its second (a rounding the tolerance does not allow)."""
    args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
    probs = torch.tensor(judge.distribution(*args), dtype=torch.float64)
    first, second = torch.argsort(probs, descending=True)[:2].tolist()
    moved = observation["drawn_from"].clone()
    moved[first] -= by
    moved[second] += by
    return observation | {"drawn_from": moved}


def settled(seed: int, got: dict) -> tuple[SimpleNamespace, list[str]]:
    """The hidden cell's verdict on ``got`` applied, as the grader does, to a notebook whose
    kernel passed it (3 points)."""
    verdict, mistake = core._judged(judge.sample_hidden, seed, got)
    checked = verification.Verification(
        verdicts={"test_sample_hidden": verdict}, mistakes={"test_sample_hidden": mistake}
    )
    notebook = row({"test_sample_hidden": 3.0})
    return notebook, verification.apply_verdicts(notebook, checked)


def test_a_disagreement_on_the_graders_cases_only_asks_for_a_review_with_the_numbers() -> None:
    """The kernel's test passed its own cases, the judge passes them too, and one case of the
    grader's is off by more than the tolerance: the two part by their cases, which rounding or a
    mistake those cases miss can do, so an instructor looks at the numbers."""
    seed = 7
    got = probe.sample_hidden({"sample_next": reference_sampler()}, seed)
    case = token_checks.sample_cases(seed)[5]
    got["grader"][5] = nudged(got["grader"][5], case, 2e-4)
    with pytest.raises(AssertionError, match="not the filtered distribution") as error:
        judge.sample_hidden(seed, got)
    assert error.value.mistake.startswith(contract.CASES_DIFFER)
    first_line = str(error.value).splitlines()[0]
    assert "the notebook's own hidden cases pass here too" in first_line
    assert "largest difference 0.0002 at token" in first_line
    notebook, reasons = settled(seed, got)
    assert not notebook.flagged
    (grade,) = notebook.grades
    assert (grade.auto_score, grade.needs_manual_grade) == (3.0, True)
    (reason,) = reasons
    assert reason.startswith(verification.REVIEW) and "cases disagree" in reason
    assert "largest difference 0.0002" in reason
    assert finish.status_of(reasons, False, "") == finish.FOR_REVIEW


def test_a_sampler_the_notebooks_own_cases_fail_is_still_flagged() -> None:
    """A sampler that drops top-p's crossing token, whose kernel test passed all the same (its
    check replaced, say): the judge fails it on the notebook's own cases too, so the pass cannot
    be the sampler's, and the notebook is flagged, its points taken."""
    seed = 7

    def tampered(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        first = judge.distribution(logits[0], temperature, top_k, top_p, "CROSSING_DROPPED")
        probs = torch.tensor(first).expand(len(logits), -1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    got = probe.sample_hidden({"sample_next": tampered}, seed)
    with pytest.raises(AssertionError, match=recipe_checks.CROSSING_DROPPED[:40]) as error:
        judge.sample_hidden(seed, got)
    assert not error.value.mistake.startswith(contract.REVIEW_KEYS)
    notebook, reasons = settled(seed, got)
    assert notebook.flagged and notebook.grades[0].auto_score == 0.0
    assert finish.status_of(reasons, False, "") == finish.FLAGGED
    # the same wrong probabilities on one case of the notebook's own: it stands as well
    honest = probe.sample_hidden({"sample_next": reference_sampler()}, seed)
    own = token_checks.sample_cases(token_checks.NOTEBOOK_SEED)[5]
    honest["grader"][5] = nudged(honest["grader"][5], token_checks.sample_cases(seed)[5], 2e-4)
    honest["notebook"][5] = nudged(honest["notebook"][5], own, 2e-4)
    with pytest.raises(AssertionError) as error:
        judge.sample_hidden(seed, honest)
    assert not error.value.mistake.startswith(contract.REVIEW_KEYS)
