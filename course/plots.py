"""Small plotting helpers shared by the notebooks (matplotlib only).

The figures are sized for a notebook column (JupyterLab shows about 9.5 inches at 100 dpi
without shrinking them), so that the default 10-point text stays readable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

# The colours of a mask: allowed (0), blocked (-inf), anything else (a mistake worth seeing).
MASK_COLOURS = {"allowed": "#8fbce6", "blocked": "#d9d9d9", "other": "#f4a261"}


def heatmap(
    matrix: torch.Tensor,
    title: str,
    xlabel: str = "",
    ylabel: str = "",
    ax: Axes | None = None,
    cmap: str = "viridis",
    tick_labels: Sequence[str] | None = None,
    annotate: bool = False,
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool | str = True,
    fontsize: float | None = None,
) -> Axes:
    """Draw a 2-D tensor as a heatmap with a colour bar; -inf is drawn in grey.

    ``tick_labels`` names the rows and columns (tokens, say); ``annotate`` writes each value (in
    black or white, whichever reads better on the cell). ``vmin``/``vmax`` fix the colour scale
    (0 and 1 for attention weights, so that panels compare). ``colorbar`` is True for a colour
    bar, a string for a colour bar with that label, False for none; a colour bar is left out
    anyway when every finite entry has the same value and no scale is given (it would say
    nothing). ``fontsize`` sets the size of the annotations (default: fitted to the cells).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4), layout="constrained")
    values = matrix.detach().to(torch.float32).cpu()
    shown = values.masked_fill(torch.isinf(values), float("nan"))
    colormap = plt.get_cmap(cmap).with_extremes(bad="lightgrey")
    image = ax.imshow(
        shown.numpy(),
        cmap=colormap,
        aspect="auto",
        interpolation="nearest",
        vmin=vmin,
        vmax=vmax,
    )
    finite = values[torch.isfinite(values)]
    varies = finite.numel() > 0 and bool(finite.max() > finite.min())
    if colorbar is not False and (varies or vmin is not None or vmax is not None):
        bar = ax.figure.colorbar(image, ax=ax)
        if isinstance(colorbar, str):
            bar.set_label(colorbar)
    _finish(ax, title, xlabel, ylabel, tick_labels, values.shape)
    if annotate:
        size = fontsize if fontsize is not None else _cell_fontsize(ax, values.shape)
        for (row, col), value in _cells(values):
            text = "-inf" if value == float("-inf") else f"{value:.2g}"
            # grey cells (infinite, NaN) take black; the others whichever reads on their colour
            drawn = math.isfinite(value)
            colour = _ink(colormap(image.norm(value))) if drawn else "black"
            _write(ax, row, col, text, size, colour)
    return ax


