"""Fine-tuning a sentence classifier, for assignment E (no graded answer lives here).

The loop takes any model whose ``forward(src, lengths)`` maps right-padded token ids ``(B, L)``
and the real lengths ``(B,)`` to class logits ``(B, n_classes)``, and trains only the parameters
that require a gradient (so a frozen base stays as it was). It trains where the model's weights
are: each batch is moved there (``course.device``), the splits stay on the CPU.

    train = encode_labelled(tokenizer, texts, labels)          # ids (n, L), lengths, labels
    history = train_classifier(model, train, val, epochs=6, seed=0)
    plot_accuracy_curves({"scratch": [history, ...], ...})

On a GPU, a step of these small models costs little more than launching its kernels, so
:func:`train_classifiers` can train the runs of one setup together (``course.e_pretraining
.together``: one batched model through ``torch.func.vmap``, the same batches and clipping per run).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from torch import nn
from tqdm.auto import tqdm

from course.data import WordTokenizer
from course.device import autocast, device_of
from course.e_pretraining.labelled import (
    ClassifierHistory,
    Labelled,
    accuracy,
    epoch_batches,
    first_line,
)
from course.e_pretraining.together import train_together


def encode_labelled(
    tokenizer: WordTokenizer, texts: Sequence[str], labels: Sequence[int], max_len: int = 64
) -> Labelled:
    """Tokenise texts (cut to ``max_len`` tokens, at least 1) into a :class:`Labelled` split."""
    texts = [text if text.strip() else tokenizer.itos[tokenizer.unk_id] for text in texts]
    ids, lengths = tokenizer.encode_batch(texts, max_len=max_len)  # (n, L), (n,)
    lengths = lengths.clamp(min=1)
    return Labelled(ids, lengths, torch.as_tensor(list(labels), dtype=torch.long))


def balanced_sample(labels: Sequence[int], n: int, seed: int) -> list[int]:
    """Indices of ``n`` examples, as many of each class as possible, drawn with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.as_tensor(list(labels))
    classes = labels.unique().tolist()
    chosen = []
    for k, label in enumerate(classes):
        share = n // len(classes) + (1 if k < n % len(classes) else 0)
        rows = (labels == label).nonzero().flatten()
        chosen += rows[torch.randperm(rows.numel(), generator=generator)[:share]].tolist()
    return sorted(chosen)


def sample_labelled(
    tokenizer: WordTokenizer, pool: Mapping[str, Sequence], n: int, seed: int
) -> Labelled:
    """``n`` balanced examples of ``pool`` (columns "text" and "label"), drawn with ``seed``.

    The rows are :func:`balanced_sample`'s; for one seed, a sample holds every smaller one.
    """
    texts, labels = pool["text"][:], pool["label"][:]  # lists: a dataset's columns read at once
    rows = balanced_sample(labels, n, seed)
    return encode_labelled(tokenizer, [texts[r] for r in rows], [labels[r] for r in rows])


