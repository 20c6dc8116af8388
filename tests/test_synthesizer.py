"""Assignment F's SynthesizerAttention: the checks accept every correct style and reject every
mutation of the reference (issue 58).

A mutation skips, repeats or reorders one step of the reference's forward (w1, relu, the mask,
the softmax, the dropout on the weights, value, proj, the dropout on the output), or moves a
step of a (B, T, D) chain into another chain. Each must fail the hidden tests, as the kernel
observes them and the trusted judge decides (``course.f_attention_exploration.probe``,
``judge.f_attention_exploration``), and the notebook's own hidden checks must agree. The named
mistakes are told apart on the hidden cases, and each one's message is given.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import verify
from course.f_attention_exploration import probe
from course.f_attention_exploration import synthesizer_checks as synth
from course.testcells import GradingError
from judge import core
from judge import f_attention_exploration as judge

SEED = 20261128
CELLS = ("test_synthesizer_visible", "test_synthesizer_hidden")
# The steps of each chain of the reference's forward; a mutation edits one of these lists.
CHAINS = {
    "hidden": ["w1", "relu"],  # on x (B, T, D), before the heads are cut
    "weights": ["mask", "softmax", "attn_drop"],  # on the scores (B, H, T, T)
    "value": ["value"],  # on x (B, T, D), before the heads are cut
    "out": ["proj", "resid_drop"],  # on the merged heads (B, T, D)
}
WIDE = ("hidden", "value", "out")  # the chains on (B, T, D): a step may move between them
# Mutations that compute the same function, so that no check can tell them from the reference.
SAME = {
    "repeat relu": "relu(relu(z)) = relu(z)",
    "repeat mask": "filling -inf twice fills it once",
}


class Chained(nn.Module):
    """The reference synthesizer, its forward run from the step lists ``chains``."""

    def __init__(self, d_model, nhead, block_size, dropout=0.0, chains=None):
        super().__init__()
        self.nhead, self.chains = nhead, chains or CHAINS
        self.w1 = nn.Linear(d_model, d_model)
        self.w2 = nn.Parameter(torch.empty(d_model // nhead, block_size).uniform_(-1e-3, 1e-3))
        self.b2 = nn.Parameter(torch.zeros(block_size))
        self.value = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop, self.resid_drop = nn.Dropout(dropout), nn.Dropout(dropout)
        tril = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("tril", tril.view(1, 1, block_size, block_size))

    def step(self, name, z):
        if name == "relu":
            return torch.relu(z)
        if name == "mask":
            t = z.shape[-1]
            return z.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))
        if name == "softmax":
            return torch.softmax(z, dim=-1)
        return getattr(self, name)(z)

    def run(self, chain, z):
        for name in self.chains[chain]:
            z = self.step(name, z)
        return z

    def forward(self, x):
        b, t, d = x.shape
        heads = lambda z: z.view(b, t, self.nhead, d // self.nhead).transpose(1, 2)  # noqa: E731
        scores = heads(self.run("hidden", x)) @ self.w2[:, :t] + self.b2[:t]
        weights = self.run("weights", scores)
        merged = (weights @ heads(self.run("value", x))).transpose(1, 2).reshape(b, t, d)
        return self.run("out", merged)


def mutations() -> dict[str, dict[str, list[str]]]:
    """Every skip, repeat and swap of neighbours within a chain, and every move of a step of a
    (B, T, D) chain to each place in another: name -> the chains."""
    found = {}
    for chain, steps in CHAINS.items():
        for i, step in enumerate(steps):
            edits = {
                f"skip {step}": steps[:i] + steps[i + 1 :],
                f"repeat {step}": steps[: i + 1] + steps[i:],
            }
            if i + 1 < len(steps):
                edits[f"swap {step} {steps[i + 1]}"] = (
                    steps[:i] + [steps[i + 1], step] + steps[i + 2 :]
                )
            for name, edited in edits.items():
                found[name] = {**CHAINS, chain: edited}
    for source in WIDE:
        for step in CHAINS[source]:
            for target in set(WIDE) - {source}:
                for place in range(len(CHAINS[target]) + 1):
                    moved = CHAINS[target][:place] + [step] + CHAINS[target][place:]
                    left = [s for s in CHAINS[source] if s != step]
                    found[f"move {step} to {target}[{place}]"] = {
                        **CHAINS,
                        source: left,
                        target: moved,
                    }
    return {name: chains for name, chains in found.items() if name not in SAME}


def with_chains(chains):
    class Mutant(Chained):
        def __init__(self, d_model, nhead, block_size, dropout=0.0):
            super().__init__(d_model, nhead, block_size, dropout, chains)

    return Mutant


def verdicts(cls, seed: int = SEED) -> dict[str, str | None]:
    """The judge's verdicts on the synthesizer's cells, from what the probe observes of ``cls``."""
    observed = {
        cell: verify.portable(probe.ITEMS[cell]({"SynthesizerAttention": cls}, seed))
        for cell in CELLS
    }
    judges = {cell: getattr(judge, probe.CELLS[cell]) for cell in CELLS}
    return {cell: core._verdict(judges[cell], seed, observed[cell]) for cell in CELLS}


def hidden_cell(cls, seed: int = 2024) -> None:
    """What the notebook's hidden cell checks (its reference is the judge's)."""
    for case in synth.synthesizer_cases(seed, hidden=True):
        got = synth.judge_synthesizer_parts(synth.observe_synthesizer(cls, case), case)
        judge._synthesizer_values(got, case)
        synth.judge_synthesizer_behaviour(got, case)


def test_the_reference_passes_and_every_parameter_differs() -> None:
    assert verdicts(Chained) == dict.fromkeys(CELLS)
    hidden_cell(Chained)
    module = synth.synthesizer_with(Chained, synth.synthesizer_cases(3, hidden=True)[1])
    values = [p.detach().flatten() for p in module.parameters()]
    assert len({round(v[0].item(), 6) for v in values}) == len(values)


@pytest.mark.parametrize("name", sorted(mutations()))
def test_a_mutation_fails_the_hidden_tests(name: str) -> None:
    cls = with_chains(mutations()[name])
    assert verdicts(cls)["test_synthesizer_hidden"], f"{name} passes the judge's hidden tests"
    with pytest.raises(GradingError):
        hidden_cell(cls)


def test_the_mutations_cover_each_step() -> None:
    names = mutations()
    for step in ("w1", "relu", "mask", "softmax", "attn_drop", "value", "proj", "resid_drop"):
        assert f"skip {step}" in names
    assert len(names) > 30, sorted(names)


# ---------------------------------------------------------------- correct styles
class Einsum(nn.Module):
    """Correct: einsum, F.dropout, a large negative number for the mask, other initial values."""

    def __init__(self, d_model, nhead, block_size, dropout=0.0):
        super().__init__()
        self.p, self.nhead = dropout, nhead
        self.register_buffer("tril", torch.ones(block_size, block_size).tril()[None, None])
        self.proj = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.b2 = nn.Parameter(torch.randn(block_size) * 0.02)
        self.w2 = nn.Parameter(torch.randn(d_model // nhead, block_size) * 0.02)
        self.w1 = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        hidden = F.relu(self.w1(x)).reshape(b, t, self.nhead, -1)
        scores = torch.einsum("bthk,ks->bhts", hidden, self.w2[:, :t]) + self.b2[:t]
        scores = torch.where(self.tril[:, :, :t, :t].bool(), scores, torch.tensor(-1e9))
        weights = F.dropout(scores.softmax(-1), self.p, self.training)
        values = self.value(x).reshape(b, t, self.nhead, -1)
        merged = torch.einsum("bhts,bshk->bthk", weights, values).reshape(b, t, d)
        return F.dropout(self.proj(merged), self.p, self.training)


class HeadLoop(Chained):
    """Correct: one head at a time, its D/H columns sliced, the heads concatenated."""

    def forward(self, x):
        b, t, d = x.shape
        size = d // self.nhead
        hidden, values = torch.relu(self.w1(x)), self.value(x)
        outs = []
        for h in range(self.nhead):
            cols = slice(h * size, (h + 1) * size)
            scores = hidden[..., cols] @ self.w2[:, :t] + self.b2[:t]  # (B, T, T)
            scores = scores.masked_fill(self.tril[0, 0, :t, :t] == 0, -math.inf)
            weights = self.attn_drop(torch.softmax(scores.double(), dim=-1).float())
            outs.append(weights @ values[..., cols])
        return self.resid_drop(self.proj(torch.cat(outs, dim=-1)))


@pytest.mark.parametrize("style", [Chained, Einsum, HeadLoop], ids=lambda c: c.__name__)
def test_a_correct_style_passes_on_many_seeds(style) -> None:
    for seed in range(SEED, SEED + 12):
        assert verdicts(style, seed) == dict.fromkeys(CELLS), (style.__name__, seed)
    hidden_cell(style)


# ---------------------------------------------------------------- the named mistakes
def named(mistake: str):
    """A module that computes what ``mistake`` computes (the judge's reference, so mistaken)."""

    class Named(Chained):
        def forward(self, x):
            state = {name: p.detach() for name, p in self.state_dict().items()}
            return judge.reference_synthesizer(state, x, self.nhead, mistake).float()

    return Named


@pytest.mark.parametrize("mistake", sorted(synth.SYNTHESIZER_MISTAKES))
def test_each_mistake_is_named_on_the_hidden_cases(mistake: str) -> None:
    message = synth.SYNTHESIZER_MISTAKES[mistake]
    assert message in (verdicts(named(mistake))["test_synthesizer_hidden"] or "")
    with pytest.raises(GradingError, match="SynthesizerAttention") as caught:
        hidden_cell(named(mistake))
    assert message in str(caught.value)


class Unsliced(Chained):
    def forward(self, x):
        b, t, d = x.shape
        hidden = torch.relu(self.w1(x)).view(b, t, self.nhead, -1).transpose(1, 2)
        scores = (hidden @ self.w2 + self.b2)[..., :t]  # (B, H, T, block) cut too late
        return super().forward(x) + 0 * scores.sum()


class PerHead(Chained):
    def __init__(self, d_model, nhead, block_size, dropout=0.0):
        super().__init__(d_model, nhead, block_size, dropout)
        self.w2 = nn.Parameter(torch.zeros(nhead, d_model // nhead, block_size))

    def forward(self, x):
        b, t, d = x.shape
        heads = lambda z: z.view(b, t, self.nhead, d // self.nhead).transpose(1, 2)  # noqa: E731
        scores = heads(torch.relu(self.w1(x))) @ self.w2[:, :, :t] + self.b2[:t]
        scores = scores.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))
        merged = (scores.softmax(-1) @ heads(self.value(x))).transpose(1, 2).reshape(b, t, d)
        return self.proj(merged)


class NoSlice(Chained):
    def forward(self, x):
        b, t, d = x.shape
        heads = lambda z: z.view(b, t, self.nhead, d // self.nhead).transpose(1, 2)  # noqa: E731
        scores = heads(torch.relu(self.w1(x))) @ self.w2 + self.b2  # (B, H, T, block_size)
        weights = torch.softmax(scores.masked_fill(self.tril == 0, float("-inf")), dim=-1)
        merged = (weights @ heads(self.value(x))).transpose(1, 2).reshape(b, t, d)
        return self.proj(merged)


def test_w2_not_cut_to_t_and_a_w2_per_head_are_named() -> None:
    assert verdicts(Unsliced) == dict.fromkeys(CELLS)  # cutting the scores afterwards is right
    assert (
        "Sizes that do not match where T < block_size"
        in verdicts(NoSlice)["test_synthesizer_visible"]
    )
    with pytest.raises(GradingError, match="Sizes that do not match where T < block_size"):
        hidden_cell(NoSlice)
    assert synth.W2_PER_HEAD in verdicts(PerHead)["test_synthesizer_visible"]


def test_the_hidden_cell_computes_what_the_judge_computes() -> None:
    """The notebook's hidden cell holds its own reference (no reference ships in the package):
    it gives the judge's values, for the right computation and for every named mistake."""
    import json

    from tests.conftest import REPO

    path = REPO / "source/f_attention_exploration/attention_exploration.ipynb"
    cells = json.loads(path.read_text())["cells"]
    (hidden,) = [
        "".join(c["source"])
        for c in cells
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_synthesizer_hidden"
    ]
    source = hidden[: hidden.index("\nfor _case in")]
    namespace = {"torch": torch, "F": F, "math": math}
    exec(compile(source.split("### BEGIN HIDDEN TESTS", 1)[1], "hidden", "exec"), namespace)
    inline = namespace["_reference_synthesizer"]
    for case in synth.synthesizer_cases(7, hidden=True)[:3]:
        got = synth.observe_synthesizer(Chained, case)
        for mistake in [None, *synth.SYNTHESIZER_MISTAKES]:
            expected = judge.reference_synthesizer(
                got["weights"], case["x"], case["nhead"], mistake
            )
            same = inline(got["weights"], case["x"], case["nhead"], mistake)
            assert torch.equal(same, expected), mistake
