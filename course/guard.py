"""The run-time half of tamper-proofing: the functions the checks rely on, captured early.

:mod:`course.testcells` calls :func:`capture` when it is imported (the first cell of every
notebook imports it, before any student code runs), and every check then calls
:func:`replaced`: if a student cell has swapped ``torch.allclose`` (say) for a function that
always agrees, the check fails with a message that starts with :data:`MARKER`. The grader finds that
marker in the graded notebook and flags it (``grader/shared/tampering.py``, the static half).
"""

from __future__ import annotations

import math

import numpy
import torch

# The grader looks for this text in the outputs of a graded notebook
# (grader.shared.tampering.MARKER).
MARKER = "TAMPERING DETECTED"

# Functions the checks use to compare values, by dotted name.
GUARDED = {
    "torch.allclose": (torch, "allclose"),
    "torch.isclose": (torch, "isclose"),
    "torch.equal": (torch, "equal"),
    "torch.isnan": (torch, "isnan"),
    "torch.is_tensor": (torch, "is_tensor"),
    "torch.testing.assert_close": (torch.testing, "assert_close"),
    "torch.Tensor.__eq__": (torch.Tensor, "__eq__"),
    "torch.Tensor.all": (torch.Tensor, "all"),
    "torch.Tensor.any": (torch.Tensor, "any"),
    "numpy.allclose": (numpy, "allclose"),
    "math.isclose": (math, "isclose"),
}


def capture() -> dict[str, object]:
    """The current object behind every guarded name."""
    return {name: getattr(owner, attr) for name, (owner, attr) in GUARDED.items()}


def replaced(snapshot: dict[str, object]) -> list[str]:
    """Guarded names whose object is no longer the captured one."""
    return [
        name
        for name, (owner, attr) in GUARDED.items()
        if getattr(owner, attr, None) is not snapshot[name]
    ]
