"""What E's fine-tuning loops share: a labelled split, a run's record, its batches, accuracy.

:mod:`course.e_pretraining.finetune` (one run after another) and
:mod:`course.e_pretraining.together` (a setup's runs as one batched model) both build on it; the
notebook reaches these names through ``finetune``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from course.device import device_of


@dataclass
class Labelled:
    """A labelled split as tensors: ids (n, L) right-padded, lengths (n,), labels (n,)."""

    ids: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return self.labels.numel()

    def batch(
        self, rows: torch.Tensor, device: torch.device | str = "cpu"
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows ``rows``, cut to their longest length, on ``device``: ids (b, l), lengths
        (b,), labels (b,)."""
        lengths = self.lengths[rows]
        ids, labels = self.ids[rows, : int(lengths.max())], self.labels[rows]
        return ids.to(device), lengths.to(device), labels.to(device)


@dataclass
class ClassifierHistory:
    """What :func:`train_classifier` measured; entry 0 of the lists is before any training."""

    epochs: list[int] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)  # mean loss of each epoch (nan at 0)
    seconds: float = 0.0  # training time, evaluation excluded
    trainable: int = 0  # parameters that were trained


@torch.no_grad()
def accuracy(model: nn.Module, data: Labelled, batch_size: int = 256) -> float:
    """Share of ``data`` that ``model`` classifies correctly (in eval mode, on its device)."""
    was_training = model.training
    model.eval()
    device = device_of(model)
    correct = 0
    for rows in data.lengths.argsort().split(batch_size):  # similar lengths: little padding
        ids, lengths, labels = data.batch(rows, device)
        correct += int((model(ids, lengths).argmax(dim=-1) == labels).sum())
    model.train(was_training)
    return correct / len(data)


def first_line(error: BaseException) -> str:
    """The first line of an error's message, at most 160 characters: what a note quotes."""
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else ""


def epoch_batches(
    n: int, batch_size: int, steps: int | None, generator: torch.Generator
) -> Iterator[torch.Tensor]:
    """Row indices of the batches of one epoch: one shuffled pass over ``n`` rows, or, with
    ``steps``, exactly ``steps`` batches of ``batch_size`` rows each, cut from shuffled passes
    laid end to end (a batch may straddle two passes)."""
    if steps is None:
        yield from torch.randperm(n, generator=generator).split(batch_size)
        return
    passes = -(-steps * batch_size // n)  # enough passes for every step
    stream = torch.cat([torch.randperm(n, generator=generator) for _ in range(passes)])
    yield from stream[: steps * batch_size].split(batch_size)
