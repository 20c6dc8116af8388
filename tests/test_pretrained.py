"""The shipped pretrained checkpoint (assignment E) and the fine-tuning helpers.

The checkpoint must be small, carry what made it, reach a validation perplexity far below an
untrained model's, and come from text that holds no sentence of the classification
validation or test split.
"""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from course import training
from course.d_language_model.baselines import unigram_cross_entropy
from course.data import WordTokenizer, load_polarity
from course.e_pretraining import checkpoint, finetune, text
from tools import pretrain_review_lm as pretrain

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def given():
    """D's model as E's notebook gives it (its read-only cell ``given_lm``)."""
    return pretrain.given_lm()


@pytest.fixture(scope="module")
def shipped(given) -> tuple[nn.Module, WordTokenizer, dict]:
    return checkpoint.load_pretrained(given.TransformerLM)


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    return text.pretraining_texts()


def test_checkpoint_is_small_and_documented(shipped):
    size_mb = checkpoint.SHIPPED.stat().st_size / 1e6
    assert size_mb < 5, f"the committed checkpoint weighs {size_mb:.1f} MB"
    model, tokenizer, info = shipped
    for key in ("config", "seed", "data_sha256", "data", "train", "val_loss", "untrained_val_loss"):
        assert key in info, f"the checkpoint does not record {key}"
    assert info["config"]["ntokens"] == len(tokenizer) == model.decoder.out_features


def test_checkpoint_was_made_from_the_shipped_text(shipped, texts):
    _, _, info = shipped
    used = {name: texts[name] for name in info["data"]["parts"]}
    assert {"reviews", "review_validation", "novels", "wikitext"} <= set(used)
    assert info["data_sha256"] == text.text_hash(used), (
        "the pretraining text has changed since the checkpoint was made: re-run "
        "`python tools/pretrain_review_lm.py`"
    )
    assert info["data"]["reviews"] == len(texts["reviews"])


def test_pretrained_perplexity_is_far_below_an_untrained_model(given, shipped, texts):
    model, tokenizer, info = shipped
    stream = tokenizer.encode_corpus(text.review_validation_sentences())
    val_x, val_y = given.make_lm_batches(stream, 64)
    pretrained = math.exp(training.evaluate_lm(model, val_x, val_y, given.causal_mask))
    torch.manual_seed(0)
    untrained_model = given.TransformerLM(**info["config"])
    untrained = math.exp(training.evaluate_lm(untrained_model, val_x, val_y, given.causal_mask))
    assert pretrained == pytest.approx(math.exp(info["val_loss"]), rel=0.02)
    assert pretrained < untrained / 10, (pretrained, untrained)
    unigram = math.exp(
        unigram_cross_entropy(
            tokenizer.encode_corpus(texts["reviews"]),
            val_y.flatten(),
            len(tokenizer),
        )
    )
    assert pretrained < unigram, (
        f"perplexity {pretrained:.0f} is not below the unigram {unigram:.0f}"
    )


def test_no_validation_or_test_sentence_in_the_pretraining_text(texts):
    polarity = load_polarity(seed=text.SPLIT_SEED)
    held_out = list(polarity["validation"]["text"]) + list(polarity["test"]["text"])

    def words(text: str) -> str:
        return " ".join(WordTokenizer.tokenize(text))

    corpus = " \n ".join(words(line) for part in texts.values() for line in part)
    corpus = f" {corpus} "
    leaks = [s for s in held_out if words(s) and f" {words(s)} " in corpus]
    assert not leaks, f"{len(leaks)} held-out sentences are in the pretraining text: {leaks[:3]}"


def test_pretraining_reviews_come_from_the_training_split(texts):
    train = set(load_polarity(seed=text.SPLIT_SEED)["train"]["text"])
    reviews = texts["reviews"] + texts["review_validation"]
    assert all(line in train for line in reviews)
    assert len(reviews) > 0.99 * len(train)


