"""Training several runs of one small classifier at once, for assignment E on a GPU.

A step of E's classifiers is far too small to keep a GPU busy: run one after another, each costs
the launching of its kernels. :func:`train_together` stacks the weights of R runs and trains them
as one batched model (``torch.func.vmap``), which on a GPU is several times faster; on a CPU it is
slower. ``finetune.train_classifiers(..., together=True)`` calls it. With ``cuda_graph=True``
the batched step is also captured in a CUDA graph and replayed (for models that keep their step
on the device; E's notebook asks for it only where ``COURSE_CUDA_GRAPHS=1``, see docs/speed.md).

    histories = train_together(models, trains, seeds, val=val, epochs=6)  # a list of R histories
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from course.device import autocast, device_of
from course.e_pretraining.labelled import (
    ClassifierHistory,
    Labelled,
    accuracy,
    epoch_batches,
    first_line,
)


def train_together(
    models: Sequence[nn.Module],
    trains: Sequence[Labelled],
    seeds: Sequence[int],
    *,
    val: Labelled | None = None,
    epochs: int = 6,
    steps: int | None = None,
    lr: float = 5e-4,
    batch_size: int = 32,
    weight_decay: float = 0.01,
    bf16: bool = False,
    cuda_graph: bool = False,
) -> list[ClassifierHistory]:
    """Train R models of one architecture at once, model r on ``trains[r]`` with ``seeds[r]``.

    What :func:`train_classifier` does to each model (the same batches in the same order, AdamW,
    each model's gradient clipped to norm 1 on its own, the same evaluations), as one batched
    model: the R models' weights are stacked, one forward and backward pass of
    ``torch.func.vmap`` serves them all, one optimizer steps them all. Only dropout draws other
    random numbers. On a GPU this is many times faster for small models; on a CPU it is slower.
    Without ``steps``, the training splits must be of one size (their epochs then have the same
    batches). The trained weights are copied back into ``models``, left in eval mode.

    With ``cuda_graph``, every batch is padded to the splits' full width, so that the steps have
    one shape, and on a CUDA device the whole step (forward, backward, clipping, AdamW) is
    captured once in a CUDA graph, then replayed: no Python and no kernel launch per operation.
    The model's step must then stay on the device (no tensor copied from the host, no number
    read back: its causal mask made on the device and passed with ``is_causal=True``), else the
    capture fails, says so, and the steps run as they are (as on a CPU). Not under ``bf16``.
    ``benchmarks/e_sweep_speed.py --graphs`` measures it."""
    _refuse(models, trains, seeds, steps, bf16 and cuda_graph)
    device = device_of(models[0])
    graphed = cuda_graph and device.type == "cuda"
    batched_loss, params, buffers, trained = _stacked(models)
    optimizer = torch.optim.AdamW(trained, lr=lr, weight_decay=weight_decay, capturable=graphed)
    step = _Step(batched_loss, params, buffers, trained, optimizer, bf16, graphed)
    width = max(train.ids.size(1) for train in trains) if cuda_graph else None
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    histories = [
        ClassifierHistory(trainable=sum(p.numel() for p in m.parameters() if p.requires_grad))
        for m in models
    ]
    _record(histories, 0, None, models, val)
    torch.manual_seed(seeds[0])
    for epoch in range(1, (1 if steps else epochs) + 1):
        start, count = time.perf_counter(), 0
        step.total.zero_()
        with _batchable_attention():
            for batch in _epoch(trains, generators, batch_size, steps, device, width, graphed):
                step(*batch)
                count += 1
        losses = (step.total / count).tolist()
        seconds = time.perf_counter() - start
        _unstack_into(models, params, buffers)
        _record(histories, epoch, losses, models, val, seconds)
    return histories


def _refuse(models, trains, seeds, steps: int | None, graph_under_bf16: bool) -> None:
    """Raise ValueError for what :func:`train_together` cannot do, saying what."""
    if not len(models) == len(trains) == len(seeds) or not models:
        raise ValueError("train_together needs as many training splits and seeds as models")
    if steps is None and len({len(train) for train in trains}) > 1:
        raise ValueError("epochs of training splits of different sizes cannot be taken together")
    if graph_under_bf16:
        raise ValueError("train_together captures no CUDA graph under bf16 autocast")


class _Step:
    """One optimizer step of the batched model, its losses added to ``total`` (R,).

    With ``graphed`` (a CUDA device), the steps of the first shape that comes ``WARM_UP`` times
    are captured once in a CUDA graph after those steps, then replayed with each batch copied into
    the captured inputs. A step of another shape (an epoch's shorter last batch) runs as it is."""

    WARM_UP = 2  # steps run as they are before the capture (lazy initialisations, AdamW's state)

    def __init__(self, loss, params, buffers, trained, optimizer, bf16, graphed) -> None:
        self.loss, self.params, self.buffers, self.trained = loss, params, buffers, trained
        self.optimizer, self.bf16, self.graphed = optimizer, bf16, graphed
        self.device = trained[0].device
        self.total = torch.zeros(trained[0].size(0), device=self.device)  # (R,)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: tuple[torch.Tensor, ...] = ()
        self.warm, self.side = 0, None  # steps warmed up; the stream of warm-up and capture
        # graphed becomes False when a capture fails: the steps then run as they are

    def __call__(self, *batch: torch.Tensor) -> None:
        """Train on ``batch``: ids (R, b, l), lengths (R, b), labels (R, b)."""
        if self.graph is not None and batch[0].shape == self.inputs[0].shape:
            for captured, new in zip(self.inputs, batch, strict=True):
                captured.copy_(new)
            self.graph.replay()
        elif not self.graphed or self.graph is not None:
            self._run(*batch)
        elif self.warm < self.WARM_UP:  # on the capture's side stream, as CUDA graphs ask
            self.side = self.side or torch.cuda.Stream()
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side), _uncaptured_as_meant():
                self._run(*batch)
            torch.cuda.current_stream().wait_stream(self.side)
            self.warm += 1
        else:
            self._capture(batch)
            self(*batch)

    def _run(self, ids: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor) -> None:
        with autocast(self.device, self.bf16):
            losses = self.loss(self.params, self.buffers, ids, lengths, labels)  # (R,)
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        _clip_each(self.trained, 1.0)
        self.optimizer.step()
        self.total += losses.detach()

    def _capture(self, batch: Sequence[torch.Tensor]) -> None:
        """Record one step on inputs of ``batch``'s shape (recording runs nothing), or say why
        it could not be recorded and leave the steps to run as they are."""
        self.inputs = tuple(t.clone() for t in batch)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.side):
                self._run(*self.inputs)
        except RuntimeError as error:
            _say_once(
                f"no CUDA graph for these models ({first_line(error)}); their steps run as they "
                "are, correct but slower. A step in a CUDA graph stays on the GPU: make what it "
                "needs there (positions: torch.arange(..., device=hidden.device)) and read no "
                "number back (.item(), print) inside forward. Said once."
            )
            self.graphed = False
            return
        self.graph = graph


