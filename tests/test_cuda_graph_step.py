"""E's batched step in a CUDA graph (``together._Step``) and E's model that allows it, checked on
the CPU.

There is no GPU here, so ``torch.cuda``'s streams and graphs are replaced by stand-ins that keep
the rules of the real ones that the step relies on: recording a graph runs nothing (the stand-in
runs the step, then puts the weights, the optimizer's state and the losses back), and a replay
runs the recorded step on the recorded inputs as they are at that moment; a stand-in may also
refuse every capture, as a real one refuses a step that copies from the host. What a real capture
refuses is then looked for in a step with the models on the ``meta`` device (``HostTraffic``).
The real capture runs only on a GPU (``python benchmarks/e_sweep_speed.py --graphs``,
``python tools/gpu_check.py --only e --graphs``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from course.e_pretraining import together
from tests.test_devices import META, e_models, e_split


class Recorded:
    """A stand-in for ``torch.cuda.CUDAGraph``: replays the step recorded into it."""

    def __init__(self) -> None:
        self.step: together._Step | None = None
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        self.step._run(*self.step.inputs)


class Cuda:
    """Stand-ins for the parts of ``torch.cuda`` that ``_Step`` calls; ``refuse`` makes every
    capture fail as a capture of a step that copies from the host fails."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse, self.graphs, self.side_steps = refuse, [], 0
        self.capturing: together._Step | None = None

    def CUDAGraph(self) -> Recorded:  # noqa: N802 (torch's name)
        self.graphs.append(Recorded())
        return self.graphs[-1]

    @contextlib.contextmanager
    def graph(self, recorded: Recorded, stream: Cuda | None = None):
        assert stream is self, "the capture runs on the warm-up's stream"
        if self.refuse:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        step = self.capturing
        weights = {name: t.detach().clone() for name, t in step.params.items()}
        state, total = copy.deepcopy(step.optimizer.state_dict()), step.total.clone()
        yield  # the step runs here; a real recording would only note its kernels
        with torch.no_grad():
            for name, t in step.params.items():
                t.copy_(weights[name])
        step.optimizer.load_state_dict(state)
        step.total.copy_(total)
        recorded.step = step

    def Stream(self) -> Cuda:  # noqa: N802 (torch's name); the stand-in is its own stream
        return self

    @contextlib.contextmanager
    def stream(self, stream: Cuda):
        self.side_steps += 1
        yield

    def current_stream(self) -> Cuda:
        return self

    def wait_stream(self, stream: Cuda) -> None:
        pass


def steps(e_given: dict, graphed: bool, cuda: Cuda | None, shapes: list[int], adamw=None):
    """Three of E's classifiers (no dropout) stepped on batches of ``shapes[k]`` rows each (by
    ``adamw``, torch's AdamW unless another is given); returns the ``_Step`` after the steps."""
    models = [e_models(e_given, "classifier", seed) for seed in range(3)]
    loss, params, buffers, trained = together._stacked(models)
    optimizer = (adamw or torch.optim.AdamW)(trained, lr=1e-2, weight_decay=0.01)
    step = together._Step(loss, params, buffers, trained, optimizer, False, graphed)
    if cuda is not None:
        cuda.capturing = step
    data = [e_split(40, seed) for seed in range(3)]
    start = 0
    with together._batchable_attention():
        for rows in shapes:
            batch = [torch.arange(start, start + rows)] * 3
            step(*together._stacked_batch(data, batch, torch.device("cpu"), width=8))
            start += rows
    return step


def fake_cuda(monkeypatch, cuda: Cuda) -> None:
    for name in ("CUDAGraph", "graph", "Stream", "stream", "current_stream"):
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))


def assert_same_weights(step: together._Step, expected: together._Step) -> None:
    for name, weights in expected.params.items():
        assert torch.allclose(step.params[name], weights, atol=1e-6), f"{name} differs"
    assert torch.allclose(step.total, expected.total, atol=1e-5)


def test_the_graph_is_recorded_once_after_the_warm_up_and_replayed(e_given, monkeypatch) -> None:
    """Two steps warm up on a side stream, the third shape-alike step is recorded then replayed,
    and so is every later one of that shape; a shorter batch runs as it is. The weights end as
    if every step had run as it is."""
    shapes = [4, 4, 4, 4, 4, 2, 4]
    expected = steps(e_given, False, None, shapes)
    cuda = Cuda()
    fake_cuda(monkeypatch, cuda)
    step = steps(e_given, True, cuda, shapes)
    assert cuda.side_steps == together._Step.WARM_UP == 2
    assert len(cuda.graphs) == 1 and cuda.graphs[0].replays == 4  # steps 3, 4, 5 and 7
    assert step.inputs[0].shape == (3, 4, 8)
    assert_same_weights(step, expected)


