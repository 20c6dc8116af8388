"""The course on a GPU, checked on the CPU: every training helper and every given cell that a
notebook runs on its ``DEVICE`` keeps its tensors where the model is.

There is no GPU here, so the model goes to PyTorch's ``meta`` device (shapes without data) and
:class:`StrayCpu` watches every operation: one that mixes a meta tensor with a CPU tensor (other
than a CPU scalar or CPU indices, which a GPU accepts too) or brings a result back to the CPU
without an explicit ``.to``/``.cpu()`` is what would fail, or silently crawl, on a GPU. Reading a
number out of a meta tensor (``float(loss)``, ``.tolist()``) gives 1 (or ones), so the loops run.
"""

from __future__ import annotations

import ast
import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F
from IPython.core.inputtransformer2 import TransformerManager
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course import device as course_device
from course import training
from course.data import WordTokenizer
from course.e_pretraining import finetune as e_finetune
from course.e_pretraining import together as e_together
from course.e_pretraining import word_order
from course.g_birth_places import finetune as g_finetune
from course.g_birth_places.chars import CharVocab, corruption_rows, question_rows
from course.g_birth_places.checks import MASK, PAD
from course.h_own_gpt import experiment
from tests.conftest import REPO

META = torch.device("meta")
MOVES = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}  # explicit .to / .cpu
INDEXING = {  # their second argument, the indices, may stay on the CPU (as on a GPU)
    torch.ops.aten.index.Tensor,
    torch.ops.aten.index_put.default,
    torch.ops.aten.index_put_.default,
    torch.ops.aten._index_put_impl_.default,
}
READS = {torch.ops.aten._local_scalar_dense.default}  # float(t), int(t), bool(t)


class StrayCpu(TorchDispatchMode):
    """Records the operations that would mix devices if ``meta`` were a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.strays: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in READS and args[0].device == META:
            return True if args[0].dtype == torch.bool else 1
        if func in MOVES and args[0].device == META and kwargs.get("device") == torch.device("cpu"):
            return torch.ones(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype)  # .cpu()
        out = func(*args, **kwargs)
        if func not in MOVES:
            self._check(func, args, kwargs, out)
        return out

    def _check(self, func, args, kwargs, out) -> None:
        if func in INDEXING:
            args = (args[0], *args[2:])  # the indices left out
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        on_meta = any(t.device == META for t in inputs)
        if not on_meta:
            return
        cpu_inputs = [t for t in inputs if t.device.type == "cpu" and t.dim() > 0]
        cpu_outputs = [t for t in outputs if t.device.type == "cpu"]
        if cpu_inputs or cpu_outputs:
            shapes = [tuple(t.shape) for t in cpu_inputs + cpu_outputs]
            self.strays.append(f"{func}: CPU tensors {shapes} beside the model's device")


class ReadMeta(TorchFunctionMode):
    """``.tolist()`` of a meta tensor: ones of its shape (a meta tensor has no values)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.tolist and args[0].device == META:
            return torch.ones(args[0].shape, dtype=args[0].dtype).tolist()
        return func(*args, **(kwargs or {}))


def strays_of(run) -> list[str]:
    """The stray CPU operations of ``run()`` (which puts its models on the meta device)."""
    watch = StrayCpu()
    try:
        with ReadMeta(), watch:
            run()
    except RuntimeError as error:  # the meta device refuses some mixes itself
        if "device" not in str(error):
            raise
        watch.strays.append(str(error))
    return watch.strays


def definitions(notebook: str, names: set[str], ns: dict | None = None) -> dict:
    """Run the top-level definitions ``names`` (functions, classes, assignments) found in the
    code cells of the instructor's notebook ``notebook``; return the namespace."""
    ns = {"math": math, "torch": torch, "nn": nn, "F": F} if ns is None else ns
    path = next((REPO / "source").glob(f"*/{notebook}.ipynb"))
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = TransformerManager().transform_cell("".join(cell["source"]))  # magics: calls
        for node in ast.parse(source).body:
            defined = {getattr(node, "name", None)} | _assigned(node)
            if defined & names:
                exec(compile(ast.Module([node], []), path.name, "exec"), ns)  # noqa: S102
    missing = names - ns.keys()
    assert not missing, f"{path.name} defines no {missing}"
    return ns