@contextlib.contextmanager
def _uncaptured_as_meant() -> Iterator[None]:
    """No warning from AdamW(capturable=True) at its first step outside a capture (that
    capturable can slow it): the warm-up steps before the capture are meant to run so."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=CAPTURABLE_WARNING)
        yield


CAPTURABLE_WARNING = "This instance was constructed with capturable=True"  # torch's words
_SAID: set[str] = set()  # what _say_once has printed in this process


def _say_once(message: str) -> None:
    """Print ``message`` the first time only: a sweep captures several setups, each would fail
    for the same reason."""
    if message not in _SAID:
        _SAID.add(message)
        print(message)


def _stacked(models: Sequence[nn.Module]) -> tuple[Callable, dict, dict, list[torch.Tensor]]:
    """The batched loss, the models' weights and buffers stacked (name -> (R, ...)), and the
    stacked weights that train. The loss maps (weights, buffers, ids (R, b, l), lengths (R, b),
    labels (R, b)) to the R models' losses (R,), each model drawing its own dropout."""
    params, buffers = torch.func.stack_module_state(list(models))  # name -> (R, ...)
    trained = [p for p in params.values() if p.requires_grad]
    if not trained:
        raise ValueError("the models have no trainable parameter: nothing would learn")
    skeleton = copy.deepcopy(models[0]).train()

    def loss_of(weights, state, ids, lengths, labels):  # one model's batch: (b, l), (b,), (b,)
        logits = torch.func.functional_call(skeleton, (weights, state), (ids, lengths))
        return nn.functional.cross_entropy(logits.float(), labels)

    return torch.vmap(loss_of, randomness="different"), params, buffers, trained


