"""The course's own code read from a source notebook, for the instructor's tools (not a script).

    code = notebook_code(NOTEBOOK, "given_lm", "span_corruption_solution", MASK=MASK)
    model = code.TransformerLM(**asdict(ModelSizes(ntokens=255, d_model=256, ...)))

The pretraining scripts and benchmarks train the model a notebook gives its students, so they run
that notebook's cells (found by their nbgrader ``grade_id``) rather than keep a copy of them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn


@dataclass
class ModelSizes:
    """Sizes of a notebook's ``TransformerLM`` (the arguments of its constructor)."""

    ntokens: int
    d_model: int
    nhead: int
    d_hid: int
    nlayers: int
    dropout: float = 0.1


def notebook_code(notebook: Path, *grade_ids: str, **names: object) -> SimpleNamespace:
    """Run the cells ``grade_ids`` of ``notebook``, in order, in one namespace that starts with
    ``math``, ``torch``, ``nn`` and ``names``; return what they define."""
    cells = {
        cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"): "".join(cell["source"])
        for cell in json.loads(notebook.read_text())["cells"]
    }
    namespace: dict = {"math": math, "torch": torch, "nn": nn, **names}
    for grade_id in grade_ids:
        if grade_id not in cells:
            raise SystemExit(f"{notebook} has no cell with grade_id {grade_id!r}")
        exec(cells[grade_id], namespace)  # noqa: S102 - the course's own cell
    return SimpleNamespace(**namespace)
