"""The inputs of B's trusted verification, which the probe and the judge both draw.

The visible cells' own examples, and the hidden cases drawn from the grader's secret seed (sizes,
masks, inputs whose later tokens change) by the functions below.
"""

from __future__ import annotations

import torch

from course.probing import draw, future_hidden, integer

NEG_INF = float("-inf")

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]


# ---------------------------------------------------------------- inputs, visible cells
def attention_visible_inputs() -> list[Inputs]:
    """The visible cell's calls: the small example without and with a causal mask, a batch."""
    q = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    causal = torch.tensor([[0.0, NEG_INF], [0.0, 0.0]])
    gen = torch.Generator().manual_seed(0)
    qb, kb = torch.randn(3, 2, 5, 8, generator=gen), torch.randn(3, 2, 6, 8, generator=gen)
    vb = torch.randn(3, 2, 6, 4, generator=gen)
    return [(q, q, v, None), (q, q, v, causal), (qb, kb, vb, None)]


def heads_visible_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The visible cell's inputs: x (1, 3, 4) numbered 0..11, and the heads given to merge."""
    x = torch.arange(12.0).reshape(1, 3, 4)
    heads = torch.tensor(
        [[[[0.0, 1.0], [4.0, 5.0], [8.0, 9.0]], [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0]]]]
    )
    return x, heads


def norm_visible_inputs() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The visible cell's calls: gamma = 1 and beta = 0, then a scale and shift."""
    x = torch.tensor([[[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 4.0, 4.0], [5.0, 5.0, 5.0, 9.0]]])
    return [
        (x, torch.ones(4), torch.zeros(4)),
        (x, torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.5, 0.0, -0.5, 1.0])),
    ]


def module_visible_input(*shape: int, seed: int) -> torch.Tensor:
    """A random input of the visible module cells (which draw it from the global generator)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- inputs, hidden cells
def attention_cases(seed: int) -> list[Inputs]:
    """(q, k, v, mask): 2-D to 4-D, Lq != Lk, dv != d; no mask, float masks, causal masks.

    As in the hidden cell, a batch dimension of 1 and values of width 1 are among them.
    """
    gen = draw(seed, "attention_cases")
    cases: list[Inputs] = []
    for trial in range(6):
        lead = [(), (integer(gen, 1, 4),), (integer(gen, 1, 4), integer(gen, 1, 5))][trial % 3]
        lq, lk, d, dv = (
            integer(gen, 2, 9),
            integer(gen, 2, 9),
            integer(gen, 2, 17),
            integer(gen, 1, 9),
        )
        if trial in (2, 5):  # a batch of 1 broadcast with heads; values of width 1 once
            lead = (1, lead[1])
            dv = 1 if trial == 2 else dv
        q = torch.randn(*lead, lq, d, generator=gen)
        k = torch.randn(*lead, lk, d, generator=gen)
        v = torch.randn(*lead, lk, dv, generator=gen)
        float_mask = torch.randn(*([1] * len(lead)), lq, lk, generator=gen)
        cases += [(q, k, v, None), (q, k, v, float_mask)]
        kc = torch.randn(*lead, lq, d, generator=gen)
        vc = torch.randn(*lead, lq, dv, generator=gen)
        cases.append((q, kc, vc, future_hidden(torch.zeros(lq, lq))))
    # A mask with its own batch dimension, broadcast over heads: (B, 1, Lq, Lk).
    q, k, v = (torch.randn(2, 3, 5, 4, generator=gen) for _ in range(3))
    cases.append((q, k, v, torch.randn(2, 1, 5, 5, generator=gen)))
    return cases


def attention_extras(seed: int) -> dict[str, list[torch.Tensor]]:
    """Inputs of the mask=None, in-place and gradient checks."""
    gen = draw(seed, "attention_extras")
    return {
        "plain": [torch.randn(2, 6, 8, generator=gen) for _ in range(3)],
        "grad": [torch.randn(2, 4, 8, generator=gen) for _ in range(4)],  # q, k, v, upstream
    }


def head_cases(seed: int) -> list[dict]:
    """Random sizes (L, H >= 2): x to split, heads to merge, a transposed (strided) input.

    As in the hidden cell, heads of width 1 and the smallest sizes are among them.
    """
    gen = draw(seed, "head_cases")
    cases = []
    for trial in range(6):
        b, length, nhead, width = (
            integer(gen, 1, 6),
            integer(gen, 2, 7),
            integer(gen, 2, 7),
            integer(gen, 1, 7),
        )
        if trial == 0:
            width = 1
        elif trial == 1:
            b, length, nhead = 1, 2, 2
        cases.append(
            {
                "nhead": nhead,
                "x": torch.randn(b, length, nhead * width, generator=gen),
                "heads": torch.randn(b, nhead, length, width, generator=gen),
                "transposed": torch.randn(b, length, nhead, width, generator=gen).transpose(1, 2),
            }
        )
    return cases


def one_head_input(seed: int) -> torch.Tensor:
    """The input split into one head."""
    return torch.randn(2, 5, 6, generator=draw(seed, "one_head_input"))


FORCED_MHSA = {0: (4, 1, 1), 2: (1, 3, 1), 4: (1, 1, 3)}  # trial: (nhead, width, batch)


def mhsa_cases(seed: int) -> list[dict]:
    """Random sizes; masks: none, causal, random floats; x with its last token changed.

    As in the hidden cell, one head, heads of width 1 (d_model = 1 too) and a batch of 1 are
    among them.
    """
    gen = draw(seed, "mhsa_cases")
    cases = []
    for trial in range(5):
        nhead, width, batch = integer(gen, 1, 5), integer(gen, 1, 7), integer(gen, 1, 4)
        nhead, width, batch = FORCED_MHSA.get(trial, (nhead, width, batch))
        d_model, length = nhead * width, 2 + trial
        x = torch.randn(batch, length, d_model, generator=gen)
        masks = [
            None,
            future_hidden(torch.zeros(length, length)),
            torch.randn(length, length, generator=gen),
        ]
        changed = x.clone()
        changed[:, -1] = torch.randn(batch, d_model, generator=gen)
        cases.append(
            {"d_model": d_model, "nhead": nhead, "x": x, "masks": masks, "changed": changed}
        )
    return cases


def gradient_inputs(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    """Random inputs of a gradient check (the last one multiplies the output)."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen) for shape in shapes]