def test_a_step_that_cannot_be_recorded_runs_as_it_is_and_says_so(
    e_given, monkeypatch, capsys
) -> None:
    shapes = [4] * 6
    expected = steps(e_given, False, None, shapes)
    cuda = Cuda(refuse=True)
    fake_cuda(monkeypatch, cuda)
    monkeypatch.setattr(together, "_SAID", set())
    step = steps(e_given, True, cuda, shapes)
    out = capsys.readouterr().out
    assert "no CUDA graph for these models (CUDA error: operation not permitted" in out
    assert "their steps run as they are" in out
    assert "device=hidden.device" in out  # what to change
    assert step.graph is None and len(cuda.graphs) == 1  # one try, not one a step
    assert_same_weights(step, expected)
    steps(e_given, True, cuda, shapes)  # another setup of the sweep, failing the same way
    assert len(cuda.graphs) == 2 and capsys.readouterr().out == ""  # said once


class WarnsUncaptured(torch.optim.AdamW):
    """AdamW as torch's capturable AdamW behaves on a GPU: at its first step outside a capture it
    warns that capturable can slow it (torch's words, from torch/optim/optimizer.py)."""

    def step(self, closure=None):
        if not getattr(self, "warned", False):
            self.warned = True
            warnings.warn(
                "This instance was constructed with capturable=True or some of all the "
                "param_groups came with capturable=True, but step() is running without CUDA "
                "graph capture.",
                stacklevel=2,
            )
        return super().step(closure)


def test_the_warm_up_before_a_capture_gives_no_capturable_warning(e_given, monkeypatch) -> None:
    """The warm-up steps run outside the capture as meant: AdamW's warning about it would only
    puzzle a student, so it is not shown (and torch still says it in the words filtered)."""
    cuda = Cuda()
    fake_cuda(monkeypatch, cuda)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        steps(e_given, True, cuda, [4] * 4, adamw=WarnsUncaptured)
        assert len(cuda.graphs) == 1 and shown == []
        steps(e_given, False, None, [4] * 2, adamw=WarnsUncaptured)  # no graph asked: it warns
    assert [str(w.message)[:50] for w in shown] == [together.CAPTURABLE_WARNING]
    assert together.CAPTURABLE_WARNING in inspect.getsource(
        importlib.import_module("torch.optim.optimizer")
    )


def test_the_batches_made_ahead_for_a_graph_are_the_epochs_batches() -> None:
    """With CUDA graphs, an epoch's batches are all made (and copied) before its first step, so
    that no copy from the host waits for the queued steps: the same batches, in the same order."""
    data = [e_split(21, seed) for seed in range(3)]

    def epoch(ahead: bool):
        generators = [torch.Generator().manual_seed(seed) for seed in range(3)]
        return together._epoch(data, generators, 4, None, torch.device("cpu"), 8, ahead)

    ahead, lazy = epoch(True), list(epoch(False))
    assert isinstance(ahead, list) and len(ahead) == len(lazy) == 6  # 5 of 4 rows, 1 of 1
    for made, expected in zip(ahead, lazy, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(made, expected, strict=True))


def test_without_a_cuda_device_nothing_is_recorded(e_given, monkeypatch) -> None:
    cuda = Cuda()
    fake_cuda(monkeypatch, cuda)
    step = steps(e_given, False, cuda, [4, 4, 4, 4])
    assert cuda.graphs == [] and cuda.side_steps == 0 and step.graph is None


def test_no_graph_is_asked_under_bf16_autocast(e_given) -> None:
    models = [e_models(e_given, "classifier", seed) for seed in range(2)]
    data = [e_split(12, seed) for seed in range(2)]
    with pytest.raises(ValueError, match="no CUDA graph under bf16"):
        together.train_together(models, data, [0, 1], steps=2, bf16=True, cuda_graph=True)


