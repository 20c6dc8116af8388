"""Assignment G's helpers: the shipped checkpoint, the rows, the answers, the pretraining script."""

from __future__ import annotations

import torch

from course.g_birth_places import checkpoint, checks, finetune
from course.g_birth_places.chars import IGNORE, CharVocab, question_rows
from course.testcells import GradingError
from tools import pretrain_birth_places as pretrain

# A model small enough that the held-out loss (512 rows of 128 characters) takes a moment.
TINY = {"d_model": 16, "nhead": 2, "d_hid": 32, "nlayers": 1}


def test_checkpoint_is_small_and_documented() -> None:
    assert checkpoint.SHIPPED.stat().st_size / 1e6 < 8  # 3.3 million float16 weights: 6.6 MB
    code = pretrain.given()
    model, vocab, info = checkpoint.load_pretrained(code.TransformerLM)
    for key in ("config", "seed", "data_sha256", "data", "train", "loss", "untrained_loss"):
        assert key in info, f"the checkpoint does not record {key}"
    assert info["data_sha256"] == checkpoint.wiki_sha256(), "wiki.txt changed: pretrain again"
    assert vocab.itos == CharVocab.build().itos
    assert info["loss"] < info["untrained_loss"]
    assert not info["train"]["smoke"], "the shipped checkpoint is a smoke run: pretrain again"


def verdict(span_corruption: object) -> str:
    """What the hidden checks of ``span_corruption`` say: '' when they accept it, else why not."""
    try:
        checks.diagnose_span_corruption(span_corruption, checks.span_case(3, hidden=True))
    except GradingError as error:
        return str(error)
    return ""


def test_the_reference_span_corruption_passes_its_checks() -> None:
    assert verdict(pretrain.given().span_corruption) == ""


def test_span_checks_reject_a_sampler_that_ignores_its_generator() -> None:
    """The checks above have teeth: the same draws whatever the generator are named."""

    def reseeded(document: str, block_size: int, generator=None) -> str:
        return _from_floats(document, block_size, torch.Generator().manual_seed(0))

    assert "generator" in verdict(reseeded)


def test_question_rows_train_on_the_answer_only() -> None:
    vocab = CharVocab.build()
    x, y = question_rows([("Where was Al born?", "Rome")], vocab, 32)
    assert x.shape == y.shape == (1, 32)
    assert vocab.decode(y[0][y[0] != IGNORE]) == "Rome" + checks.MASK


def test_answer_stops_at_the_mask() -> None:
    vocab = CharVocab.build()
    target = vocab.encode("Rome" + checks.MASK)

    class Spell(torch.nn.Module):
        """Writes 'Rome' then MASK, whatever the question."""

        def forward(self, src: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(*src.shape, len(vocab))
            mask_at = (src == vocab.stoi[checks.MASK]).int().argmax(1)  # (B,)
            step = (src.size(1) - 1 - mask_at).clamp(max=len(target) - 1)
            logits[torch.arange(src.size(0)), -1, target[step]] = 1.0
            return logits

    questions = ["Where was A born?", "Where was Bo born?"]
    got = finetune.answer(Spell(), vocab, questions, lambda length: None)
    assert got == ["Rome", "Rome"]


def test_a_stage_stopped_by_the_clock_still_ends_at_the_lowest_rate(monkeypatch) -> None:
    class Clock:
        """A clock that moves one second each time it is read."""

        now = 0.0

        def perf_counter(self) -> float:
            self.now += 1.0
            return self.now

    torch.manual_seed(0)
    model = pretrain.given().TransformerLM(10, 8, 2, 16, 1)
    x, y = torch.randint(10, (4, 6)), torch.randint(10, (4, 6))
    monkeypatch.setattr(finetune, "time", Clock())
    timed = finetune.train_steps(model, lambda s: (x, y), 10_000, lambda n: None, time_budget_s=60)
    assert 10 < timed.steps < 100, "the run stops when the time budget is spent"
    assert timed.last_lr < 0.15 * 6e-4, "the decay followed the clock, not the 10,000 steps"
    counted = finetune.train_steps(model, lambda s: (x, y), 30, lambda n: None)
    assert counted.steps == 30 and counted.last_lr < 0.15 * 6e-4, "a run of steps ends low"


def test_pretrain_runs_and_saves_what_it_measured(tmp_path) -> None:
    made = pretrain.pretrain(steps=3, batch_size=4, config=TINY)
    torch.save(made, tmp_path / "g.pt")
    given = pretrain.given()
    model, vocab, info = checkpoint.load_pretrained(given.TransformerLM, tmp_path / "g.pt")
    assert info["train"]["steps"] == 3 and info["train"]["smoke"]
    assert model.decoder.out_features == len(vocab)


def test_pretraining_resumes_and_adds_up_its_budget(tmp_path) -> None:
    first = pretrain.pretrain(steps=3, batch_size=4, config=TINY)
    torch.save(first, tmp_path / "first.pt")
    second = pretrain.pretrain(steps=2, batch_size=4, resume=tmp_path / "first.pt")
    assert second["config"] == first["config"] and second["seed"] == first["seed"]
    assert second["train"]["steps"] == 5
    assert [stage["steps"] for stage in second["train"]["stages"]] == [3, 2]
    assert second["untrained_loss"] == first["untrained_loss"]


def _written(text: str, span: tuple[int, int], block_size: int) -> str:
    """prefix MASK suffix MASK span MASK, padded: the layout every correct answer returns."""
    start, end = span
    out = text[:start] + checks.MASK + text[end:] + checks.MASK + text[start:end] + checks.MASK
    return out.ljust(block_size + 1, checks.PAD)


def _from_floats(document: str, block_size: int, generator=None) -> str:
    """Correct, drawing floats with torch.rand and scaling them, in the contract's order."""
    cap = int(block_size * 7 / 8)
    text = document[: 4 + int(torch.rand(1, generator=generator) * (cap - 3))]
    span = 1 + int(torch.rand(1, generator=generator) * (len(text) // 2))
    start = int(torch.rand(1, generator=generator) * (len(text) - span + 1))
    return _written(text, (start, start + span), block_size)


def _start_first(document: str, block_size: int, generator=None) -> str:
    """Correct, drawing where the span starts first and its length from [n/8, 3n/8]."""
    where = float(torch.rand(1, generator=generator))
    cap = int(block_size * 7 / 8)
    text = document[: int(torch.randint(4, cap + 1, (1,), generator=generator))]
    low = max(1, len(text) // 8)
    high = max(low, 3 * len(text) // 8)
    span = int(torch.randint(low, high + 1, (1,), generator=generator))
    start = min(int(where * (len(text) - span + 1)), len(text) - span)
    return _written(text, (start, start + span), block_size)


def test_span_checks_accept_correct_samplers_they_have_never_seen() -> None:
    for sampler in (_from_floats, _start_first):
        assert verdict(sampler) == "", f"{sampler.__name__} is correct: {verdict(sampler)}"