def test_leak_filter_drops_lines_that_contain_a_held_out_sentence():
    lines = ["a fine film . a mess .", "a messy plot", "nothing here"]
    assert text._without_leaks(lines, ["a mess ."]) == ["a messy plot", "nothing here"]


def test_pretrain_runs_and_saves_what_it_measured(tmp_path, monkeypatch):
    small = {"reviews": ["a good film ."] * 40, "review_validation": ["a bad film ."] * 10}
    small |= {"novels": ["a long chapter ."], "wikitext": ["an article ."]}
    monkeypatch.setattr(pretrain, "pretraining_texts", lambda seed=0: small)
    tiny = {"d_model": 16, "d_hid": 32}
    scheduled = pretrain.pretrain(steps=6, warmup=2, seq_len=8, config=tiny, extra=["novels"])
    assert scheduled["train"]["steps"] == 6 and scheduled["train"]["val_steps"] == [6]
    assert scheduled["data"]["parts"] == ["novels", "review_validation", "reviews"]
    assert "cosine" in scheduled["train"]["schedule"]
    made = pretrain.pretrain(minutes=0.02, seq_len=8, config=tiny)
    torch.save(made, tmp_path / "lm.pt")
    given = pretrain.given_lm()
    model, tokenizer, info = checkpoint.load_pretrained(given.TransformerLM, tmp_path / "lm.pt")
    assert info["train"]["steps"] > 0
    assert info["val_loss"] < info["untrained_val_loss"]
    assert model.decoder.out_features == len(tokenizer)


def test_missing_checkpoint_says_how_to_get_one(given, tmp_path):
    with pytest.raises(FileNotFoundError, match="tools/pretrain_review_lm.py"):
        checkpoint.load_pretrained(given.TransformerLM, tmp_path / "none.pt")


def test_a_checkpoint_that_does_not_fit_the_class_says_so(tmp_path):
    model = nn.Linear(3, 2)
    torch.save({"config": {"in_features": 3, "out_features": 2}, "state_dict": {"x": torch.ones(1)},
                "vocab": ["<pad>"]}, tmp_path / "bad.pt")  # fmt: skip
    with pytest.raises(ValueError, match="does not fit Linear"):
        checkpoint.load_pretrained(type(model), tmp_path / "bad.pt")


