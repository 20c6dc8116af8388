"""Figures of section 7 of assignment D: attention maps and one number per head, drawn.

Nothing here measures a head: the notebook computes the weights (its given ``attention_maps``)
and the scores (the student's ``previous_token_score`` and ``induction_score``); these helpers
only draw what they are given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from course.plots import heatmap


def head_labels(layers: int, heads: int) -> list[str]:
    """``"L1 H1"``, ``"L1 H2"``, ...: one label per head, layer by layer, counted from 1."""
    return [f"L{layer + 1} H{head + 1}" for layer in range(layers) for head in range(heads)]


def plot_attention_grid(
    maps: Sequence[torch.Tensor],
    title: str,
    tick_labels: Sequence[str] | None = None,
    panel_size: float = 3.0,
    vmax: float = 1.0,
    guide: tuple[int, int] | None = None,
) -> Figure:
    """One heatmap per layer (rows) and head (columns) of the weights ``maps`` (a list of
    (H, L, L), one per layer), on a common scale from 0 to ``vmax``; rows are queries, columns
    keys. ``guide = (offset, first_row)`` draws a dotted line through the cells (i, i - offset)
    for i >= first_row: where a head that reads that offset puts its weight."""
    layers, heads = len(maps), maps[0].size(0)
    fig, axes = plt.subplots(
        layers,
        heads,
        figsize=(min(12.0, panel_size * heads + 0.6), panel_size * layers + 0.4),
        layout="constrained",
        squeeze=False,
    )
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer][head]
            heatmap(
                weights[head],
                f"layer {layer + 1}, head {head + 1}",
                xlabel="key (position read)" if layer == layers - 1 else "",
                ylabel="query (position reading)" if head == 0 else "",
                ax=ax,
                cmap="magma",
                tick_labels=tick_labels,
                vmin=0.0,
                vmax=vmax,
                colorbar="attention weight" if head == heads - 1 else False,
            )
            if guide is not None:
                offset, first_row = guide
                last_row = weights.size(-1) - 1
                rows = [first_row, last_row]
                ax.plot([r - offset for r in rows], rows, ":", color="cyan", linewidth=1)
            if tick_labels is not None:
                ax.tick_params(labelsize=6)
                if head > 0:
                    ax.set_yticklabels([])
    fig.suptitle(title)
    return fig


def plot_head_bars(
    values: Mapping[str, torch.Tensor],
    ax: plt.Axes,
    title: str,
    ylabel: str,
    baselines: Mapping[str, float] | None = None,
) -> plt.Axes:
    """Grouped bars: for every head (x axis), one bar per model. ``values`` maps a model's name
    to a tensor (layers, H); ``baselines`` maps a label to a level drawn as a dashed line."""
    names = list(values)
    first = values[names[0]]
    labels = head_labels(first.size(0), first.size(1))
    width = 0.8 / len(names)
    positions = torch.arange(len(labels), dtype=torch.float32)
    for k, name in enumerate(names):
        heights = values[name].detach().reshape(-1).float()
        ax.bar(
            (positions + (k - (len(names) - 1) / 2) * width).tolist(),
            heights.tolist(),
            width=width,
            label=name,
            color=f"C{k}",
        )
    for k, (label, level) in enumerate((baselines or {}).items()):
        ax.axhline(level, linestyle="--", linewidth=1, color=f"C{len(names) + k}", label=label)
    ax.set_xticks(positions.tolist(), labels, rotation=45 if len(labels) > 4 else 0)
    ax.set_xlabel("head (layer, head)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    tallest = max([float(v.max()) for v in values.values()] + list((baselines or {}).values()))
    ax.set_ylim(0, 1.4 * tallest if tallest > 0 else 1.0)  # room for the legend above the bars
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", ncol=2)
    return ax
