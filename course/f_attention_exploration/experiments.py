"""Helpers for assignment F (attention exploration): sampling, experiments, sliders, timing.

Nothing here answers an exercise: the functions compute attention for a query the student
builds, draw random bases and noisy keys, and run the experiments that the notebook plots.
"""

from __future__ import annotations

import time

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from tqdm.auto import tqdm

from course.mode import under_nbgrader
from course.plots import tidy_log_axis


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """One attention read-out without scaling: ``c = sum_i softmax(k_i^T q)_i v_i``.

    ``q`` is ``(d,)`` (or ``(S, d)`` for S queries), ``keys`` ``(n, d)`` or ``(S, n, d)``,
    ``values`` ``(n, dv)``; the result is ``(dv,)`` or ``(S, dv)``, computed in float64.
    """
    q, keys, values = (t.detach().to(torch.float64) for t in (q, keys, values))
    scores = (keys @ q.unsqueeze(-1)).squeeze(-1)  # (n,) or (S, n)
    weights = torch.softmax(scores, dim=-1)
    return weights @ values


def attention_weights(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The weights ``softmax(k_i^T q)`` (float64), shape ``(n,)`` or ``(S, n)``."""
    q, keys = q.detach().to(torch.float64), keys.detach().to(torch.float64)
    return torch.softmax((keys @ q.unsqueeze(-1)).squeeze(-1), dim=-1)


def random_orthonormal(n: int, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` orthonormal rows in ``R^d`` (``n <= d``), float32, from the QR of a random matrix."""
    basis, _ = torch.linalg.qr(torch.randn(d, n, generator=generator, dtype=torch.float64))
    return basis.T.contiguous().to(torch.float32)


def sample_keys(
    means: torch.Tensor,
    alpha: float,
    samples: int,
    stretched: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw ``samples`` sets of noisy keys ``k_i ~ N(mu_i, Sigma_i)``; shape ``(samples, n, d)``.

    ``Sigma_i = alpha I``, except for key ``stretched`` (if given), whose covariance is
    ``alpha I + 1/2 mu mu^T``: that key is ``mu (1 + xi / sqrt 2)`` plus small noise, with
    ``xi ~ N(0, 1)``, so its length changes from sample to sample (``means`` are unit vectors).
    """
    means = means.detach().to(torch.float64)
    n, d = means.shape
    noise = torch.randn(samples, n, d, generator=generator, dtype=torch.float64)
    keys = means + alpha**0.5 * noise
    if stretched is not None:
        xi = torch.randn(samples, generator=generator, dtype=torch.float64)
        keys[:, stretched] += (xi / 2**0.5)[:, None] * means[stretched]
    return keys


def spread_experiment(
    queries: list[torch.Tensor],
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
    alpha: float,
    samples: int = 500,
    seed: int = 0,
) -> torch.Tensor:
    """Average of the heads' outputs over noisy keys (key ``a`` stretched), projected.

    Each query in ``queries`` is one head; the output of a sample is the mean of the heads'
    read-outs. Returns, per sample, the coordinate of ``c - (v_a + v_b)/2`` along
    ``(v_a - v_b)/|v_a - v_b|`` (0: the average; about +0.71: v_a; about -0.71: v_b).
    """
    generator = torch.Generator().manual_seed(seed)
    keys = sample_keys(means, alpha, samples, stretched=a, generator=generator)
    values = values.detach().to(torch.float64)
    c = torch.stack([attend(q.expand(samples, -1), keys, values) for q in queries]).mean(0)
    direction = values[a] - values[b]
    return (c - (values[a] + values[b]) / 2) @ direction / direction.norm()


def spread_explorer(
    single: torch.Tensor,
    heads: tuple[torch.Tensor, torch.Tensor],
    means: torch.Tensor,
    values: torch.Tensor,
    a: int,
    b: int,
) -> widgets.interactive | None:
    """Sliders for the scale s and the noise variance alpha (the notebook's sigma^2); histograms
    of one head against two.

    ``single`` and ``heads`` are built with scale 1 (unit-length directions, such as
    ``mu_a + mu_b`` or ``mu_a``); the slider multiplies them by ``s``. While nbgrader runs the
    notebook headless, the first view is drawn as a plain figure and None is returned.
    """

    def draw(log10_s: float, log10_alpha: float) -> None:
        s, alpha = 10**log10_s, 10**log10_alpha
        one = spread_experiment([s * single], means, values, a, b, alpha)
        two = spread_experiment([s * heads[0], s * heads[1]], means, values, a, b, alpha)
        fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
        bins = torch.linspace(-0.75, 0.75, 61).numpy()
        ax.hist(one.numpy(), bins=bins, alpha=0.6, label="one head, q = s (mu_a + mu_b)")
        ax.hist(two.numpy(), bins=bins, alpha=0.6, label="two heads, s mu_a and s mu_b")
        ax.axvline(0.71, color="black", linestyle=":", linewidth=1)
        ax.axvline(-0.71, color="black", linestyle=":", linewidth=1)
        ax.set_title(f"500 draws of the keys, s = {s:.3g}, alpha = {alpha:.1e}")
        ax.set_xlabel("c along (v_a - v_b): -0.71 is v_b, 0 the average, +0.71 is v_a")
        ax.set_ylabel("number of draws")
        ax.legend(loc="upper left", fontsize=8)
        plt.show()

    if under_nbgrader():
        draw(1.7, -8.0)
        return None
    return widgets.interactive(
        draw,
        log10_s=widgets.FloatSlider(value=1.7, min=0.0, max=4.0, step=0.1, description="log10 s"),
        log10_alpha=widgets.FloatSlider(
            value=-8.0, min=-10.0, max=-1.0, step=0.5, description="log10 σ²"
        ),
    )


# The three blocks of a translation model: what their score tables pair.
BLOCKS = {
    "encoder_self": "encoder self-attention (M x M)",
    "decoder_encoder": "decoder-encoder (N x M)",
    "decoder_self": "decoder self-attention (N x N)",
}


def time_attention_blocks(
    lengths: list[tuple[int, int]], width: int, repeats: int = 3
) -> dict[str, list[float]]:
    """Seconds (best of ``repeats``) of the three attention blocks of a translation model.

    For each (M, N) in ``lengths``: encoder self-attention (M queries, M keys), decoder-encoder
    attention (N queries, M keys) and decoder self-attention (N queries, N keys), width ``width``,
    one head, float32 on the CPU. The timing runs on one thread after an untimed warm-up call:
    with several threads, each call also pays for starting and joining them, a fixed cost that
    hides how the time grows with the lengths (and grows when other programs keep the cores busy).
    """
    times: dict[str, list[float]] = {name: [] for name in BLOCKS}
    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for m, n in tqdm(lengths, desc="timing", leave=False):
            src = torch.randn(m, width, generator=generator)
            tgt = torch.randn(n, width, generator=generator)
            blocks = {
                "encoder_self": (src, src),
                "decoder_encoder": (tgt, src),
                "decoder_self": (tgt, tgt),
            }
            for name, (queries, memory) in blocks.items():
                torch.nn.functional.scaled_dot_product_attention(queries, memory, memory)  # warm-up
                best = float("inf")
                for _ in range(repeats):
                    start = time.perf_counter()
                    torch.nn.functional.scaled_dot_product_attention(queries, memory, memory)
                    best = min(best, time.perf_counter() - start)
                times[name].append(best)
    finally:
        torch.set_num_threads(threads)
    return times


def sweep_supports_fit(lengths: list[tuple[int, int]], times: dict[str, list[float]]) -> bool:
    """Whether a timing sweep can support a fit of ``log t = c0 + p log M + r log N``.

    False for fewer than 3 distinct values of M or of N (the tiny grid of grading mode), or
    when the longest time is under a millisecond (fixed costs dominate the products).
    """
    distinct_m = {m for m, _ in lengths}
    distinct_n = {n for _, n in lengths}
    longest = max(t for seconds in times.values() for t in seconds)
    return len(distinct_m) >= 3 and len(distinct_n) >= 3 and longest >= 1e-3


def plot_attention_times(
    lengths: list[tuple[int, int]],
    times: dict[str, list[float]],
    fits: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Plot the times of :func:`time_attention_blocks`, one panel per block.

    Each panel draws the time against the source length M, one line per target length N, on
    log-log axes with a tick at each M. ``fits`` maps a block to its fitted exponents (p, r) of
    ``t ~ M^p N^r``: they go in the panel titles and are printed. Without fits (a sweep too
    small to fit, see :func:`sweep_supports_fit`), the figure and the printout say why.
    """
    fits = fits or {}
    ms = sorted({m for m, _ in lengths})
    ns = sorted({n for _, n in lengths})
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.6), sharey=True, layout="constrained")
    colours = plt.get_cmap("viridis")
    for ax, (block, name) in zip(axes, BLOCKS.items(), strict=True):
        for i, n in enumerate(ns):
            pts = [(m, t) for (m, nn), t in zip(lengths, times[block], strict=True) if nn == n]
            ax.plot(
                [m for m, _ in pts],
                [1000 * t for _, t in pts],
                "o-",
                color=colours(i / max(1, len(ns) - 1) * 0.85),
                markersize=4,
                label=f"N = {n}",
            )
        fit = fits.get(block)
        if fit is None:
            ax.set_title(name, fontsize=10.5)
        else:
            power = f"$t \\propto M^{{{fit[0]:.2f}}}\\, N^{{{fit[1]:.2f}}}$"
            ax.set_title(f"{name}\nfit: {power}", fontsize=10.5)
        ax.set_xlabel("source length M")
        ax.set_xscale("log")
        ax.set_yscale("log")
        tidy_log_axis(ax.xaxis, ms, ticks_at_values=True)
        ax.grid(alpha=0.3)
    every = [1000 * t for block in BLOCKS for t in times[block]]
    tidy_log_axis(axes[0].yaxis, every)
    axes[0].set_ylabel("milliseconds (best of the repeats)")
    fig.legend(
        *axes[0].get_legend_handles_labels(),
        loc="outside right center",
        title="target length",
        fontsize=9,
    )
    if not fits:
        note = (
            f"only {len(ms)} x {len(ns)} lengths, longest time {max(every):.2g} ms: "
            "too small a sweep to fit exponents"
        )
        fig.suptitle(note, fontsize=10)
        print(f"No fit: {note} (the full run, outside grading mode, fits them).")
    for block, (p, r) in fits.items():
        print(f"{block:<16} t ~ M^{p:.2f} N^{r:.2f}")
