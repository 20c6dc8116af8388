"""Assignment F's recall experiment: a query must meet a key, in one attention layer.

Each sequence holds ``PAIRS`` key-value pairs, one pair per position (the position's input is
the key's embedding plus the value's), then a query: one of the sequence's keys, with no value.
The model must output the value stored under that key. The keys of a sequence are distinct, and
so are its values, and the pairs come in a random order: the only way to the answer is to find
the position whose key matches the query, wherever it stands. A model that cannot compare the
query with the keys can do no better than one of the ``PAIRS`` values: ``1 / PAIRS``.

The model is one attention layer and nothing else: embeddings, ``x + attention(x)``, a linear
read-out at the last position. The notebook trains it with dot-product attention (given here,
PyTorch's ``nn.MultiheadAttention`` with a causal mask) and with the student's
``SynthesizerAttention``, three seeds each, on the CPU with one thread (the model is tiny:
more threads only add their start-up cost). Nothing here answers an exercise.
"""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

PAIRS = 8  # key-value pairs per sequence; then the query
KEYS = 16  # the keys a sequence draws its PAIRS distinct keys from
VALUES = 16  # the values it draws its PAIRS distinct values from
LENGTH = PAIRS + 1
CHANCE = 1 / PAIRS  # the best a model that cannot match keys can do
TEST_SEED = 12345  # the held-out sequences


def recall_batch(
    size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``size`` sequences: keys ``(size, LENGTH)``, values ``(size, LENGTH)``, targets ``(size,)``.

    Position ``i < PAIRS`` holds the pair (keys[:, i], values[:, i]); the last position holds
    the query key and the value id ``VALUES`` (no value). The target is the value stored under
    the query key.
    """
    keys = torch.rand(size, KEYS, generator=generator).argsort(dim=1)[:, :PAIRS]
    values = torch.rand(size, VALUES, generator=generator).argsort(dim=1)[:, :PAIRS]
    asked = torch.randint(PAIRS, (size,), generator=generator)  # which pair the query names
    rows = torch.arange(size)
    keys = torch.cat([keys, keys[rows, asked, None]], dim=1)
    targets = values[rows, asked]
    values = torch.cat([values, torch.full((size, 1), VALUES)], dim=1)
    return keys, values, targets


class DotProductAttention(nn.Module):
    """Causal multi-head dot-product attention, (B, T, D) -> (B, T, D), by nn.MultiheadAttention.

    The same constructor as the notebook's ``SynthesizerAttention``, so that either fits in
    :class:`RecallModel`.
    """

    def __init__(self, d_model: int, nhead: int, block_size: int, dropout: float = 0.0):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        return self.mha(x, x, x, attn_mask=future, need_weights=False)[0]


class RecallModel(nn.Module):
    """Embeddings, one attention layer with its residual, a linear read-out of the last position."""

    def __init__(self, attention: Callable[..., nn.Module], d_model: int = 32, nhead: int = 2):
        super().__init__()
        self.key_emb = nn.Embedding(KEYS, d_model)
        self.value_emb = nn.Embedding(VALUES + 1, d_model)  # the last id: no value (the query)
        self.pos_emb = nn.Embedding(LENGTH, d_model)
        self.attn = attention(d_model, nhead, LENGTH)
        self.head = nn.Linear(d_model, VALUES)

    def forward(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Keys and values (B, LENGTH) -> the logits of the answer (B, VALUES)."""
        positions = torch.arange(keys.shape[1], device=keys.device)
        x = self.key_emb(keys) + self.value_emb(values) + self.pos_emb(positions)  # (B, T, D)
        x = x + self.attn(x)
        return self.head(x[:, -1])


def recall_accuracy(model: nn.Module, sequences: int = 1000) -> float:
    """The share of ``sequences`` held-out sequences (always the same) answered right."""
    keys, values, targets = recall_batch(sequences, torch.Generator().manual_seed(TEST_SEED))
    was_training = model.training
    model.eval()
    with torch.no_grad():
        right = (model(keys, values).argmax(dim=-1) == targets).float().mean().item()
    model.train(was_training)
    return right


def train_recall(
    attention: Callable[..., nn.Module],
    seed: int,
    steps: int,
    batch: int = 64,
    lr: float = 3e-3,
    every: int = 50,
) -> list[tuple[int, float]]:
    """Train a :class:`RecallModel` with ``attention`` from ``seed``; its accuracy along the way.

    Returns ``(step, held-out accuracy)`` every ``every`` steps, at step 0 and at the end.
    """
    torch.manual_seed(seed)
    model = RecallModel(attention)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    curve = [(0, recall_accuracy(model))]
    for step in range(1, steps + 1):
        keys, values, targets = recall_batch(batch, generator)
        loss = F.cross_entropy(model(keys, values), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % every == 0 or step == steps:
            curve.append((step, recall_accuracy(model)))
    return curve


def compare_on_recall(
    attentions: dict[str, Callable[..., nn.Module]], seeds: list[int], steps: int
) -> dict[str, list[list[tuple[int, float]]]]:
    """:func:`train_recall` for every attention and seed (one CPU thread); the curves by name."""
    curves: dict[str, list[list[tuple[int, float]]]] = {name: [] for name in attentions}
    runs = [(name, seed) for name in attentions for seed in seeds]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, seed in tqdm(runs, desc="training"):
            curves[name].append(train_recall(attentions[name], seed, steps))
    finally:
        torch.set_num_threads(threads)
    for name, runs_of_name in curves.items():
        finals = ", ".join(f"{curve[-1][1]:.1%}" for curve in runs_of_name)
        print(f"{name:<22} held-out accuracy after {steps} steps, by seed: {finals}")
    print(f"{'chance (1 / PAIRS)':<22} {CHANCE:.1%}")
    return curves


def plot_recall(curves: dict[str, list[list[tuple[int, float]]]]) -> None:
    """Held-out accuracy against the training step, one line per seed, one colour per model."""
    fig, ax = plt.subplots(figsize=(7, 3.6), layout="constrained")
    colours = plt.get_cmap("tab10")
    for i, (name, runs) in enumerate(curves.items()):
        for j, curve in enumerate(runs):
            steps, accuracies = zip(*curve, strict=True)
            label = name if j == 0 else None
            ax.plot(steps, [100 * a for a in accuracies], color=colours(i), alpha=0.8, label=label)
    ax.axhline(100 * CHANCE, color="black", linestyle=":", linewidth=1, label="chance (1/8)")
    ax.set_ylim(0, 105)
    ax.set_title(f"recall: the value stored under the query key ({PAIRS} pairs), one seed a line")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out accuracy (%)")
    ax.legend(loc="center right", fontsize=9)
    ax.grid(alpha=0.3)
    plt.show()
