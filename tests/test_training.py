"""Tests for course.training (the language-model loop, plots, generation) and D's baselines."""

from __future__ import annotations

import itertools
import math
import types

import matplotlib
import pytest
import torch
from torch import nn

from course import training
from course.d_language_model.baselines import LSTMModel, unigram_cross_entropy

matplotlib.use("Agg")


def pairs(stream: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of inputs and next-token targets (written here: course/ holds no graded answer)."""
    n = (len(stream) - 1) // seq_len
    return stream[: n * seq_len].view(n, seq_len), stream[1 : n * seq_len + 1].view(n, seq_len)


class TinyTransformerLM(nn.Module):
    """A small causal Transformer LM with learned positions, enough to exercise the loop."""

    def __init__(self, ntokens: int, d_model: int = 16, length: int = 16) -> None:
        super().__init__()
        self.embedding = nn.Embedding(ntokens, d_model)
        self.positions = nn.Parameter(torch.zeros(length, d_model))
        layer = nn.TransformerEncoderLayer(d_model, 2, 32, 0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.decoder = nn.Linear(d_model, ntokens)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embedding(src) + self.positions[: src.size(1)]
        return self.decoder(self.encoder(x, mask=src_mask))


@pytest.fixture
def cyclic() -> tuple[torch.Tensor, torch.Tensor]:
    """A stream 0 1 2 ... 9 0 1 2 ...: the next token is fully determined by the current one."""
    return pairs(torch.arange(2000) % 10, 8)


def causal(length: int) -> torch.Tensor:
    """The causal mask, as the notebooks give it to the loop (written here: not in course/)."""
    return torch.full((length, length), float("-inf")).triu(1)


def test_lstm_shapes_ignores_mask_and_is_causal() -> None:
    torch.manual_seed(0)
    model = LSTMModel(20, 8, 12, 2, dropout=0.0).eval()
    src = torch.randint(0, 20, (3, 6))
    with torch.no_grad():
        out = model(src, causal(6))
        assert out.shape == (3, 6, 20)
        assert torch.equal(out, model(src))
        changed = src.clone()
        changed[:, 4:] = (changed[:, 4:] + 1) % 20
        assert torch.allclose(model(changed)[:, :4], out[:, :4])


def test_train_lm_learns_a_deterministic_sequence(cyclic) -> None:
    x, y = cyclic
    torch.manual_seed(0)
    model = TinyTransformerLM(10)
    before = training.evaluate_lm(model, x[:16], y[:16], causal)
    history = training.train_lm(
        model, x, y, x[:16], y[:16], causal_mask=causal, batch_size=16, lr=3e-3, time_budget_s=None,
        max_steps=60, eval_every=20, progress=False,
    )  # fmt: skip
    assert history.total_steps == 60
    assert history.steps == [20, 40, 60]
    assert history.total_tokens == 60 * 16 * 8
    assert len(history.val_loss) == len(history.train_loss) == len(history.seconds) == 3
    assert history.val_loss[-1] < 0.3 < before
    assert history.best_val_loss == min(history.val_loss)
    assert history.tokens_per_second > 0
    assert not model.training


def test_train_lm_time_budget_and_final_evaluation(cyclic, monkeypatch) -> None:
    """Training stops at the first step that reaches the time budget, evaluates once at the end,
    and counts the steps' time only. The clock is the test's (each step a quarter second), so a
    loaded machine changes nothing; a real run keeps to its budget from below."""
    x, y = cyclic
    ticks = itertools.count()
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks) * 0.125)
    monkeypatch.setattr(training, "time", clock)  # read twice a step: 0.125 s apart

    def train(budget: float) -> training.History:
        model = LSTMModel(10, 8, 8, 1, dropout=0.0)
        return training.train_lm(
            model, x, y, x[:4], y[:4], causal_mask=None, batch_size=8, time_budget_s=budget,
            eval_every=10_000, progress=False,
        )  # fmt: skip

    history = train(1.0)
    assert history.total_steps == 8 and history.train_seconds == 1.0
    assert history.steps == [8]  # evaluated once, at the end
    assert train(1.1).total_steps == 9  # the step that crosses the budget is the last
    monkeypatch.undo()
    assert train(0.3).train_seconds >= 0.3  # the real clock: it trained for its budget


def test_warmup_cosine_rises_then_falls_to_the_floor() -> None:
    factor = training.warmup_cosine(steps=100, warmup=10, floor=0.1)
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(10) == pytest.approx(1.0)
    assert factor(55) == pytest.approx(0.55)  # half way down the cosine
    assert factor(100) == pytest.approx(0.1) == factor(500)
    falling = [factor(s) for s in range(10, 101)]
    assert all(a >= b for a, b in itertools.pairwise(falling))
    with pytest.raises(ValueError, match="warmup"):
        training.warmup_cosine(steps=10, warmup=10)


def test_train_lm_follows_the_learning_rate_schedule(cyclic) -> None:
    x, y = cyclic
    model = LSTMModel(10, 8, 8, 1, dropout=0.0)
    seen = []
    training.train_lm(
        model, x, y, x[:4], y[:4], causal_mask=None, batch_size=8, lr=1.0, time_budget_s=None,
        max_steps=5, progress=False, lr_factor=lambda step: seen.append(step) or 0.0,
    )  # fmt: skip
    assert seen == [0, 1, 2, 3, 4, 5]  # the factor of every step, and of the step after
    frozen = LSTMModel(10, 8, 8, 1, dropout=0.0)
    before = [p.clone() for p in frozen.parameters()]
    training.train_lm(
        frozen, x, y, x[:4], y[:4], causal_mask=None, batch_size=8, time_budget_s=None,
        max_steps=3, progress=False, lr_factor=lambda step: 0.0, weight_decay=0.0,
    )  # fmt: skip
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.parameters(), strict=True))


def test_train_lm_rejects_bad_arguments(cyclic) -> None:
    x, y = cyclic
    model = LSTMModel(10, 8, 8, 1)
    with pytest.raises(ValueError, match="budget"):
        training.train_lm(model, x, y, x, y, causal_mask=None, time_budget_s=None, max_steps=None)
    with pytest.raises(ValueError, match="two"):
        training.train_lm(model, x, y[:, :-1], x, y, causal_mask=None, max_steps=1)


def test_without_the_mask_the_future_leaks() -> None:
    """The no-mask experiment of the notebook: the model can read the target from the input."""
    random_stream = torch.randint(0, 10, (4000,), generator=torch.Generator().manual_seed(0))
    x, y = pairs(random_stream, 8)  # unpredictable from the past: best honest loss is ln 10
    torch.manual_seed(0)
    model = TinyTransformerLM(10)
    with torch.no_grad():
        model.positions.normal_()  # distinct positions from the start: copying is quick to learn
    training.train_lm(
        model, x, y, x[:32], y[:32], batch_size=32, lr=1e-2, time_budget_s=None,
        max_steps=100, eval_every=1000, causal_mask=None, progress=False,
    )  # fmt: skip
    cheating = training.evaluate_lm(model, x[:64], y[:64], None)
    honest = training.evaluate_lm(model, x[:64], y[:64], causal)
    assert cheating < 0.5 * math.log(10) < honest


def test_evaluate_lm_matches_cross_entropy_and_restores_mode() -> None:
    torch.manual_seed(1)
    model = LSTMModel(15, 6, 6, 1, dropout=0.5)
    model.train()
    x = torch.randint(0, 15, (5, 7))
    y = torch.randint(0, 15, (5, 7))
    got = training.evaluate_lm(model, x, y, None, batch_size=2)
    assert model.training
    model.eval()
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(x).reshape(-1, 15), y.reshape(-1))
    assert got == pytest.approx(float(expected), rel=1e-5)


def test_unigram_cross_entropy_add_one() -> None:
    train = torch.tensor([0, 0, 1, 2])  # counts + 1 over V = 4: 3, 2, 2, 1 (sum 8)
    val = torch.tensor([0, 3])
    expected = -(math.log(3 / 8) + math.log(1 / 8)) / 2
    assert unigram_cross_entropy(train, val, 4) == pytest.approx(expected)
    # With no training data the unigram model is the uniform one: perplexity V.
    uniform = unigram_cross_entropy(torch.tensor([], dtype=torch.long), val, 4)
    assert math.exp(uniform) == pytest.approx(4)


def test_generate_lengths_vocab_and_greedy() -> None:
    torch.manual_seed(0)
    model = LSTMModel(12, 8, 8, 1)
    ids = training.generate(model, [1, 2, 3], 10, None, temperature=1.0, seed=3)
    assert len(ids) == 10 and all(0 <= i < 12 for i in ids)
    assert ids == training.generate(model, [1, 2, 3], 10, None, temperature=1.0, seed=3)
    greedy = training.generate(model, [1, 2, 3], 5, None, temperature=0)
    assert greedy == training.generate(model, [1, 2, 3], 5, None, temperature=0, seed=99)
    with pytest.raises(ValueError):
        training.generate(model, [], 3, None)


def test_plot_validation_curves() -> None:
    history = training.History(
        steps=[1, 2], tokens=[10, 20], seconds=[0.5, 1.0], train_loss=[3, 2], val_loss=[3, 2.5]
    )
    ax = training.plot_validation_curves({"m": history}, math.exp, baselines={"uniform": 30.0})
    assert ax.get_yscale() == "log"
    assert ax.get_ylabel() and ax.get_title() and len(ax.get_lines()) == 2
    assert ax.get_lines()[0].get_ydata()[1] == pytest.approx(math.exp(2.5))