# ------------------------------------------------------------------ what a capture refuses
class HostTraffic(TorchDispatchMode):
    """With the models on the ``meta`` device, records what a CUDA graph's capture refuses: a
    tensor copied from the CPU to the model's device (a mask moved in ``forward``, CPU indices)
    and a number read back from it (``bool(t)``, ``.item()``). Kernels that synchronise inside
    (none is known in this step) are beyond what ``meta`` can show."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and args[0].device == META:
            self.found.append("a number read back from the device")
            return True if args[0].dtype == torch.bool else 1
        out = func(*args, **kwargs)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        copied_in = func is torch.ops.aten._to_copy.default and kwargs.get("device") == META
        mixed = any(t.device == META for t in tensors)
        if (copied_in or mixed) and any(t.device.type == "cpu" and t.dim() > 0 for t in tensors):
            shapes = [tuple(t.shape) for t in tensors if t.device.type == "cpu"]
            self.found.append(f"{func}: CPU tensors {shapes} copied to the device")
        return out


ONE = torch.ones(1, dtype=torch.long, device=META)  # a length, for a warm-up call


def host_traffic_of_a_step(models: list) -> list[str]:
    """What one batched step of ``models`` (moved to ``meta``) does that a capture refuses."""
    models = [model.to(META) for model in models]
    loss, params, buffers, trained = together._stacked(models)
    optimizer = torch.optim.AdamW(trained, lr=1e-2)
    step = together._Step(loss, params, buffers, trained, optimizer, False, False)
    data = [e_split(12, seed) for seed in range(len(models))]
    batch = together._stacked_batch(data, [torch.arange(4)] * len(models), META, width=8)
    watch = HostTraffic()
    with together._batchable_attention(), watch:
        step._run(*batch)
    return watch.found


def test_the_benchmarks_classifier_keeps_its_step_on_the_device() -> None:
    """What ``e_sweep_speed.py --graphs`` captures: nothing copied in, nothing read back."""
    from benchmarks.e_sweep_speed import GIVEN, LastTokenClassifier

    torch.manual_seed(0)
    models = [LastTokenClassifier(GIVEN.TransformerLM(30, 8, 2, 16, 2)) for _ in "ab"]
    for model in models:  # the copy of the mask made before the step, as in a warm-up
        model.to(META).eval()(torch.zeros(1, 8, dtype=torch.long, device=META), ONE)
    assert host_traffic_of_a_step(models) == []


@pytest.mark.parametrize("kind", ["classifier", "mean", "end", "fit"])
def test_es_classifiers_keep_their_step_on_the_device(e_given, kind) -> None:
    """E's given model with the reference answers, and the readers built on it: the mask that
    ``causal_mask`` labels is copied to the device once, outside the step, and named causal."""
    e_given["PUNCTUATION"] = torch.tensor([1, 2, 3], device=META)  # as the notebook: on DEVICE
    try:
        models = [e_models(e_given, kind, seed) for seed in range(2)]
        for model in models:  # the copy of the mask made before the step, as in a warm-up
            model.to(META).eval()(torch.zeros(1, 8, dtype=torch.long, device=META), ONE)
        assert host_traffic_of_a_step(models) == []
    finally:
        e_given["PUNCTUATION"] = torch.tensor([1, 2, 3])


def test_what_a_capture_refuses_is_found_and_named(e_given) -> None:
    """The check can fail: a classifier that moves the mask itself (the copy loses its label, so
    the encoder checks it: a read back) and reads its last tokens with CPU indices."""

    class MovesItsMask(torch.nn.Module):
        def __init__(self, lm: torch.nn.Module) -> None:
            super().__init__()
            self.lm = lm
            self.lm.decoder = torch.nn.Linear(lm.d_model, 2)

        def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            mask = e_given["causal_mask"](src.size(1)).to(src.device)  # (L, L)
            hidden = self.lm.encode(src, mask)  # (B, L, D)
            return self.lm.decoder(hidden[torch.arange(src.size(0)), lengths - 1])  # (B, 2)

    torch.manual_seed(0)
    models = [MovesItsMask(e_given["TransformerLM"](30, 8, 2, 16, 2)) for _ in "ab"]
    found = host_traffic_of_a_step(models)
    assert "a number read back from the device" in found
    assert any("_to_copy" in line and "(8, 8)" in line for line in found), found  # the mask
    assert any("index" in line and "(4,)" in line for line in found), found  # arange(4)


# ------------------------------------------------------------------ E's given model and its mask
def test_a_labelled_mask_changes_nothing_but_where_it_is_kept(e_given) -> None:
    """``encode`` with ``causal_mask``'s labelled mask gives what it gives with an unlabelled
    copy (the encoder's own check finds it causal), keeps one mask a device (the longest, cut
    to each length), and leaves a mask of the wrong length to fail as before."""
    torch.manual_seed(0)
    lm = e_given["TransformerLM"](30, 8, 2, 16, 2).eval()
    causal_mask = e_given["causal_mask"]
    for length in (8, 5, 8, 3):
        src = torch.randint(0, 30, (2, length))
        labelled, unlabelled = causal_mask(length), causal_mask(length).clone()
        assert labelled.is_causal_mask and not hasattr(unlabelled, "is_causal_mask")
        assert torch.equal(lm.encode(src, labelled), lm.encode(src, unlabelled))
    assert list(lm.masks_on_device) == [torch.device("cpu")]
    assert lm.masks_on_device[torch.device("cpu")].shape == (8, 8)
    with pytest.raises(RuntimeError):
        lm.encode(torch.randint(0, 30, (2, 5)), causal_mask(4))
