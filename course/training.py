"""Training and evaluating language models, for assignments D and E (no graded answer here).

The loop takes any model whose ``forward(src, src_mask)`` maps token ids ``(B, L)`` to logits
``(B, L, V)``: the students' Transformer and D's LSTM train with the same code, on the same
batches, for the same time budget, so their numbers can be compared. The causal mask is the
notebook's own function (assignment A's answer, given in D and E), passed as ``causal_mask``.

    history = train_lm(model, train_x, train_y, val_x, val_y,
                       causal_mask=generate_square_subsequent_mask, time_budget_s=120)
    plot_validation_curves({"Transformer": history}, to_perplexity=perplexity)

Inputs and targets are prepared once, as two LongTensors ``(n, L)`` (targets = inputs shifted by
one token, cut by the notebook's own function), so a step does no Python work per token: it
indexes a batch, runs forward and backward, clips the gradients and steps the optimiser. The
losses stay on-tensor between evaluations (no ``.item()`` per step).

Everything follows the model's device: each batch is moved to where the model's weights are (a
no-op when the rows already live there), so a notebook trains on a GPU by moving its model there
(``course.device.pick_device``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial

import matplotlib.pyplot as plt
import torch
from torch import nn
from tqdm.auto import tqdm

from course.device import autocast, device_of

MaskFn = Callable[[int], torch.Tensor]  # length L -> additive mask (L, L)


@dataclass
class History:
    """What :func:`train_lm` measured. Losses are mean negative log-likelihoods in nats."""

    steps: list[int] = field(default_factory=list)  # step of each evaluation
    tokens: list[int] = field(default_factory=list)  # training tokens seen at each evaluation
    seconds: list[float] = field(default_factory=list)  # training seconds at each evaluation
    train_loss: list[float] = field(default_factory=list)  # mean loss since the last evaluation
    val_loss: list[float] = field(default_factory=list)
    total_steps: int = 0
    total_tokens: int = 0
    train_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """Training throughput (evaluation time excluded)."""
        return self.total_tokens / self.train_seconds if self.train_seconds else 0.0

    @property
    def best_val_loss(self) -> float:
        """The lowest validation loss of all evaluations (inf if there was none)."""
        return min(self.val_loss, default=math.inf)


@torch.no_grad()
def evaluate_lm(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    causal_mask: MaskFn | None,
    batch_size: int = 64,
) -> float:
    """Mean negative log-likelihood per token (nats) of ``targets`` given ``inputs``.

    Args:
        model: forward(src (B, L), src_mask) -> logits (B, L, V). Put in eval mode here, and
            put back in the mode it had.
        inputs, targets: LongTensors (n, L), on any device (each batch goes to the model's).
        causal_mask: the notebook's mask function (length -> (L, L) mask), or None to run
            without a mask (the no-mask experiment).
        batch_size: rows per forward pass.
    """
    was_training = model.training
    model.eval()
    device = device_of(model)
    mask = None if causal_mask is None else causal_mask(inputs.size(1)).to(device)
    total = 0.0  # summed in float64 on the host: one transfer per batch, any device
    for start in range(0, inputs.size(0), batch_size):
        x = inputs[start : start + batch_size].to(device)
        y = targets[start : start + batch_size].to(device)
        logits = model(x, mask)  # (b, L, V)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1), reduction="sum"
        )
        total += float(loss)
    model.train(was_training)
    return float(total) / max(1, targets.numel())


def train_lm(
    model: nn.Module,
    train_inputs: torch.Tensor,
    train_targets: torch.Tensor,
    val_inputs: torch.Tensor,
    val_targets: torch.Tensor,
    *,
    causal_mask: MaskFn | None,
    batch_size: int = 32,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    clip: float = 1.0,
    time_budget_s: float | None = 60.0,
    max_steps: int | None = None,
    eval_every: int = 100,
    seed: int = 0,
    progress: bool = True,
    desc: str = "training",
    lr_factor: Callable[[int], float] | None = None,
    bf16: bool = False,
) -> History:
    """Train a language model with teacher forcing and return what was measured.

    Teacher forcing: every position gets the true previous tokens as input (the rows of
    ``train_inputs``) and is trained to predict the next one (``train_targets``), all positions
    of a batch in one forward pass. Training stops when the time budget or the step budget is
    spent, whichever comes first; the model is evaluated on the validation rows every
    ``eval_every`` steps and at the end.

    Args:
        model: forward(src (B, L), src_mask) -> logits (B, L, V).
        train_inputs, train_targets: LongTensors (n, L), targets = inputs shifted by one token
            (on any device: each batch goes to the model's). val_*: the validation split.
        causal_mask: the notebook's mask function (length -> (L, L) mask: assignment A's
            ``generate_square_subsequent_mask``), or None to train without a mask.
        batch_size: rows per step.
        lr, weight_decay: AdamW settings.
        clip: largest gradient norm (gradient clipping).
        time_budget_s: seconds of training (evaluation excluded); None for no time limit.
        max_steps: largest number of steps; None for no step limit.
        eval_every: steps between evaluations. seed: of the batch order (and of dropout).
        progress, desc: show a tqdm progress bar, its label.
        lr_factor: step -> multiplier of ``lr`` (a schedule such as :func:`warmup_cosine`);
            None keeps ``lr`` constant.
        bf16: run the forward pass under bfloat16 autocast (``course.device.autocast``).
    """
    n, length = _training_shape(train_inputs, train_targets, time_budget_s, max_steps)
    torch.manual_seed(seed)
    mask = None if causal_mask is None else causal_mask(length).to(device_of(model))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    bar = _progress_bar(max_steps, time_budget_s, desc, progress)
    evaluate = partial(evaluate_lm, model, val_inputs, val_targets, causal_mask)
    run = _Run(model, optimizer, lr_factor, bar, evaluate, bf16)
    batches = _row_batches(n, batch_size, torch.Generator().manual_seed(seed))  # the order
    model.train()
    while not run.spent(max_steps, time_budget_s):
        run.step(lambda: next(batches), train_inputs, train_targets, mask, clip, time_budget_s)
        if run.history.total_steps % eval_every == 0:
            run.record()
    return run.finish()


def _training_shape(
    inputs: torch.Tensor, targets: torch.Tensor, time_budget_s: float | None, max_steps: int | None
) -> tuple[int, int]:
    """The (n, L) of the training rows, once the budgets and the rows are found usable."""
    if time_budget_s is None and max_steps is None:
        raise ValueError("give a time budget, a step budget, or both")
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError("train_inputs and train_targets must be two (n, L) tensors")
    n, length = inputs.shape
    if n < 1:
        raise ValueError("no training rows")
    return n, length


def _progress_bar(
    max_steps: int | None, time_budget_s: float | None, desc: str, progress: bool
) -> tqdm:
    """A bar of steps, or of seconds when there is a time budget."""
    return tqdm(
        total=max_steps if time_budget_s is None else round(time_budget_s),
        desc=desc,
        unit="step" if time_budget_s is None else "s",
        disable=not progress,
        leave=False,
    )


def _row_batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Indices of ``batch_size`` rows of ``n``, in a random order drawn anew at each epoch (a
    batch never spans two epochs)."""
    order, cursor = torch.randperm(n, generator=generator), 0
    while True:
        if cursor + batch_size > n:  # a new epoch: a new order
            order, cursor = torch.randperm(n, generator=generator), 0
        yield order[cursor : cursor + batch_size]
        cursor += batch_size


class _Run:
    """One run of :func:`train_lm`: the optimizer and its schedule, the losses since the last
    evaluation (summed on-tensor), the seconds of training (evaluation excluded), the progress
    bar and the history."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        lr_factor: Callable[[int], float] | None,
        bar: tqdm,
        evaluate: Callable[[], float],
        bf16: bool = False,
    ) -> None:
        self.model, self.optimizer, self.bar, self.evaluate = model, optimizer, bar, evaluate
        self.device, self.bf16 = device_of(model), bf16
        self.schedule = (
            None if lr_factor is None else torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
        )
        self.history = History()
        self.running, self.since_eval, self.seconds = self._zero(), 0, 0.0

    def _zero(self) -> torch.Tensor:
        """A scalar 0 on the model's device: the sum of the losses since the last evaluation."""
        return torch.zeros((), device=self.device)

    def spent(self, max_steps: int | None, time_budget_s: float | None) -> bool:
        """Whether the step budget or the time budget is spent."""
        if max_steps is not None and self.history.total_steps >= max_steps:
            return True
        return time_budget_s is not None and self.seconds >= time_budget_s

    def step(
        self,
        rows: Callable[[], torch.Tensor],
        inputs: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor | None,
        clip: float,
        time_budget_s: float | None,
    ) -> None:
        """One optimizer step on the batch of ``rows()`` (its drawing timed too)."""
        start = time.perf_counter()
        chosen = rows()
        x, y = inputs[chosen].to(self.device), targets[chosen].to(self.device)  # (B, L) each
        with autocast(self.device, self.bf16):
            logits = self.model(x, mask)  # (B, L, V)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1)
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        if self.schedule is not None:
            self.schedule.step()
        self.running += loss.detach()
        self.since_eval += 1
        self.history.total_steps += 1
        self.history.total_tokens += y.numel()
        elapsed = time.perf_counter() - start
        self.seconds += elapsed
        self.bar.update(1 if time_budget_s is None else min(elapsed, self.bar.total - self.bar.n))

    def record(self) -> None:
        """Evaluate, and note the step, tokens, seconds and the two losses in the history."""
        history = self.history
        history.steps.append(history.total_steps)
        history.tokens.append(history.total_tokens)
        history.seconds.append(self.seconds)
        history.train_loss.append(
            float(self.running) / self.since_eval if self.since_eval else math.nan
        )
        history.val_loss.append(self.evaluate())
        self.running, self.since_eval = self._zero(), 0
        self.bar.set_postfix(val_loss=f"{history.val_loss[-1]:.3f}")

    def finish(self) -> History:
        """The last evaluation (unless one was just made), the model back in eval mode."""
        if self.since_eval or not self.history.val_loss:
            self.record()
        self.bar.close()
        self.history.train_seconds = self.seconds
        self.model.eval()
        return self.history


def warmup_cosine(steps: int, warmup: int, floor: float = 0.1) -> Callable[[int], float]:
    """A learning-rate multiplier for :func:`train_lm`: linear warm-up, then a cosine decay.

    The factor rises from ``1 / warmup`` to 1 over the first ``warmup`` steps, then falls along
    half a cosine to ``floor`` at step ``steps`` (and stays there).
    """
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup must be in [0, steps), got warmup={warmup}, steps={steps}")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        done = min(1.0, (step - warmup) / (steps - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * done))

    return factor


def plot_validation_curves(
    histories: Mapping[str, History],
    to_perplexity: Callable[[float], float],
    baselines: Mapping[str, float] | None = None,
    x: str = "seconds",
    ax: plt.Axes | None = None,
    title: str = "Validation perplexity during training",
) -> plt.Axes:
    """Validation perplexity (log scale) against training seconds (or "tokens", "steps").

    Args:
        histories: label -> what train_lm returned.
        to_perplexity: turns a mean NLL into a perplexity (the notebook passes its own function).
        baselines: label -> perplexity, drawn as dashed horizontal lines.
        x: "seconds", "tokens" or "steps".
        ax: where to draw (a new figure if None).
        title: the title of the plot.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    for label, history in histories.items():
        xs = getattr(history, x)
        ax.plot(xs, [to_perplexity(v) for v in history.val_loss], marker=".", label=label)
    for i, (label, value) in enumerate((baselines or {}).items()):
        ax.axhline(value, linestyle="--", color=f"C{len(histories) + i}", label=label)
    ax.set_yscale("log")
    ax.set_xlabel({"seconds": "training time (s)", "tokens": "training tokens seen"}.get(x, x))
    ax.set_ylabel("validation perplexity (log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt_ids: list[int],
    n_tokens: int,
    causal_mask: MaskFn | None,
    temperature: float = 1.0,
    context: int = 64,
    seed: int = 0,
) -> list[int]:
    """Sample ``n_tokens`` ids after ``prompt_ids``, one at a time, at a temperature.

    At each step the model reads the last ``context`` ids, the logits of the last position are
    divided by ``temperature`` (below 1: safer, more repetitive; above 1: more surprising) and a
    token is drawn from their softmax. Temperature 0 takes the most likely token (greedy).
    The model runs where its weights are; the drawing happens on the CPU (the same draws on any
    device for one seed).
    """
    if not prompt_ids:
        raise ValueError("the prompt needs at least one token")
    model.eval()
    device = device_of(model)
    gen = torch.Generator().manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(n_tokens):
        src = torch.tensor([ids[-context:]], device=device)  # (1, L)
        mask = None if causal_mask is None else causal_mask(src.size(1)).to(device)
        last = model(src, mask)[0, -1].float().cpu()  # (V,)
        if temperature <= 0:
            ids.append(int(last.argmax()))
        else:
            probs = torch.softmax(last.double() / temperature, dim=-1)
            ids.append(int(torch.multinomial(probs, 1, generator=gen)))
    return ids[len(prompt_ids) :]