def _assigned(node: ast.AST) -> set[str]:
    """The names an assignment binds (``A = ...`` or ``A, B = ...``)."""
    if not isinstance(node, ast.Assign):
        return set()
    return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def test_the_watch_finds_a_stray_cpu_tensor() -> None:
    """The check can fail: the two mistakes the helpers had before they followed the device."""
    weight = torch.ones(3, device=META)

    def cpu_mask() -> None:  # a mask made on the CPU and added to a model's scores
        _ = weight + torch.zeros(3)

    def cpu_total() -> None:  # a CPU running sum of the model's losses
        total = torch.zeros(())
        total += weight.sum()

    assert strays_of(cpu_mask) and strays_of(cpu_total)
    assert not strays_of(lambda: weight[torch.tensor([0, 2])] * torch.tensor(2.0))


# ------------------------------------------------------------------ D and E: course.training
def lm_rows(vocab: int = 30, n: int = 12, length: int = 6) -> tuple[torch.Tensor, ...]:
    stream = torch.randint(0, vocab, (n * length + 1,), generator=torch.Generator().manual_seed(0))
    return stream[:-1].view(n, length), stream[1:].view(n, length)


def e_definitions() -> dict:
    """E's read-only ``given_lm`` cell and the reference SentimentClassifier, FrozenReader."""
    names = {"causal_mask", "PositionalEncoding", "TransformerLM", "last_token_states"}
    ns = definitions("pretraining_and_finetuning", names)
    ns["PUNCTUATION"] = torch.tensor([1, 2, 3])
    return definitions("pretraining_and_finetuning", {"SentimentClassifier", "FrozenReader"}, ns)


def test_train_lm_evaluate_and_generate_follow_the_model(e_given: dict) -> None:
    x, y = lm_rows()
    model = e_given["TransformerLM"](30, 8, 2, 16, 1).to(META)
    mask = e_given["causal_mask"]

    def run() -> None:
        training.train_lm(
            model, x, y, x, y, causal_mask=mask, time_budget_s=None, max_steps=3, eval_every=2,
            batch_size=4, progress=False,
        )  # fmt: skip
        training.evaluate_lm(model, x, y, None)
        training.generate(model, [1, 2, 3], 3, mask, temperature=0.7)
        training.generate(model, [1, 2], 2, mask, temperature=0)

    assert strays_of(run) == []


def test_e_classifiers_train_on_the_model_device(e_given: dict) -> None:
    """E's SentimentClassifier (the causal mask inside it), FrozenReader and FitReader."""
    ids = torch.randint(4, 30, (10, 7), generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([7, 3, 5, 1, 2, 7, 6, 4, 4, 3])
    data = e_finetune.Labelled(ids, lengths, torch.tensor([0, 1] * 5))
    lm = e_given["TransformerLM"]
    classifier = e_given["SentimentClassifier"](lm(30, 8, 2, 16, 1)).to(META)
    models = [
        classifier,
        e_given["FrozenReader"](e_given["SentimentClassifier"](lm(30, 8, 2, 16, 1)), "mean"),
        e_given["FrozenReader"](e_given["SentimentClassifier"](lm(30, 8, 2, 16, 1)), "end"),
        word_order.FitReader(lm(30, 8, 2, 16, 1), e_given["causal_mask"], torch.zeros(30)),
    ]

    def run() -> None:
        for model in models:
            model.to(META)
            e_finetune.train_classifier(model, data, data, epochs=1, batch_size=4)
            e_finetune.train_classifier(model, data, None, steps=2, batch_size=4)
            twins = [model, copy.deepcopy(model)]  # trained together, as on a GPU
            e_together.train_together(twins, [data, data], [0, 1], val=data, epochs=1, batch_size=4)
            e_together.train_together(twins, [data, data], [0, 1], steps=2, batch_size=4)

    assert strays_of(run) == []


# ------------------------------------------------------------------ E: runs trained together
def e_models(e_given: dict, kind: str, seed: int, dropout: float = 0.0) -> nn.Module:
    """One of E's classifiers with its own seeded weights (without dropout: deterministic)."""
    torch.manual_seed(seed)
    lm = e_given["TransformerLM"](30, 8, 2, 16, 2, dropout=dropout)
    if kind == "fit":  # a frozen base, a batch norm with running statistics, a head
        return word_order.FitReader(lm, e_given["causal_mask"], torch.randn(30))
    model = e_given["SentimentClassifier"](lm)
    if kind == "classifier":
        return model
    model.lm.requires_grad_(False)
    model.lm.decoder.requires_grad_(True)
    return e_given["FrozenReader"](model, kind)  # "mean" or "end"


def e_split(n: int, seed: int) -> e_finetune.Labelled:
    """``n`` right-padded random sentences of 1 to 8 tokens, some ending in a mark (1, 2, 3)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n,), generator=generator)
    ids = torch.randint(1, 30, (n, int(lengths.max())), generator=generator)
    ids[torch.arange(ids.size(1)) >= lengths.unsqueeze(1)] = 0
    return e_finetune.Labelled(ids, lengths, torch.randint(0, 2, (n,), generator=generator))


@pytest.fixture
def float64():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("fixed_shape", [False, True], ids=["cut", "fixed-shape"])
@pytest.mark.parametrize("kind", ["classifier", "mean", "end", "fit"])
def test_runs_trained_together_end_as_if_trained_one_after_another(
    e_given, kind, fixed_shape, float64
):
    """Without dropout, the batched training is the same arithmetic: the same weights, running
    statistics and validation accuracies, each run with its own data, seed and clipping. So it is
    with every batch padded to the splits' full width, as for a CUDA graph (``cuda_graph``: on
    the CPU, the fixed-shape steps run as they are)."""
    seeds, val = [0, 1, 2], e_split(10, 9)
    uneven = [e_split(12, 1), e_split(20, 2), e_split(7, 3)]  # a step budget takes any sizes
    even = [e_split(12, 4), e_split(12, 5), e_split(12, 6)]  # epochs need one size
    for trains, budget in [(uneven, {"steps": 6}), (even, {"epochs": 2})]:
        alone = [e_models(e_given, kind, seed) for seed in seeds]
        together = [e_models(e_given, kind, seed) for seed in seeds]
        args = {**budget, "batch_size": 5, "lr": 1e-2}
        expected = e_finetune.train_classifiers(alone, trains, val, seeds, **args)
        if fixed_shape:
            got = e_together.train_together(
                together, trains, seeds, val=val, cuda_graph=True, **args
            )
        else:
            got = e_finetune.train_classifiers(together, trains, val, seeds, together=True, **args)
        for one, other in zip(alone, together, strict=True):
            theirs = other.state_dict()
            for name, a in one.state_dict().items():
                b = theirs[name]
                assert torch.allclose(a, b, atol=1e-9), f"{kind}, {budget}: {name} differs"
        assert [h.val_accuracy for h in got] == [h.val_accuracy for h in expected]
        assert [h.epochs for h in got] == [h.epochs for h in expected]
        assert [h.trainable for h in got] == [h.trainable for h in expected]
        losses = [h.train_loss[-1] - e.train_loss[-1] for h, e in zip(got, expected, strict=True)]
        assert max(map(abs, losses)) < 1e-6  # the loss is taken in float32
        assert not any(m.training for m in together), "trained models are left in eval mode"


def test_runs_trained_together_draw_their_own_dropout(e_given) -> None:
    twins = [e_models(e_given, "classifier", 0, dropout=0.5) for _ in range(2)]
    data = e_split(16, 1)
    e_together.train_together(twins, [data, data], [0, 0], steps=3, batch_size=4, lr=1e-2)
    assert not torch.equal(twins[0].lm.decoder.weight, twins[1].lm.decoder.weight)


def test_training_together_refuses_what_it_cannot_do(e_given) -> None:
    models = [e_models(e_given, "classifier", seed) for seed in (0, 1)]
    with pytest.raises(ValueError, match="different sizes"):
        e_together.train_together(models, [e_split(12, 1), e_split(13, 2)], [0, 1], epochs=1)
    with pytest.raises(ValueError, match="as many"):
        e_together.train_together(models, [e_split(12, 1)], [0, 1], steps=2)
    for model in models:
        model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameter"):
        e_together.train_together(models, [e_split(12, 1)] * 2, [0, 1], steps=2)


class ReadsItsInput(nn.Module):
    """A classifier that reads a number out of its input (``.item()``): vmap cannot batch it."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(1, 2)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        scale = lengths.max().item()
        return self.head(src.float().mean(1, keepdim=True) / scale)


def test_models_that_cannot_be_batched_are_trained_one_after_another(capsys) -> None:
    tokenizer = WordTokenizer.build(["good great fine bad awful poor"])
    pool = {"text": ["good great", "bad awful", "fine good", "poor bad"] * 5, "label": [1, 0] * 10}
    val = e_finetune.encode_labelled(tokenizer, pool["text"][:8], pool["label"][:8])
    curves = e_finetune.label_count_curves(
        lambda setup, seed: ReadsItsInput(), ["plain"], tokenizer, pool, val, [4, 8], [0, 1],
        together=True, steps=3, batch_size=2,
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "cannot be trained together" in out and "one after another instead" in out
    assert [len(curves["plain"][n]) for n in (4, 8)] == [2, 2]
    assert "seed 1,     8 labels: plain" in out


# ------------------------------------------------------------------ G: course.g_birth_places
def test_g_fine_tuning_and_answers_follow_the_model() -> None:
    ns = definitions("birth_places", {"causal_mask", "PositionalEncoding", "TransformerLM"})
    vocab = CharVocab([PAD, MASK, *sorted(set("Where was Ann Bo born? Paris Rome"))])
    pairs = [("Where was Ann born?", "Paris"), ("Where was Bo born?", "Rome")]
    x, y = question_rows(pairs, vocab, 40)
    model = ns["TransformerLM"](len(vocab.itos), 8, 2, 16, 1).to(META)

    def run() -> None:
        batches = g_finetune.epoch_batches(x, y, 2, seed=0)
        g_finetune.train_steps(model, batches, 2, ns["causal_mask"], report_every=1)
        g_finetune.answer(model, vocab, [q for q, _ in pairs], ns["causal_mask"], 40, 3)

    assert strays_of(run) == []


def test_g_pretrain_your_own_section_runs_where_the_model_is() -> None:
    """G's optional last section: its pretraining and its loss, on the meta device and the CPU."""
    ns = definitions(
        "birth_places",
        {"causal_mask", "PositionalEncoding", "TransformerLM", "span_corruption"},
        {"math": math, "torch": torch, "nn": nn, "MASK": MASK, "PAD": PAD},
    )
    vocab = CharVocab.build()
    ns.update(
        finetune=g_finetune, corruption_rows=corruption_rows, vocab=vocab, BLOCK=32,
        bf16_helps=course_device.bf16_helps,
        wiki=["Ann Smith was born in Paris and lived in Rome.", "Bo Lee was born in Oslo."],
        info={"config": {"ntokens": len(vocab), "d_model": 8, "nhead": 2, "d_hid": 16,
                         "nlayers": 1}},
    )  # fmt: skip
    own = {"PRETRAIN_STEPS", "PRETRAIN_LR", "pretrain_own", "loss_per_character"}
    definitions("birth_places", own, ns)
    ns["PRETRAIN_BATCH"], ns["DEVICE"] = 4, META

    def run() -> None:
        model, _ = ns["pretrain_own"](2)
        x, y = corruption_rows(ns["wiki"], ns["span_corruption"], vocab, 32, 3, torch.Generator())
        ns["loss_per_character"](model, x, y)

    assert strays_of(run) == []
    ns["DEVICE"] = torch.device("cpu")
    model, history = ns["pretrain_own"](2)
    _compare_with_the_shipped_checkpoint(ns, model, history)
    assert history.steps == 2 and ns["PRETRAIN_STEPS"] == 15_000
    x, y = corruption_rows(ns["wiki"], ns["span_corruption"], vocab, 32, 3, torch.Generator())
    assert 0 < ns["loss_per_character"](model, x, y) < 10


def _compare_with_the_shipped_checkpoint(ns: dict, model: nn.Module, history) -> None:
    """G's cell after the pretraining, run with small stand-ins for sections 4 and 5."""
    pairs = [("Where was Ann Smith born?", "Paris"), ("Where was Bo Lee born?", "Oslo")]
    config = ns["info"]["config"]
    ns.update(
        own_model=model, own_history=history, accuracy={"pretrained": [0.5]},
        load_pretrained=lambda cls, path: (cls(**config),), SHIPPED=None,
        BATCH=2, steps=2, N_DEV=2, dev_questions=[q for q, _ in pairs],
        dev_answers=[a for _, a in pairs], dev_accuracy=lambda got, truth: 0.25,
    )  # fmt: skip
    ns["info"]["train"] = {"steps": 15_000}
    ns["train_x"], ns["train_y"] = question_rows(pairs, ns["vocab"], 32)
    path = next((REPO / "source").glob("*/birth_places.ipynb"))
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    compare = next(c for c in cells if c.startswith("if own_model is not None:"))
    exec(compile(compare, path.name, "exec"), ns)  # noqa: S102 - the course's own cell
    assert set(ns["losses"]) == set(ns["scores"]) == {"shipped", "yours"}
    assert ns["scores"] == {"shipped": 0.5, "yours": 0.25}


# ------------------------------------------------------------------ H: its training cell
def test_h_training_and_writing_follow_the_model() -> None:
    """H's given DModel, the reference GPT and the notebook's own train and generate."""
    ns = definitions(
        "own_gpt",
        {
            "causal_mask", "PositionalEncoding", "TransformerLM", "DModel", "CausalSelfAttention",
            "Block", "GPT", "optimizer_groups", "lr_at", "train_step", "sample_next", "train",
            "evaluate", "generate",
        },
    )  # fmt: skip
    stream = torch.randint(0, 20, (200,), generator=torch.Generator().manual_seed(2))
    ns.update(
        time=__import__("time"), tqdm=lambda steps, desc: _Bar(steps), experiment=experiment,
        device_of=course_device.device_of, STEPS=3, EVAL_EVERY=2, VAL_WINDOWS=4, BATCH=2,
        BLOCK=8, MAX_LR=1e-3, MIN_LR=1e-4, WARMUP=1, WEIGHT_DECAY=0.1, CLIP=1.0,
        train_stream=stream, val_stream=stream, tokenizer=_Tokenizer(),
    )  # fmt: skip
    models = [ns["GPT"](20, 8, 2, 1, 8, 0.0), ns["DModel"](20, 8, 2, 16, 1, 0.0)]

    def run() -> None:
        for model in models:
            model.to(META)
            ns["train"](model, "test")
            ns["generate"](model, "ab", 2, temperature=1.0, top_k=3)

    assert strays_of(run) == []


class _Bar(list):
    """tqdm's interface, as much as H's train uses."""

    def __init__(self, steps) -> None:
        super().__init__(steps)

    def set_postfix(self, **_: object) -> None:
        pass


class _Tokenizer:
    """Hugging Face's tokenizer, as much as H's generate uses (ids of characters)."""

    def encode(self, text: str):
        return type("Encoding", (), {"ids": [ord(c) % 20 for c in text]})()

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(97 + i) for i in ids)


# ------------------------------------------------------------------ course.device itself
def test_grading_always_runs_on_the_cpu(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COURSE_FAST", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert course_device.pick_device() == torch.device("cpu")
    assert "grading mode always runs on the CPU" in capsys.readouterr().out


def test_the_gpu_is_picked_first_and_said(monkeypatch, capsys) -> None:
    monkeypatch.delenv("COURSE_FAST", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _: "Test GPU")
    assert course_device.pick_device() == torch.device("cuda")
    assert capsys.readouterr().out == "training on cuda (Test GPU): the GPU found\n"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert course_device.pick_device(verbose=False) == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert course_device.pick_device() == torch.device("cpu")
    assert "no GPU found" in capsys.readouterr().out


def test_course_device_chooses_by_hand_and_says_what_is_wrong(monkeypatch) -> None:
    monkeypatch.delenv("COURSE_FAST", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert course_device.pick_device(verbose=False) == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "tpu")
    with pytest.raises(ValueError, match="use one of cuda, mps, cpu"):
        course_device.pick_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="unset COURSE_DEVICE"):
        course_device.pick_device()


def test_bf16_autocast_only_where_asked_and_possible(monkeypatch) -> None:
    monkeypatch.delenv("COURSE_FLOAT32", raising=False)
    layer = nn.Linear(4, 4)
    with course_device.autocast("cpu", bf16=True):
        assert layer(torch.ones(1, 4)).dtype == torch.bfloat16
    with course_device.autocast("cpu", bf16=False):
        assert layer(torch.ones(1, 4)).dtype == torch.float32
    with course_device.autocast("meta", bf16=True):  # no autocast there: float32, no error
        assert layer.to(META)(torch.ones(1, 4, device=META)).dtype == torch.float32
    assert course_device.bf16_helps("cpu") == course_device.cpu_computes_bf16()
    assert not course_device.bf16_helps("meta")


