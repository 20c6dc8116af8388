"""Helpers of assignment C (counting parameters): where the parameters of a model live.

Nothing here is graded: the notebook uses these to sort a model's parameters into groups by
their names, and to draw the groups as a bar chart.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from torch import nn

GROUPS = ("embedding", "attention", "feed-forward", "norms", "head")


def group_of(name: str) -> str:
    """The group of a parameter, from its name in ``named_parameters()``."""
    if name.startswith("embedding"):
        return "embedding"
    if ".self_attn." in name:
        return "attention"
    if ".linear1." in name or ".linear2." in name:
        return "feed-forward"
    if ".norm" in name:
        return "norms"
    return "head"


def parameter_groups(model: nn.Module) -> dict[str, int]:
    """Parameters per group (embedding, attention, feed-forward, norms, head).

    Shared parameters (weight tying) are counted once, as ``model.parameters()`` does.
    """
    counts = dict.fromkeys(GROUPS, 0)
    for name, p in model.named_parameters():  # yields a shared tensor once
        counts[group_of(name)] += p.numel()
    return counts


def groups_table(models: Mapping[str, Mapping[str, int]]) -> str:
    """A text table: one row per group, one column (count and share) per model."""
    names = list(models)
    lines = [f"{'group':<14}" + "".join(f"{n:>28}" for n in names)]
    for group in GROUPS:
        row = f"{group:<14}"
        for n in names:
            total = sum(models[n].values())
            count = models[n][group]
            row += f"{count:>18,} ({100 * count / total:5.1f}%)"
        lines.append(row)
    lines.append(f"{'total':<14}" + "".join(f"{sum(models[n].values()):>28,}" for n in names))
    return "\n".join(lines)


def groups_bar_chart(models: Mapping[str, Mapping[str, int]], title: str) -> Axes:
    """Grouped bars: for each group, one bar per model (log scale: the groups differ a lot)."""
    _, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
    width = 0.8 / len(models)
    for i, (label, counts) in enumerate(models.items()):
        xs = [g + (i - (len(models) - 1) / 2) * width for g in range(len(GROUPS))]
        values = [max(counts[g], 0.5) for g in GROUPS]  # log scale: show 0 as a stub
        bars = ax.bar(xs, values, width, label=label)
        ax.bar_label(bars, [f"{counts[g]:,}" for g in GROUPS], fontsize=7, rotation=90, padding=2)
    ax.set_xticks(range(len(GROUPS)), GROUPS)
    ax.set_yscale("log")
    ax.set_ylim(1, 1e11)
    ax.set_ylabel("parameters (log scale)")
    ax.set_title(title)
    ax.legend(loc="upper center", ncols=len(models))
    ax.grid(alpha=0.3, axis="y")
    return ax