NORM_SHAPES = [(3, 4), (2, 5, 4), (2, 3, 6, 4), (4, 7, 3), (2, 9, 16), (1, 1, 33)]


def norm_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(x, gamma, beta) for each shape: small D (where D - 1 is far from D) and larger ones."""
    gen = draw(seed, "norm_cases")
    cases = []
    for shape in NORM_SHAPES:
        x = 3 * torch.randn(*shape, generator=gen) + 1
        gamma = torch.randn(shape[-1], generator=gen)
        cases.append((x, gamma, torch.randn(shape[-1], generator=gen)))
    return cases


NORM_EPS = (1e-5, 0.1)  # 1e-5 is left to the default


def layer_cases(seed: int) -> list[dict]:
    """Random sizes, post-norm and pre-norm in turn (one head in both, as in the hidden cell).

    Every case has at least four features: a row of two (or three) features can come out of
    the residual almost constant, and layer norm then magnifies float32 rounding beyond any
    tolerance, so that two correct layers would disagree."""
    gen = draw(seed, "layer_cases")
    cases = []
    for trial in range(6):
        nhead, width = integer(gen, 1, 4), integer(gen, 2, 6)
        if trial < 2:
            nhead = 1
        d_model = nhead * width if nhead > 1 else width + 2  # 4 to 24 features
        d_ff = integer(gen, 4, 20)
        batch, length = integer(gen, 1, 4), integer(gen, 2, 8)
        if trial == 2:
            batch, length = 1, 2
        cases.append(
            {
                "d_model": d_model,
                "nhead": nhead,
                "d_ff": d_ff,
                "norm_first": bool(trial % 2),
                "x": torch.randn(batch, length, d_model, generator=gen),
            }
        )
    return cases


def cross_cases(seed: int) -> list[dict]:
    """Random sizes (Lq = Lk, then Lq != Lk); masks: none, random floats, the last memory
    position blocked; for each mask, x with its first position changed. As in the hidden cell,
    one head, a batch of 1 and a memory longer than x are among them."""
    gen = draw(seed, "cross_cases")
    cases = []
    for trial in range(5):
        nhead, width, batch = integer(gen, 1, 5), integer(gen, 1, 7), integer(gen, 1, 4)
        d_model, lq = nhead * width, integer(gen, 2, 8)
        lk = lq if trial < 2 else integer(gen, 2, 10)
        if trial == 0:
            nhead, batch, d_model = 1, 1, width
        elif trial == 4:
            nhead, batch, d_model, lk = 1, 1, width, lq + 2
        x = torch.randn(batch, lq, d_model, generator=gen)
        memory = torch.randn(batch, lk, d_model, generator=gen)
        blocked = torch.zeros(lq, lk)
        blocked[:, -1] = NEG_INF
        masks = [None, torch.randn(lq, lk, generator=gen), blocked]
        changed = []
        for _ in masks:
            y = x.clone()
            y[:, 0] = torch.randn(batch, d_model, generator=gen)
            changed.append(y)
        cases.append(
            {
                "d_model": d_model,
                "nhead": nhead,
                "x": x,
                "memory": memory,
                "masks": masks,
                "changed": changed,
            }
        )
    return cases
