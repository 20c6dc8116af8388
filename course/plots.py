"""Small plotting helpers shared by the notebooks (matplotlib only)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes


def heatmap(
    matrix: torch.Tensor,
    title: str,
    xlabel: str = "",
    ylabel: str = "",
    ax: Axes | None = None,
    cmap: str = "viridis",
    tick_labels: Sequence[str] | None = None,
    annotate: bool = False,
) -> Axes:
    """Draw a 2-D tensor as a heatmap with a colour bar; -inf is drawn in grey.

    ``tick_labels`` names the rows and columns (tokens, say); ``annotate`` writes each value.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    values = matrix.detach().to(torch.float32).cpu()
    shown = values.masked_fill(torch.isinf(values), float("nan"))
    colormap = plt.get_cmap(cmap).with_extremes(bad="lightgrey")
    image = ax.imshow(shown.numpy(), cmap=colormap, aspect="auto", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if tick_labels is not None:
        ticks = range(len(tick_labels))
        ax.set_xticks(ticks, tick_labels, rotation=45, ha="right")
        ax.set_yticks(ticks, tick_labels)
    if annotate:
        for (row, col), value in _cells(values):
            text = "-inf" if value == float("-inf") else f"{value:.2g}"
            ax.text(col, row, text, ha="center", va="center", fontsize=8, color="black")
    return ax


def _cells(values: torch.Tensor) -> list[tuple[tuple[int, int], float]]:
    rows, cols = values.shape
    return [((r, c), float(values[r, c])) for r in range(rows) for c in range(cols)]


def line(
    x: Sequence[float] | torch.Tensor,
    ys: dict[str, Sequence[float] | torch.Tensor],
    title: str,
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    logx: bool = False,
    logy: bool = False,
) -> Axes:
    """Plot one or more curves that share an x axis, with a legend."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    for label, y in ys.items():
        ax.plot(x, y, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if len(ys) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax
