"""Where the notebooks train: the GPU when there is one, the CPU otherwise (and while grading).

    DEVICE = pick_device()              # prints "training on cuda (NVIDIA H100 ...)" or similar
    model = Model(...).to(DEVICE)       # the course's helpers follow the model's device
    with autocast(DEVICE, bf16=bf16_helps(DEVICE)):  # bfloat16 products where they pay
        logits = model(x)

The course's training helpers (``course.training``, E's and G's ``finetune``, H's windows) move
each batch to the device of the model's weights, so a notebook only moves its models. Grading
always runs on the CPU: the grader's machines have no GPU, and a graded run must give the same
numbers everywhere. ``COURSE_DEVICE=cpu`` (or ``cuda``, ``mps``) chooses by hand, and
``COURSE_FLOAT32=1`` computes in float32 only, as a laptop without bfloat16 instructions does
(``benchmarks/full_modes.py --floor`` sets it to time the course on the floor machine).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
from torch import nn

from course.mode import is_grading

CHOICES = ("cuda", "mps", "cpu")


def _available(name: str) -> bool:
    """Whether PyTorch can use the accelerator ``name`` on this machine."""
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        return torch.backends.mps.is_available()
    return name == "cpu"


def _describe(device: torch.device) -> str:
    """The device and, for a GPU, its name."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "mps (Apple GPU)"
    return "cpu"


def choose_device() -> tuple[torch.device, str]:
    """The device to train on and why: the CPU while grading, ``COURSE_DEVICE`` when set, else
    cuda, then mps, then the CPU, whichever is available first."""
    if is_grading():
        return torch.device("cpu"), "grading mode always runs on the CPU"
    wanted = os.environ.get("COURSE_DEVICE", "").strip().lower()
    if wanted:
        if wanted not in CHOICES:
            raise ValueError(
                f"COURSE_DEVICE={wanted!r} is not a device the course knows: use one of "
                f"{', '.join(CHOICES)}, or unset it to let the course choose."
            )
        if not _available(wanted):
            raise RuntimeError(
                f"COURSE_DEVICE={wanted} but PyTorch finds no {wanted} device on this machine: "
                "unset COURSE_DEVICE (the course then picks what is there) or install a PyTorch "
                "build for that device."
            )
        return torch.device(wanted), "chosen by COURSE_DEVICE"
    for name in CHOICES:
        if _available(name):
            reason = "the GPU found" if name != "cpu" else "no GPU found"
            return torch.device(name), reason
    return torch.device("cpu"), "no GPU found"  # pragma: no cover (the CPU is always there)


def pick_device(verbose: bool = True) -> torch.device:
    """The device the notebook trains on (see :func:`choose_device`); says which when verbose."""
    device, reason = choose_device()
    if verbose:
        print(f"training on {_describe(device)}: {reason}")
    return device


def device_of(model: nn.Module) -> torch.device:
    """Where the model's weights live (the CPU for a model without any)."""
    return next(model.parameters(), torch.empty(0)).device


def bf16_helps(device: torch.device | str) -> bool:
    """Whether bfloat16 autocast is worth turning on: a CUDA GPU that computes in bfloat16, or a
    CPU with bfloat16 instructions (AVX-512 BF16 or AMX: a training step of G's model then takes
    half the time, docs/speed.md). Elsewhere a CPU emulates bfloat16, slower than float32."""
    device = torch.device(device)
    if float32_forced():
        return False
    if device.type == "cpu":
        return cpu_computes_bf16()
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (PyTorch's own test of them; False where this
    PyTorch cannot tell)."""
    tests = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in tests)


def float32_forced() -> bool:
    """Whether ``COURSE_FLOAT32`` asks for float32 only (set, and not ``0``): no bfloat16
    autocast anywhere, whatever the processor computes in."""
    return os.environ.get("COURSE_FLOAT32", "0").strip() not in ("", "0")


def _autocasts(device: torch.device) -> bool:
    """Whether bfloat16 autocast runs on ``device``: the CPU, or a GPU that computes in it (never
    where :func:`float32_forced`)."""
    if float32_forced():
        return False
    return device.type == "cpu" or bf16_helps(device)


@contextlib.contextmanager
def autocast(device: torch.device | str, bf16: bool = True) -> Iterator[None]:
    """Run the block under bfloat16 autocast when ``bf16`` is asked and ``device`` can (the CPU,
    or a CUDA GPU that computes in bfloat16: see :func:`bf16_helps` for when it pays); otherwise
    as it is, in float32. Weights, gradients and the optimizer stay float32 either way."""
    device = torch.device(device)
    if not (bf16 and _autocasts(device)):
        yield
        return
    with torch.autocast(device.type, dtype=torch.bfloat16):
        yield