def train_classifier(
    model: nn.Module,
    train: Labelled,
    val: Labelled | None,
    *,
    epochs: int = 6,
    steps: int | None = None,
    lr: float = 5e-4,
    batch_size: int = 32,
    weight_decay: float = 0.01,
    seed: int = 0,
    bf16: bool = False,
) -> ClassifierHistory:
    """Train the parameters of ``model`` that require a gradient; evaluate after every epoch.

    Args:
        model: forward(ids (B, L), lengths (B,)) -> logits (B, n_classes).
        train, val: labelled splits (see :func:`encode_labelled`); with ``val=None`` nothing is
            evaluated (``val_accuracy`` stays empty), which saves time when only the end counts.
        epochs: passes over ``train``.
        steps: if given, exactly this many optimizer steps instead (shuffled passes over
            ``train``, as many as they take), recorded as one epoch: the same budget whatever
            the size of ``train``.
        lr, weight_decay: AdamW settings.
        batch_size: examples per step.
        seed: seed of the batch order and of dropout.
        bf16: the forward pass under bfloat16 autocast (``course.device.autocast``).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameter: nothing would learn")
    torch.manual_seed(seed)
    order_gen = torch.Generator().manual_seed(seed)
    # fused on the CPU: one kernel per tensor instead of a dozen (a fifth of a small step)
    fused = device_of(model).type == "cpu" or None
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)
    history = ClassifierHistory(trainable=sum(p.numel() for p in params))
    history.epochs.append(0)
    history.train_loss.append(math.nan)
    if val is not None:
        history.val_accuracy.append(accuracy(model, val))
    for epoch in range(1, (1 if steps else epochs) + 1):
        start = time.perf_counter()
        batches = epoch_batches(len(train), batch_size, steps, order_gen)
        loss = _train_epoch(model, optimizer, (train.batch(rows) for rows in batches), bf16)
        history.seconds += time.perf_counter() - start
        history.epochs.append(epoch)
        history.train_loss.append(loss)
        if val is not None:
            history.val_accuracy.append(accuracy(model, val))
    model.eval()
    return history


def _train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    bf16: bool,
) -> float:
    """One pass of :func:`train_classifier` over ``batches`` (each moved to the model's device);
    the mean loss."""
    model.train()
    device = device_of(model)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    total, done = torch.zeros((), device=device), 0
    for batch in batches:
        ids, lengths, labels = (t.to(device) for t in batch)
        with autocast(device, bf16):
            logits = model(ids, lengths)  # (b, n_classes)
        loss = nn.functional.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        total += loss.detach()
        done += 1
    return float(total) / done


def kept_rows(
    kept: dict[tuple[int, ...], torch.Tensor],
    keys: list[tuple[int, ...]],
    compute: Callable[[list[int]], Iterable[torch.Tensor]],
) -> list[torch.Tensor]:
    """The kept value of each of ``keys`` (one per row of a batch: its real token ids); the
    missing ones computed once, by ``compute(rows)`` on the first row of each, and kept."""
    new = list({key: b for b, key in enumerate(keys) if key not in kept}.values())
    if new:
        for b, value in zip(new, compute(new), strict=True):
            kept[keys[b]] = value
    return [kept[key] for key in keys]


class FrozenStates:
    """The hidden states of a frozen base, each sentence's computed once and kept.

    A frozen base gives a sentence the same states at every epoch, seed and number of labels,
    so computing them once leaves only the head to train. :meth:`attach` makes a language
    model's ``encode(src, src_mask)`` read the kept states of each row of ``src`` (its real
    tokens: the row up to its padding), computing the missing ones in eval mode, without
    dropout, under the causal mask it was given (a position's state does not depend on the
    padding after it). The kept states belong to one set of weights: attach only copies of the
    same frozen checkpoint to one :class:`FrozenStates`. Not for models trained together
    (``torch.vmap`` cannot read a row's key).
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id
        self.kept: dict[tuple[int, ...], torch.Tensor] = {}  # real token ids -> states (n, D)

    def attach(self, lm: nn.Module, head: str = "decoder") -> bool:
        """Make ``lm.encode`` read the kept states; ``False`` (nothing changed) when a parameter
        of the base (every one but those of ``lm.<head>``) still requires a gradient."""
        base = [p for name, p in lm.named_parameters() if not name.startswith(head + ".")]
        if not base or any(p.requires_grad for p in base):
            return False
        compute = lm.encode

        def encode(src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
            return self.states(lm, compute, src, src_mask)

        lm.encode = encode
        return True

    def states(
        self,
        lm: nn.Module,
        compute: Callable[..., torch.Tensor],
        src: torch.Tensor,
        src_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """(B, L) right-padded ids -> (B, L, D) states: the kept ones, zeros after each row's
        real tokens; rows not seen before computed by ``compute`` (the base's own encode)."""
        real = (src != self.pad_id).sum(1).tolist()  # (B,) real tokens, padding on the right
        keys = [tuple(row[:n]) for row, n in zip(src.tolist(), real, strict=True)]

        def computed(new: list[int]) -> list[torch.Tensor]:
            was_training = lm.training
            lm.eval()
            with torch.no_grad():
                hidden = compute(src[new], src_mask)  # (b, L, D)
            lm.train(was_training)
            return [row[: real[b]].clone() for row, b in zip(hidden, new, strict=True)]

        rows = kept_rows(self.kept, keys, computed)
        out = torch.zeros(src.size(0), src.size(1), rows[0].size(-1), device=rows[0].device)
        for b, row in enumerate(rows):
            out[b, : row.size(0)] = row
        return out


def train_classifiers(
    models: Sequence[nn.Module],
    trains: Sequence[Labelled],
    val: Labelled | None,
    seeds: Sequence[int],
    *,
    together: bool = False,
    name: str | None = None,
    **train_args: object,
) -> list[ClassifierHistory]:
    """:func:`train_classifier` for each model r on ``trains[r]`` with ``seeds[r]``, one after
    another, or with ``together`` (worth it on a GPU, not on a CPU) all at once by
    ``together.train_together``, in a CUDA graph where the environment sets
    ``COURSE_CUDA_GRAPHS=1``; models that ``torch.vmap`` cannot batch are then trained one after
    another (it says so). ``train_args``: epochs or steps, lr, batch_size, weight_decay, bf16.
    With ``name``, prints each run's validation accuracy, untrained then after each epoch, as
    it is known."""

    def report(seed: int, history: ClassifierHistory) -> None:
        if name is not None:
            first, *after = (f"{100 * a:.1f}" for a in history.val_accuracy)
            epochs = f"epochs 1-{len(after)}" if len(after) > 1 else "epoch 1"
            print(
                f"seed {seed} {name:<28} accuracy (%): {first} untrained, {epochs}:",
                " ".join(after),
                f"({history.seconds:.0f} s{' for all together' if together else ''})",
            )

    if together:
        graph = os.environ.get("COURSE_CUDA_GRAPHS") == "1"  # on trial: tools/gpu_check.py --graphs
        try:
            histories = train_together(
                models, trains, seeds, val=val, cuda_graph=graph, **train_args
            )
        except (RuntimeError, NotImplementedError, TypeError) as error:  # vmap's refusals
            reason = first_line(error)
            print(f"these models cannot be trained together ({type(error).__name__}: {reason});")
            print("training them one after another instead: the same experiment, in more time")
        else:
            for seed, history in zip(seeds, histories, strict=True):
                report(seed, history)
            return histories
    together, histories = False, []
    runs = zip(models, trains, seeds, strict=True)
    for model, train, seed in tqdm(runs, total=len(models), desc=name or "runs", unit="run"):
        histories.append(train_classifier(model, train, val, seed=seed, **train_args))
        report(seed, histories[-1])
    return histories


def mean_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    values = list(values)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), spread


def plot_accuracy_curves(
    results: Mapping[str, Sequence[ClassifierHistory]],
    ax: plt.Axes | None = None,
    title: str = "validation accuracy per epoch (mean over seeds; band: min to max)",
) -> plt.Axes:
    """One curve per setup: the mean validation accuracy over seeds, with a min-max band."""
    ax = ax or plt.gca()
    for name, runs in results.items():
        epochs = runs[0].epochs
        table = torch.tensor([run.val_accuracy for run in runs]) * 100  # (seeds, epochs + 1)
        ax.plot(
            epochs,
            table.mean(0),
            marker="o",
            linewidth=2,
            label=f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})",
        )
        ax.fill_between(epochs, table.min(0).values, table.max(0).values, alpha=0.2)
    ax.axhline(50, color="grey", linestyle=":", linewidth=1, label="chance (50%)")
    ax.set_xlabel("epoch (0 = before fine-tuning)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(title)
    ax.set_xticks(results[next(iter(results))][0].epochs)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def summary(results: Mapping[str, Sequence[ClassifierHistory]], at_epochs: Sequence[int]) -> str:
    """A text table: mean +- spread of the validation accuracy at some epochs and at best."""
    width = max(24, *(len(name) + 1 for name in results))
    header = "".join(f"{f'epoch {e}':>16}" for e in at_epochs)
    lines = [f"{'setup':<{width}}{header}{'best epoch':>16}{'trainable':>12}"]
    for name, runs in results.items():
        cells = []
        for epoch in at_epochs:
            mean, spread = mean_and_spread([100 * run.val_accuracy[epoch] for run in runs])
            cells.append(f"{mean:>9.1f} ± {spread:<4.1f}")
        mean, spread = mean_and_spread([100 * max(run.val_accuracy[1:]) for run in runs])
        cells.append(f"{mean:>9.1f} ± {spread:<4.1f}")
        lines.append(f"{name:<{width}}{''.join(cells)}{runs[0].trainable:>12,}")
    return "\n".join(lines)


# ------------------------------------------------------------------ the label-count experiment
LabelCurves = dict[str, dict[int, list[float]]]  # setup -> labels -> accuracy (%) per seed


def label_count_curves(
    build: Callable[[str, int], nn.Module],
    setups: Sequence[str],
    tokenizer: WordTokenizer,
    pool: Mapping[str, Sequence],
    val: Labelled,
    counts: Sequence[int],
    seeds: Sequence[int],
    lrs: Mapping[str, float] | None = None,
    together: bool = False,
    **train_args: object,
) -> LabelCurves:
    """Validation accuracy (%) of each setup after training on ``n`` labelled examples.

    For every seed and count ``n``, ``n`` examples are drawn from ``pool`` by
    :func:`sample_labelled`, each setup's model is built by ``build(setup, seed)``, trained by
    :func:`train_classifier` with ``train_args`` (steps or epochs, lr, batch_size) and measured
    once, at the end, on ``val``. ``lrs`` gives some setups their own learning rate (a new head
    on a frozen base learns faster with a larger one).

    With ``together`` (worth it on a GPU, not on a CPU), the runs of one setup, every seed and
    count, train at once (:func:`train_classifiers`); ``train_args`` must then give ``steps``. A
    model that ``torch.vmap`` cannot batch is then trained one run after another, as without.
    """
    curves: LabelCurves = {setup: {n: [] for n in counts} for setup in setups}
    lrs = lrs or {}
    if together:
        runs = [(seed, n) for seed in seeds for n in counts]
        samples = [sample_labelled(tokenizer, pool, n, seed) for seed, n in runs]
        for setup in setups:
            args = {**train_args, **({"lr": lrs[setup]} if setup in lrs else {})}
            models = [build(setup, seed) for seed, _ in runs]
            train_classifiers(models, samples, None, [s for s, _ in runs], together=True, **args)
            for (_, n), model in zip(runs, models, strict=True):
                curves[setup][n].append(100 * accuracy(model, val))
            print(f"{setup}: {len(runs)} runs trained together")
    bar = tqdm(total=len(seeds) * len(counts) * len(setups), unit="run", disable=together)
    for k, seed in enumerate(seeds):
        for n in counts:
            if not together:
                train = sample_labelled(tokenizer, pool, n, seed)
                for setup in setups:
                    bar.set_description(f"seed {seed}, {n} labels, {setup}")
                    model = build(setup, seed)
                    args = {**train_args, **({"lr": lrs[setup]} if setup in lrs else {})}
                    train_classifier(model, train, None, seed=seed, **args)
                    curves[setup][n].append(100 * accuracy(model, val))
                    bar.update()
            print(
                f"seed {seed}, {n:>5} labels:",
                ", ".join(f"{setup} {curves[setup][n][k]:.1f}" for setup in setups),
            )
    bar.close()
    return curves


def plot_label_curves(
    curves: LabelCurves,
    ax: plt.Axes | None = None,
    xlabel: str = "labelled training reviews",
    title: str = "accuracy against labels (mean over seeds; band: min to max)",
) -> plt.Axes:
    """Accuracy against the number of labels (log scale): the mean over seeds, a min-max band."""
    ax = ax or plt.gca()
    for setup, by_count in curves.items():
        counts = sorted(by_count)
        table = torch.tensor([by_count[n] for n in counts])  # (counts, seeds)
        seeds = table.size(1)
        ax.plot(counts, table.mean(1), marker="o", linewidth=2, label=f"{setup} ({seeds} seeds)")
        ax.fill_between(counts, table.min(1).values, table.max(1).values, alpha=0.2)
    ax.axhline(50, color="grey", linestyle=":", linewidth=1, label="chance (50%)")
    ax.set_xscale("log")
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def lead_table(curves: LabelCurves, ahead: str, behind: str) -> str:
    """Per number of labels: ``ahead``'s accuracy minus ``behind``'s, seed by seed, in points."""
    lines = [f"{ahead} minus {behind} (points), seed by seed:"]
    for n in sorted(curves[ahead]):
        gaps = [a - b for a, b in zip(curves[ahead][n], curves[behind][n], strict=True)]
        mean = statistics.fmean(gaps)
        lines.append(
            f"{n:>6} labels: " + " ".join(f"{g:+5.1f}" for g in gaps) + f"   (mean {mean:+.1f})"
        )
    return "\n".join(lines)
