"""Helpers of assignment C (counting parameters): where the parameters of a model live.

Nothing here is graded: the notebook uses these to sort a model's parameters into groups by
their names, and to draw the groups as a bar chart.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogLocator
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
    """Grouped horizontal bars: for each group, one bar per model, its count written at its end.

    The scale is logarithmic (the groups differ by orders of magnitude); a group with no
    parameters gets no bar, only its count (0).
    """
    _, ax = plt.subplots(figsize=(9, 0.9 + 0.4 * len(GROUPS) * len(models)), layout="constrained")
    height = 0.8 / len(models)
    largest = max(max(counts.values()) for counts in models.values())
    for i, (label, counts) in enumerate(models.items()):
        ys = [g + (i - (len(models) - 1) / 2) * height for g in range(len(GROUPS))]
        values = [max(counts[g], 1) for g in GROUPS]  # log scale: 0 drawn as an empty bar
        bars = ax.barh(ys, values, height, label=label)
        ax.bar_label(bars, [f"{counts[g]:,}" for g in GROUPS], fontsize=9, padding=3)
    ax.set_yticks(range(len(GROUPS)), GROUPS, fontsize=11)
    ax.invert_yaxis()  # the first group on top
    ax.set_xscale("log")
    ax.set_xlim(1, largest * 300)  # room for the counts at the ends of the bars
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=20))  # one tick per power of 10
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _short_count(v)))
    ax.set_xlabel("parameters (log scale: each grid line is 10 times the previous one)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    return ax


def _short_count(value: float) -> str:
    """1, 10, 100, 1k, 10k, ..., 1M, ..., 1B: tick labels of a count axis."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"