# ----------------------------------------------------------------------------- fine-tuning
class BagOfWords(nn.Module):
    """A tiny classifier with the forward(src, lengths) interface: mean embedding, linear."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, 8, padding_idx=0)
        self.head = nn.Linear(8, 2)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(src).sum(1) / lengths.unsqueeze(1))


def separable(tokenizer: WordTokenizer, n: int) -> finetune.Labelled:
    texts = [
        "good great fine"[: 4 + i % 9] if i % 2 else "bad awful poor"[: 3 + i % 9] for i in range(n)
    ]
    return finetune.encode_labelled(tokenizer, texts, [i % 2 for i in range(n)])


def test_fine_tuning_learns_a_separable_task():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    torch.manual_seed(0)
    model = BagOfWords(len(tokenizer))
    history = finetune.train_classifier(
        model, separable(tokenizer, 64), separable(tokenizer, 32), epochs=5, lr=0.05
    )
    assert history.epochs == [0, 1, 2, 3, 4, 5]
    assert history.val_accuracy[-1] == 1.0
    assert history.trainable == sum(p.numel() for p in model.parameters())


def test_fine_tuning_trains_only_what_requires_grad():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    model = BagOfWords(len(tokenizer))
    model.embedding.requires_grad_(False)
    before = model.embedding.weight.clone()
    history = finetune.train_classifier(
        model, separable(tokenizer, 16), separable(tokenizer, 8), epochs=1
    )
    assert torch.equal(model.embedding.weight, before)
    assert history.trainable == 8 * 2 + 2
    model.head.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameter"):
        finetune.train_classifier(model, separable(tokenizer, 16), separable(tokenizer, 8))


def test_balanced_sample_is_balanced_and_seeded():
    labels = [0] * 70 + [1] * 30
    rows = finetune.balanced_sample(labels, 40, seed=3)
    assert sum(labels[r] for r in rows) == 20 and len(set(rows)) == 40
    assert rows == finetune.balanced_sample(labels, 40, seed=3)
    assert rows != finetune.balanced_sample(labels, 40, seed=4)


def test_sample_labelled_is_balanced_and_each_sample_holds_the_smaller_ones():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    words = ["good", "great", "fine", "bad", "awful", "poor"]
    pool = {"text": [f"{w} {v}" for w in words for v in words], "label": [0, 1] * 18}
    small = finetune.sample_labelled(tokenizer, pool, 6, seed=1)
    large = finetune.sample_labelled(tokenizer, pool, 12, seed=1)
    assert len(small) == 6 and int(small.labels.sum()) == 3
    assert len(large) == 12 and int(large.labels.sum()) == 6
    rows = {tuple(r[:n].tolist()) for r, n in zip(large.ids, large.lengths, strict=True)}
    assert {tuple(r[:n].tolist()) for r, n in zip(small.ids, small.lengths, strict=True)} <= rows


def test_summary_and_plot_report_mean_and_spread():
    runs = [
        finetune.ClassifierHistory([0, 1, 2], [0.5, 0.6, 0.7 + 0.02 * s], [math.nan, 1, 1], 1.0, 10)
        for s in range(3)
    ]
    table = finetune.summary({"setup": runs}, at_epochs=[1, 2])
    assert "60.0 ± 0.0" in table and "72.0 ± 2.0" in table
    ax = finetune.plot_accuracy_curves({"setup": runs})
    assert ax.get_ylabel() == "validation accuracy (%)"


def test_label_count_curves_measure_every_setup_count_and_seed():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    texts = ["good great", "bad awful", "fine good", "poor bad"] * 10
    pool = {"text": texts, "label": [1, 0, 1, 0] * 10}
    built = []

    def build(setup: str, seed: int) -> nn.Module:
        built.append((setup, seed))
        torch.manual_seed(seed)
        model = BagOfWords(len(tokenizer))
        if setup == "frozen":
            model.embedding.requires_grad_(False)
        return model

    curves = finetune.label_count_curves(
        build, ["free", "frozen"], tokenizer, pool, separable(tokenizer, 16), [4, 12], [0, 1],
        epochs=3, lr=0.05, batch_size=4,
    )  # fmt: skip
    assert built == [(s, seed) for seed in (0, 1) for _ in (4, 12) for s in ("free", "frozen")]
    assert set(curves) == {"free", "frozen"} and set(curves["free"]) == {4, 12}
    assert all(len(accs) == 2 and all(0 <= a <= 100 for a in accs)
               for by_count in curves.values() for accs in by_count.values())  # fmt: skip
    assert curves["free"][12] == [100.0, 100.0]
    table = finetune.lead_table(curves, "free", "frozen")
    gaps = [a - b for a, b in zip(curves["free"][4], curves["frozen"][4], strict=True)]
    assert "free minus frozen" in table and f"{gaps[0]:+5.1f}" in table.splitlines()[1]
    _, ax = plt.subplots()
    assert finetune.plot_label_curves(curves, ax=ax) is ax
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "labelled training reviews"
    assert len(ax.collections) == 2  # one band per setup


def test_fine_tuning_without_validation_measures_nothing():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    history = finetune.train_classifier(
        BagOfWords(len(tokenizer)), separable(tokenizer, 16), None, epochs=2
    )
    assert history.epochs == [0, 1, 2] and history.val_accuracy == []
    assert len(history.train_loss) == 3


def test_a_step_budget_gives_the_same_number_of_steps_whatever_the_data_size():
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    for n in (4, 16, 40):
        model = BagOfWords(len(tokenizer))
        calls = []
        model.register_forward_hook(lambda m, args, out, calls=calls: calls.append(args[0]))
        history = finetune.train_classifier(
            model, separable(tokenizer, n), None, steps=7, batch_size=4
        )
        assert len(calls) == 7, f"{len(calls)} steps on {n} examples"
        assert all(len(call) == 4 for call in calls), "every step sees a whole batch"
        assert history.epochs == [0, 1] and len(history.train_loss) == 2


def test_label_count_curves_give_a_setup_its_own_learning_rate(monkeypatch):
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    pool = {"text": ["good great", "bad awful"] * 8, "label": [1, 0] * 8}
    seen = []

    def record(model, train, val, **args):
        seen.append(args["lr"])
        return finetune.ClassifierHistory()

    monkeypatch.setattr(finetune, "train_classifier", record)
    finetune.label_count_curves(
        lambda setup, seed: BagOfWords(len(tokenizer)), ["a", "b"], tokenizer, pool,
        separable(tokenizer, 8), [4], [0], lrs={"b": 0.1}, steps=3, lr=0.01,
    )  # fmt: skip
    assert seen == [0.01, 0.1]


def test_frozen_states_are_the_base_in_eval_mode_computed_once(given):
    torch.manual_seed(0)
    lm = given.TransformerLM(20, 8, 2, 16, 2, dropout=0.5)
    lm.decoder = nn.Linear(8, 2)
    ids = torch.tensor([[5, 6, 7, 8], [9, 4, 0, 0], [5, 6, 7, 0]])  # <pad> = 0 on the right
    lm.eval()
    with torch.no_grad():
        expected = lm.encode(ids, given.causal_mask(4))  # (3, 4, 8)
    lm.train()
    states = finetune.FrozenStates(pad_id=0)
    assert not states.attach(lm), "a base that still trains must not be read from a cache"
    lm.requires_grad_(False)
    lm.decoder.requires_grad_(True)
    assert states.attach(lm)
    got = lm.encode(ids[1:, :3], given.causal_mask(3))  # another batch, cut to its longest
    assert lm.training, "the base's mode is given back"
    assert torch.allclose(got[0, :2], expected[1, :2], atol=1e-5)
    assert torch.allclose(got[1], expected[2, :3], atol=1e-5)
    assert torch.equal(got[0, 2], torch.zeros(8)), "no state after a row's real tokens"
    again = lm.encode(ids, given.causal_mask(4))  # dropout on: only the kept states agree
    assert len(states.kept) == 3  # each sentence once, whatever batch it came in
    for row, n in enumerate([4, 2, 3]):
        assert torch.allclose(again[row, :n], expected[row, :n], atol=1e-5)


def test_a_frozen_classifier_trains_its_head_on_the_kept_states(given):
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    torch.manual_seed(0)
    lm = given.TransformerLM(len(tokenizer), 8, 2, 16, 1)
    lm.decoder = nn.Linear(8, 2)
    lm.requires_grad_(False)
    lm.decoder.requires_grad_(True)
    states = finetune.FrozenStates(tokenizer.pad_id)
    states.attach(lm)

    class LastToken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            hidden = self.lm.encode(src, given.causal_mask(src.size(1)))
            return self.lm.decoder(hidden[torch.arange(src.size(0)), lengths - 1])

    base = {n: p.clone() for n, p in lm.named_parameters() if not n.startswith("decoder")}
    history = finetune.train_classifier(
        LastToken(), separable(tokenizer, 32), separable(tokenizer, 16), epochs=3, lr=0.05
    )
    assert history.trainable == 8 * 2 + 2
    assert all(torch.equal(p, base[n]) for n, p in lm.named_parameters() if n in base)
    assert len(states.kept) == len({tuple(r) for r in separable(tokenizer, 32).ids.tolist()})