def test_a_cpu_without_bfloat16_instructions_keeps_float32(monkeypatch) -> None:
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert not course_device.bf16_helps("cpu")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert course_device.bf16_helps("cpu")


def test_every_training_notebook_picks_its_device() -> None:
    """D, E, G and H set DEVICE in their read-only setup cell and move their models to it."""
    for notebook in ("language_model", "pretraining_and_finetuning", "birth_places", "own_gpt"):
        path = next((REPO / "source").glob(f"*/{notebook}.ipynb"))
        cells = json.loads(path.read_text())["cells"]
        ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells]
        setup = cells[ids.index("setup")]
        assert "DEVICE = pick_device()" in "".join(setup["source"]), path.name
        rest = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert ".to(DEVICE)" in rest, f"{path.name} never moves a model to DEVICE"


def test_float32_forced_turns_bfloat16_off_everywhere(monkeypatch) -> None:
    """COURSE_FLOAT32=1 is the floor machine's float32: no autocast even where the CPU (or a
    GPU) computes in bfloat16; unset or 0 leaves the choice to the processor."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setenv("COURSE_FLOAT32", "1")
    assert not course_device.bf16_helps("cpu")
    with course_device.autocast("cpu", bf16=True):
        assert torch.matmul(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert not course_device.bf16_helps("cuda")
    monkeypatch.setenv("COURSE_FLOAT32", "0")
    assert course_device.bf16_helps("cpu")
    with course_device.autocast("cpu", bf16=True):
        assert torch.matmul(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