def _record(
    histories: list[ClassifierHistory],
    epoch: int,
    losses: list[float] | None,
    models: Sequence[nn.Module],
    val: Labelled | None,
    seconds: float = 0.0,
) -> None:
    """Add an epoch to each run's history: its mean loss (nan before training), the validation
    accuracy if there is a ``val``, and the time of the epoch (of all the runs together)."""
    for r, (history, model) in enumerate(zip(histories, models, strict=True)):
        history.epochs.append(epoch)
        history.train_loss.append(math.nan if losses is None else losses[r])
        history.seconds += seconds
        if val is not None:
            history.val_accuracy.append(accuracy(model, val))


@contextlib.contextmanager
def _batchable_attention() -> Iterator[None]:
    """Attention as plain matrix products, which ``vmap`` batches: PyTorch's fused attention
    kernels and its inference fast path (a frozen reader in eval mode) would run model by model."""
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)


def _epoch(
    trains: Sequence[Labelled],
    generators: Sequence[torch.Generator],
    batch_size: int,
    steps: int | None,
    device: torch.device,
    width: int | None,
    ahead: bool,
) -> Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The batches of one epoch, one of each run at a time (see :func:`_stacked_batch`). With
    ``ahead`` (CUDA graphs), all of them are made and copied to the device before the first
    step: a copy from the host waits for the steps queued on the GPU, and then none waits."""
    orders = [
        list(epoch_batches(len(train), batch_size, steps, generator))
        for train, generator in zip(trains, generators, strict=True)
    ]
    batches = (_stacked_batch(trains, rows, device, width) for rows in zip(*orders, strict=True))
    return list(batches) if ahead else batches


def _stacked_batch(
    trains: Sequence[Labelled],
    rows: Sequence[torch.Tensor],
    device: torch.device,
    width: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch ``rows[r]`` of ``trains[r]`` for every r, as one: ids (R, b, l) cut to the longest
    of all (or ``width`` long), lengths (R, b), labels (R, b), on ``device``. Each run's padding
    beyond its own longest row is cut from its split's right padding, or is ``pad`` (0) past the
    split's width."""
    if width is None:
        width = max(int(train.lengths[r].max()) for train, r in zip(trains, rows, strict=True))
    ids = torch.zeros(len(trains), len(rows[0]), width, dtype=torch.long)
    for k, (train, r) in enumerate(zip(trains, rows, strict=True)):
        part = train.ids[r, :width]
        ids[k, :, : part.size(1)] = part
    lengths = torch.stack([train.lengths[r] for train, r in zip(trains, rows, strict=True)])
    labels = torch.stack([train.labels[r] for train, r in zip(trains, rows, strict=True)])
    return ids.to(device), lengths.to(device), labels.to(device)


@torch.no_grad()
def _clip_each(stacked: Sequence[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` for each of the R models whose gradients are stacked along dim 0."""
    squares = sum(p.grad.flatten(1).pow(2).sum(1) for p in stacked)  # (R,)
    scale = (max_norm / (squares.sqrt() + 1e-6)).clamp(max=1.0)  # (R,)
    for p in stacked:
        p.grad.mul_(scale.view(-1, *[1] * (p.dim() - 1)))


@torch.no_grad()
def _unstack_into(models: Sequence[nn.Module], params: dict, buffers: dict) -> None:
    """Copy model r's slice of the stacked weights and buffers back into ``models[r]``."""
    for r, model in enumerate(models):
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            tensor.copy_((params | buffers)[name][r])
        model.eval()
