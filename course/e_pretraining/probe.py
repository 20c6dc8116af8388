"""What the trusted judge needs from assignment E's code (see :mod:`course.verify`).

One item per test cell of the notebook. The visible items replay the visible cell's own example;
the hidden items draw their inputs (sizes, lengths, token ids, hidden states, seeds) from the
grader's secret seed with the functions below, which the judge calls too. The models are built
from the notebook's given code (``TransformerLM`` of the read-only cell ``given_lm``) and the
student's classes; the judge recomputes what they should give from the weights observed. The KV
cache's inputs come from ``checks.readable_step_inputs`` and ``checks.sequence_inputs``, with
sizes and seeds drawn here.

Every call of the student's code is wrapped by :func:`course.probing.attempt`: an error is kept as
``{"error": ...}`` where the value would be, so that the judge fails the item at the check where
the notebook's cell would have failed.
"""

from __future__ import annotations

import torch
from torch import nn

from course.e_pretraining import checks
from course.probing import attempt, by_cell, draw, integer
from course.verify import student

VISIBLE_LENGTHS = [3, 1, 5, 4]  # the visible cells' batch of four sentences
PAD = 0
MASK_SHAPE = (128, 512)  # the hidden corruption checks: twice the visible cell's 32,768 positions
MASK_CASE_SHAPE = (400, 256)
MASK_LINE = 40_000
VISIBLE_STEP = (2, 3, 5, 8)  # the visible cell's readable step: batch, heads, cached, width
VISIBLE_SEQUENCE = (2, 3, 6, 8)  # and its sequence: batch, heads, length, width (seed 0)


def _padded_batch(
    gen: torch.Generator, vocab: int, batch: int, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (batch, length) of real words 4 .. vocab - 1; the first row is full."""
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    lengths[0] = length
    ids = torch.randint(4, vocab, (batch, length), generator=gen)
    ids[torch.arange(length) >= lengths.unsqueeze(1)] = PAD
    return ids, lengths


# ---------------------------------------------------------------- inputs drawn from the seed
def last_token_cases(seed: int) -> list[tuple[torch.Tensor, int, int, torch.Tensor]]:
    """(lengths, L, D, hidden float64 (B, L, D)) for six random batches, one row always full."""
    gen = draw(seed, "last_token_cases")
    cases = []
    for _ in range(6):
        batch, length, width = integer(gen, 1, 9), integer(gen, 1, 30), integer(gen, 1, 20)
        lengths = torch.randint(1, length + 1, (batch,), generator=gen)
        lengths[0] = length
        hidden = torch.randn(batch, length, width, generator=gen, dtype=torch.float64)
        cases.append((lengths, length, width, hidden))
    return cases


def classifier_cases(seed: int) -> list[dict]:
    """Three classifiers: sizes (V > 2 d_model, so that no layer of the base has V features),
    the seed of their weights, and a right-padded batch (ids, lengths)."""
    gen = draw(seed, "classifier_cases")
    cases = []
    for n_classes in (2, 3, integer(gen, 2, 6)):
        heads = (2, 4)[integer(gen, 0, 2)]
        width = heads * integer(gen, 2, 5)  # 4 .. 16, even, a multiple of heads
        vocab = integer(gen, 33, 90)
        ids, lengths = _padded_batch(gen, vocab, integer(gen, 2, 8), integer(gen, 2, 12))
        cases.append(
            {
                "vocab": vocab,
                "width": width,
                "heads": heads,
                "n_classes": n_classes,
                "torch_seed": integer(gen, 0, 2**31 - 1),
                "ids": ids,
                "lengths": lengths,
            }
        )
    return cases


def freeze_cases(seed: int) -> list[dict]:
    """Two classifiers to freeze (V > 2 d_model), the seed of their weights, and a training
    step's batch (ids, lengths, labels)."""
    gen = draw(seed, "freeze_cases")
    cases = []
    for _ in range(2):
        width = 4 * integer(gen, 2, 7)  # 8 .. 24
        vocab = integer(gen, 50, 100)
        n_classes = integer(gen, 2, 6)
        ids, lengths = _padded_batch(gen, vocab, 3, 6)
        cases.append(
            {
                "vocab": vocab,
                "width": width,
                "n_classes": n_classes,
                "torch_seed": integer(gen, 0, 2**31 - 1),
                "ids": ids,
                "lengths": lengths,
                "labels": torch.randint(0, n_classes, (3,), generator=gen),
            }
        )
    return cases


def mask_check_case(seed: int) -> tuple[int, int, int]:
    """(vocab_size, seed of the ids, seed of the generator) of the hidden statistical check."""
    gen = draw(seed, "mask_check_case")
    return integer(gen, 100, 2000), integer(gen, 0, 2**31 - 1), integer(gen, 0, 2**31 - 1)


def mask_cases(seed: int) -> list[tuple[int, float, torch.Tensor, int]]:
    """(vocab_size, mlm_probability, ids, generator seed): a small vocabulary at 15%, a large
    one at another probability."""
    gen = draw(seed, "mask_cases")
    cases = []
    for low, high, probability in [(20, 100, 0.15), (1000, 10000, None)]:
        vocab = integer(gen, low, high)
        if probability is None:
            probability = round(0.2 + 0.15 * float(torch.rand(1, generator=gen)), 3)
        ids = torch.randint(4, vocab, MASK_CASE_SHAPE, generator=gen)
        cases.append((vocab, probability, ids, integer(gen, 0, 2**31 - 1)))
    return cases


def mask_line_case(seed: int) -> tuple[int, torch.Tensor, int]:
    """(vocab_size, ids (MASK_LINE,), generator seed): one long 1-D sequence."""
    gen = draw(seed, "mask_line_case")
    vocab = integer(gen, 50, 200)
    return vocab, torch.randint(4, vocab, (MASK_LINE,), generator=gen), integer(gen, 0, 2**31 - 1)


def step_cases(seed: int) -> list[tuple[int, int, int, int, int]]:
    """(batch, heads, cached, width, seed) of three readable steps (checks.readable_step_inputs):
    a cache of 1 to 9 positions, an empty cache (None), a cache of 1 to 19; width >= cached + 2."""
    gen = draw(seed, "step_cases")
    cases = []
    for low, high in [(1, 10), (0, 1), (1, 20)]:
        cached = integer(gen, low, high)
        width = cached + 2 + integer(gen, 0, 6)
        cases.append(
            (integer(gen, 1, 4), integer(gen, 1, 5), cached, width, integer(gen, 0, 2**31 - 1))
        )
    return cases


def sequence_cases(seed: int) -> list[tuple[int, int, int, int, int]]:
    """(batch, heads, length, width, seed) of two float64 sequences fed one position at a time."""
    gen = draw(seed, "sequence_cases")
    return [
        (
            integer(gen, 1, 4),
            integer(gen, 1, 5),
            integer(gen, 2, 17),
            integer(gen, 2, 17),
            integer(gen, 0, 2**31 - 1),
        )
        for _ in range(2)
    ]


# ---------------------------------------------------------------- what the classifier does
def _classifier(ns: dict, vocab: int, width: int, heads: int, n_classes: int | None) -> nn.Module:
    """The student's classifier around a fresh given TransformerLM (seed torch first)."""
    language_model = student(ns, "TransformerLM")(vocab, width, heads, 2 * width, 2, dropout=0.1)
    make = student(ns, "SentimentClassifier")
    return make(language_model) if n_classes is None else make(language_model, n_classes=n_classes)


def _runs(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor) -> dict:
    """The classifier's outputs on checks.classifier_inputs, in eval mode, and what
    checks.record_forward saw on the batch, in the order the checks run them."""
    inputs = checks.classifier_inputs(ids, lengths, PAD)
    outputs: dict[str, object] = {}
    attempt(model.eval)
    with torch.no_grad():
        outputs["batch"] = attempt(model, *inputs["batch"])
        seen = attempt(checks.record_forward, model, ids, lengths)
        for key, args in inputs.items():
            if key != "batch":
                outputs[key] = attempt(model, *args)
    return {"outputs": outputs, "seen": seen}


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights by name (the positional table, a constant, left out)."""
    return {k: v for k, v in model.state_dict().items() if "pos_encoder" not in k}


def _without_gradient(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor) -> list[str]:
    """Parameters that get no gradient from the logits' sum, in training mode."""
    model.train()
    model(ids, lengths).sum().backward()
    return [n for n, p in model.named_parameters() if p.grad is None]


def _training_step(
    model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor
) -> dict:
    """One SGD step (lr 0.1) on the parameters that require a gradient: weights before, after."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    nn.functional.cross_entropy(model(ids, lengths), labels).backward()
    optimizer.step()
    return {"before": before, "after": {n: p.detach() for n, p in model.named_parameters()}}


# ---------------------------------------------------------------- items, by test cell
def last_token_visible(ns: dict, seed: int) -> object:
    lengths = torch.tensor(VISIBLE_LENGTHS)
    return attempt(student(ns, "last_token_states"), checks.position_states(4, 5, 6), lengths)


def last_token_hidden(ns: dict, seed: int) -> object:
    pick = student(ns, "last_token_states")
    return [
        {
            "positions": attempt(
                pick, checks.position_states(len(lengths), length, width), lengths
            ),
            "random": attempt(pick, hidden.clone(), lengths.clone()),
        }
        for lengths, length, width, hidden in last_token_cases(seed)
    ]


def classifier_visible(ns: dict, seed: int) -> object:
    torch.manual_seed(0)
    model = _classifier(ns, 50, 16, 2, None)
    head = checks.head_facts(model)
    lengths = torch.tensor(VISIBLE_LENGTHS)
    ids = torch.randint(4, 50, (4, 5))  # as the cell: the global generator, after the model
    ids[torch.arange(5) >= lengths.unsqueeze(1)] = PAD
    return {"head": head, "ids": ids, **_runs(model, ids, lengths)}


def classifier_hidden(ns: dict, seed: int) -> object:
    observed = []
    for case in classifier_cases(seed):
        torch.manual_seed(case["torch_seed"])
        sizes = case["vocab"], case["width"], case["heads"], case["n_classes"]
        model = _classifier(ns, *sizes)
        ids, lengths = case["ids"], case["lengths"]
        seen = {"head": checks.head_facts(model), **_runs(model, ids, lengths)}
        seen["state"] = attempt(_state, model)
        seen["without_gradient"] = attempt(_without_gradient, model, ids, lengths)
        observed.append(seen)
    return observed


def freeze_visible(ns: dict, seed: int) -> object:
    torch.manual_seed(0)
    model = student(ns, "SentimentClassifier")(student(ns, "TransformerLM")(50, 16, 2, 32, 2))
    student(ns, "freeze_base")(model)
    frozen = checks.frozen_facts(model)
    counted = student(ns, "count_trainable_parameters")(checks.counting_example())
    return {"frozen": frozen, "counted": counted}


def freeze_hidden(ns: dict, seed: int) -> object:
    freeze, count = student(ns, "freeze_base"), student(ns, "count_trainable_parameters")
    observed: dict = {"counted": attempt(count, checks.counting_example()), "cases": []}
    for case in freeze_cases(seed):
        torch.manual_seed(case["torch_seed"])
        model = _classifier(ns, case["vocab"], case["width"], 2, case["n_classes"])
        seen = {
            "head": checks.head_facts(model),
            "shapes": {n: list(p.shape) for n, p in model.named_parameters()},
            "count_before": attempt(count, model),
            "freeze": attempt(freeze, model),
        }
        seen["frozen"] = attempt(checks.frozen_facts, model)
        seen["count_after"] = attempt(count, model)
        ids, lengths, labels = case["ids"], case["lengths"], case["labels"]
        seen["step"] = attempt(_training_step, model, ids, lengths, labels)
        observed["cases"].append(seen)
    return observed


def mask_visible(ns: dict, seed: int) -> object:
    corrupt = student(ns, "mask_tokens")
    ids = checks.mask_tokens_input(1000, 0)
    result = corrupt(ids, checks.MASK_ID, 1000, 0.15, torch.Generator().manual_seed(1))
    same_ids = checks.generator_input()  # one tensor for the four runs, as in the cell
    runs = [
        attempt(
            corrupt, same_ids, 3, 500, 0.15, None if s is None else torch.Generator().manual_seed(s)
        )
        for s in checks.GENERATOR_SEEDS
    ]
    return {"result": result, "ids": ids, "generator": runs}


def mask_hidden(ns: dict, seed: int) -> object:
    corrupt = student(ns, "mask_tokens")
    vocab, ids_seed, generator_seed = mask_check_case(seed)
    ids = checks.mask_tokens_input(vocab, ids_seed, MASK_SHAPE)
    generator = torch.Generator().manual_seed(generator_seed)
    observed: dict = {
        "check": {"result": attempt(corrupt, ids, checks.MASK_ID, vocab, 0.15, generator)}
    }
    observed["check"]["ids"] = ids
    observed["cases"] = []
    for vocab, probability, ids, generator_seed in mask_cases(seed):
        generator = torch.Generator().manual_seed(generator_seed)
        result = attempt(corrupt, ids, 3, vocab, probability, generator)
        observed["cases"].append({"result": result, "ids": ids})
    vocab, ids, generator_seed = mask_line_case(seed)
    generator = torch.Generator().manual_seed(generator_seed)
    observed["line"] = attempt(corrupt, ids, 3, vocab, 0.15, generator)
    return observed


def attention_step_visible(ns: dict, seed: int) -> object:
    step = student(ns, "attention_step")
    q, k, v = checks.sequence_inputs(*VISIBLE_SEQUENCE, seed=0)
    return {
        "step": attempt(step, *checks.readable_step_inputs(*VISIBLE_STEP, seed=0)),
        "steps": attempt(checks.step_through, step, q, k, v),
    }


def attention_step_hidden(ns: dict, seed: int) -> object:
    step = student(ns, "attention_step")
    sequences = []
    for batch, heads, length, width, case_seed in sequence_cases(seed):
        q, k, v = checks.sequence_inputs(batch, heads, length, width, case_seed, torch.float64)
        sequences.append(attempt(checks.step_through, step, q, k, v))
    return {
        "steps": [attempt(step, *checks.readable_step_inputs(*case)) for case in step_cases(seed)],
        "sequences": sequences,
    }


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/e_pretraining.py (course.probing).
CELLS = {
    "test_last_token_visible": "last_token_visible",
    "test_last_token_hidden": "last_token_hidden",
    "test_classifier_visible": "classifier_visible",
    "test_classifier_hidden": "classifier_hidden",
    "test_freeze_visible": "freeze_visible",
    "test_freeze_hidden": "freeze_hidden",
    "test_mask_tokens_visible": "mask_visible",
    "test_mask_tokens_hidden": "mask_hidden",
    "test_attention_step_visible": "attention_step_visible",
    "test_attention_step_hidden": "attention_step_hidden",
}
ITEMS = by_cell(CELLS, globals())