def mask_heatmap(
    mask: torch.Tensor,
    title: str,
    xlabel: str = "",
    ylabel: str = "",
    ax: Axes | None = None,
    tick_labels: Sequence[str] | None = None,
    annotate: bool = True,
    legend: bool = True,
) -> Axes:
    """Draw an additive attention mask in two colours: 0 (attend) and -inf (blocked).

    Any other value (a mask with 1 or -1e9 in it, say) gets a third colour, so that a mistake
    shows. A boolean mask follows PyTorch's convention: True means blocked. ``annotate`` writes
    each entry in its cell; ``legend`` explains the colours under the axes. No colour bar: a
    mask has two values, not a scale.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.6), layout="constrained")
    values = _additive(mask)
    blocked = torch.isneginf(values)
    allowed = values == 0
    kind = torch.full(values.shape, 2)  # 0 allowed, 1 blocked, 2 other
    kind[allowed] = 0
    kind[blocked] = 1
    colours = ListedColormap(list(MASK_COLOURS.values()))
    ax.imshow(
        kind.numpy(), cmap=colours, vmin=-0.5, vmax=2.5, aspect="auto", interpolation="nearest"
    )
    # thin white lines between the cells
    rows, cols = values.shape
    ax.set_xticks([c - 0.5 for c in range(1, cols)], minor=True)
    ax.set_yticks([r - 0.5 for r in range(1, rows)], minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    _finish(ax, title, xlabel, ylabel, tick_labels, values.shape)
    if annotate:
        size = _cell_fontsize(ax, values.shape)
        for (row, col), value in _cells(values):
            text = "-inf" if value == float("-inf") else f"{value:.2g}"
            _write(ax, row, col, text, size, "black")
    if legend:
        _mask_legend(ax, allowed, blocked, below_label=bool(xlabel))
    return ax


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """The mask as float32 on the CPU, a boolean one made additive (True: -inf)."""
    values = mask.detach().cpu()
    if values.dtype == torch.bool:
        values = torch.zeros(values.shape).masked_fill(values, float("-inf"))
    return values.to(torch.float32)


def _mask_legend(ax: Axes, allowed: torch.Tensor, blocked: torch.Tensor, below_label: bool) -> None:
    """The colours of :func:`mask_heatmap` that the mask uses, explained under the axes (lower
    when an x label sits there)."""
    names = {"allowed": "0: attended", "blocked": "-inf: blocked", "other": "other value"}
    present = {"allowed": bool(allowed.any()), "blocked": bool(blocked.any())}
    present["other"] = bool((~allowed & ~blocked).any())
    handles = [
        Patch(facecolor=MASK_COLOURS[k], edgecolor="grey", label=names[k])
        for k in MASK_COLOURS
        if present[k]
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14 if below_label else -0.08),
        ncols=len(handles),
        frameon=False,
        handlelength=1.2,
        columnspacing=1.2,
    )


def _finish(
    ax: Axes,
    title: str,
    xlabel: str,
    ylabel: str,
    tick_labels: Sequence[str] | None,
    shape: Sequence[int],
) -> None:
    """Title, axis labels and ticks of a heatmap: names, or every index of a small matrix."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if tick_labels is not None:
        ticks = range(len(tick_labels))
        ax.set_xticks(ticks, tick_labels, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(ticks, tick_labels)
        return
    rows, cols = shape
    if cols <= 16:
        ax.set_xticks(range(cols))
    if rows <= 16:
        ax.set_yticks(range(rows))


def _cells(values: torch.Tensor) -> list[tuple[tuple[int, int], float]]:
    rows, cols = values.shape
    return [((r, c), float(values[r, c])) for r in range(rows) for c in range(cols)]


def _write(ax: Axes, row: int, col: int, text: str, size: float, colour: str) -> None:
    """Write ``text`` centred in a cell. It lies inside the axes, so the layout leaves it out
    (``in_layout=False``: the figure is the same, and drawn 8% faster)."""
    ax.text(col, row, text, ha="center", va="center", fontsize=size, color=colour, in_layout=False)


def _cell_fontsize(ax: Axes, shape: Sequence[int]) -> float:
    """A font size (points) that fits a short number in one cell of the axes."""
    width, height = ax.get_position().size * ax.figure.get_size_inches()
    cell_points = 72 * min(width / shape[1], height / shape[0])
    return max(6.0, min(11.0, cell_points / 3.2))


def _ink(rgba: Sequence[float]) -> str:
    """Black on light cells, white on dark ones."""
    r, g, b = to_rgb(rgba)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


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
    """Plot one or more curves that share an x axis, with a legend.

    On a logarithmic axis the ticks are plain numbers (64, 0.001), without the crowded labels
    of the minor ticks; a log x axis with a few points gets one tick per point.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    for label, y in ys.items():
        ax.plot(x, y, label=label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis, _floats(x), ticks_at_values=True)
    if logy:
        ax.set_yscale("log")
        tidy_log_axis(ax.yaxis, [v for y in ys.values() for v in _floats(y)])
    if len(ys) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax


def _floats(values: Sequence[float] | torch.Tensor) -> list[float]:
    if isinstance(values, torch.Tensor):
        return [float(v) for v in values.detach().flatten()]
    return [float(v) for v in values]


def tidy_log_axis(
    axis: Axis, values: Sequence[float], ticks_at_values: bool = False, max_ticks: int = 8
) -> None:
    """Readable ticks on a logarithmic axis that shows ``values``.

    With ``ticks_at_values`` and at most ``max_ticks`` distinct values (the lengths of a timing
    sweep, say), one tick per value. Otherwise ticks at 1, 10, 100... (or 1, 2, 5, 10... when
    the values span less than two decades), labelled as plain numbers. Minor ticks stay
    unlabelled.
    """
    positive = sorted({v for v in values if v > 0 and v != float("inf")})
    if not positive:
        return
    if ticks_at_values and len(positive) <= max_ticks:
        axis.set_major_locator(FixedLocator(positive))
    else:
        subs = (1.0,) if positive[-1] / positive[0] >= 100 else (1.0, 2.0, 5.0)
        axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
