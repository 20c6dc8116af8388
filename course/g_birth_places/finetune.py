"""Training and answering for assignment G (no graded answer lives here).

The model is any module whose ``forward(src, src_mask)`` maps ids (B, L) to logits (B, L, V)
under a causal mask given by ``causal_mask(L)`` (the notebook's ``TransformerLM``).

    history = train_steps(model, batches, steps=300, causal_mask=causal_mask, seed=0)
    predictions = answer(model, vocab, questions, causal_mask)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from course.device import autocast, device_of
from course.g_birth_places.chars import IGNORE, CharVocab
from course.g_birth_places.checks import MASK

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class History:
    """What :func:`train_steps` measured."""

    steps: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)  # mean loss of each stretch of steps
    last_lr: float = 0.0  # the learning rate of the last step


def _mask_on(
    causal_mask: Callable[[int], torch.Tensor | None], length: int, device: torch.device
) -> torch.Tensor | None:
    """The causal mask of ``length`` positions on ``device`` (None stays None)."""
    mask = causal_mask(length)
    return None if mask is None else mask.to(device)


def epoch_batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int
) -> Callable[[int], Batch]:
    """``batches(step)`` for :func:`train_steps`: shuffled passes over (x, y), each batch cut
    after its last target (the rows end with padding that no target needs)."""
    gen = torch.Generator().manual_seed(seed)
    order: list[torch.Tensor] = []

    def batches(step: int) -> Batch:
        if not order:
            order.extend(torch.randperm(x.size(0), generator=gen).split(batch_size))
        rows = order.pop(0)
        bx, by = x[rows], y[rows]  # (b, block_size)
        used = int((by != IGNORE).any(0).nonzero().max()) + 1
        return bx[:, :used], by[:, :used]

    return batches


def train_steps(
    model: nn.Module,
    batches: Callable[[int], Batch],
    steps: int,
    causal_mask: Callable[[int], torch.Tensor],
    lr: float = 6e-4,
    warmup: int = 0,
    seed: int = 0,
    time_budget_s: float | None = None,
    report_every: int = 50,
    desc: str = "training",
    bf16: bool = False,
) -> History:
    """AdamW on next-character cross-entropy (IGNORE targets skipped), cosine decay after a
    linear warm-up, gradient clipping at 1; stops after ``steps`` or ``time_budget_s``.

    The decay follows whichever budget is nearer its end: the share of ``steps`` done, or of
    ``time_budget_s`` spent. A run stopped by the clock (a stage on a busy machine) still ends
    at the lowest rate, as a run of ``steps`` does.

    With ``bf16``, the forward pass runs under autocast to bfloat16 (the weights, the gradients
    and the optimizer stay float32): faster on CPUs with bfloat16 instructions and on GPUs
    (``course.device.autocast``; ignored on a device without it).
    Batches are moved to the model's device (the instructor's pretraining can run on a GPU)."""
    torch.manual_seed(seed)
    device = device_of(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)

    start = time.perf_counter()
    schedule = _cosine_schedule(optimizer, steps, warmup, time_budget_s, start)
    history, total = History(), torch.zeros((), device=device)
    model.train()
    for step in tqdm(range(steps), desc=desc, leave=False, mininterval=2):
        loss = _one_step(model, optimizer, batches(step), causal_mask, device, bf16)
        history.last_lr = schedule.get_last_lr()[0]
        schedule.step()
        total += loss
        history.steps = step + 1
        if history.steps % report_every == 0:
            history.losses.append(float(total) / report_every)
            total = torch.zeros((), device=device)
        if time_budget_s is not None and time.perf_counter() - start > time_budget_s:
            break
    history.seconds = time.perf_counter() - start
    model.eval()
    return history


def _cosine_schedule(
    optimizer: torch.optim.Optimizer,
    steps: int,
    warmup: int,
    time_budget_s: float | None,
    start: float,
) -> torch.optim.lr_scheduler.LambdaLR:
    """:func:`train_steps`' rate: a linear warm-up, then a cosine from 1 to 0.1 along the share
    of ``steps`` done or of ``time_budget_s`` spent since ``start``, whichever is larger."""

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        done = (step - warmup) / max(1, steps - warmup)
        if time_budget_s is not None:
            done = max(done, (time.perf_counter() - start) / time_budget_s)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, done)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, rate)


def _one_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    causal_mask: Callable[[int], torch.Tensor],
    device: torch.device,
    bf16: bool,
) -> torch.Tensor:
    """One optimizer step on ``batch`` (gradients clipped at 1); the loss, detached."""
    x, y = (t.to(device, non_blocking=True) for t in batch)
    with autocast(device, bf16):
        logits = model(x, _mask_on(causal_mask, x.size(1), device))  # (B, L, V)
    loss = nn.functional.cross_entropy(
        logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


@torch.no_grad()
def answer(
    model: nn.Module,
    vocab: CharVocab,
    questions: Sequence[str],
    causal_mask: Callable[[int], torch.Tensor],
    block_size: int = 128,
    max_chars: int = 20,
    bf16: bool = False,
) -> list[str]:
    """Greedy answers: each question is followed by MASK and the model writes characters until
    it writes MASK (or ``max_chars``, or the block is full). Questions of one length run as one
    batch. With ``bf16``, under bfloat16 autocast (as :func:`train_steps`)."""
    model.eval()
    device = device_of(model)
    mask_id = vocab.stoi[MASK]
    answers = [""] * len(questions)
    by_length: dict[int, list[int]] = {}
    for index, question in enumerate(questions):
        by_length.setdefault(len(question), []).append(index)
    for indices in by_length.values():
        ids = torch.stack([vocab.encode(questions[i] + MASK) for i in indices]).to(device)  # (b, l)
        done = torch.zeros(len(indices), dtype=torch.bool, device=device)
        written: list[list[int]] = [[] for _ in indices]
        for _ in range(min(max_chars, block_size - ids.size(1) + 1)):
            with autocast(device, bf16):
                logits = model(ids, _mask_on(causal_mask, ids.size(1), device))[:, -1]  # (b, V)
            logits = logits.float()
            logits[:, 0] = float("-inf")  # never PAD
            step = logits.argmax(-1)  # (b,)
            for row, char in enumerate(step.tolist()):
                if not done[row] and char != mask_id:
                    written[row].append(char)
            done |= step == mask_id
            if bool(done.all()):
                break
            ids = torch.cat([ids, step.unsqueeze(1)], dim=1)
        for row, i in enumerate(indices):
            answers[i] = vocab.decode(written[row])
    return answers
