"""What the trusted judge needs from assignment A's code (see :mod:`course.verify`).

One item per test cell of the notebook. The inputs of the hidden items are drawn from the
grader's secret seed by the functions below, which the judge calls too.
"""

from __future__ import annotations

import torch

from course.a_masks.checks import encoding_storage_facts
from course.probing import by_cell, draw
from course.verify import student

VISIBLE_LENGTHS = ([3, 1, 4], 4)


def mask_sizes(seed: int) -> list[int]:
    """Sizes of the causal masks asked for: the edge cases, then random ones."""
    gen = draw(seed, "mask_sizes")
    return [1, 2, 5, *torch.randint(6, 40, (3,), generator=gen).tolist()]


def padding_cases(seed: int) -> list[tuple[list[int], int]]:
    """(lengths, max_len) pairs: empty, full and partial sequences, then random batches."""
    gen = draw(seed, "padding_cases")
    cases = [([0, 6, 2], 6)]
    for _ in range(5):
        batch = int(torch.randint(1, 9, (1,), generator=gen))
        max_len = int(torch.randint(1, 30, (1,), generator=gen))
        cases.append((torch.randint(0, max_len + 1, (batch,), generator=gen).tolist(), max_len))
    return cases


def encoding_cases(seed: int) -> list[tuple[int, int, int]]:
    """(d_model, max_len, length) triples: small widths, then random even ones."""
    gen = draw(seed, "encoding_cases")
    cases = []
    for width in [2, 6, *(2 * torch.randint(4, 40, (2,), generator=gen)).tolist()]:
        max_len = int(torch.randint(20, 200, (1,), generator=gen))
        cases.append((width, max_len, int(torch.randint(1, max_len + 1, (1,), generator=gen))))
    return cases


def encoding_input(seed: int, width: int, length: int) -> torch.Tensor:
    """The batch (3, length, width) that the module adds its table to."""
    gen = draw(seed, "encoding_input", width, length)
    return torch.randn(3, length, width, generator=gen)


ROTARY_VISIBLE = [[1.0, 2.0, 3.0, 4.0]] * 3  # the same vector at positions 0, 1, 2


def rotary_cases(seed: int) -> list[tuple[list[int], float | None, torch.dtype]]:
    """(shape, base, dtype) of the hidden calls.

    d = 2, L = 1, batch and head dimensions, another base, the default base (None: not passed),
    float64: what the hidden test cell tries.
    """
    gen = draw(seed, "rotary_cases")
    long = torch.randint(8, 41, (2,), generator=gen).tolist()
    return [
        ([int(torch.randint(2, 9, (1,), generator=gen)), 2], 10000.0, torch.float32),
        ([1, 2 * int(torch.randint(2, 9, (1,), generator=gen))], None, torch.float32),
        ([2, 3, 7, 6], 10000.0, torch.float32),
        ([4, long[0], 6], 100.0, torch.float32),
        ([2, long[1], 32], None, torch.float64),
    ]


def rotary_input(seed: int, index: int, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """The input of hidden call number ``index``."""
    gen = draw(seed, "rotary_input", index)
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------- items, by test cell
def mask_visible(ns: dict, seed: int) -> object:
    return student(ns, "generate_square_subsequent_mask")(3)


def mask_hidden(ns: dict, seed: int) -> object:
    mask = student(ns, "generate_square_subsequent_mask")
    return [mask(size) for size in mask_sizes(seed)]


def padding_visible(ns: dict, seed: int) -> object:
    lengths, max_len = VISIBLE_LENGTHS
    return student(ns, "make_padding_mask")(torch.tensor(lengths), max_len)


def padding_hidden(ns: dict, seed: int) -> object:
    padding = student(ns, "make_padding_mask")
    return [padding(torch.tensor(lengths), max_len) for lengths, max_len in padding_cases(seed)]


def _encoding(ns: dict, width: int, max_len: int, length: int, x: torch.Tensor) -> dict:
    module = student(ns, "PositionalEncoding")(width, dropout=0.0, max_len=max_len)
    sizes = encoding_storage_facts(module)
    module.eval()
    with torch.no_grad():
        table = module(torch.zeros(1, length, width))
        added = module(x)
    return {"table": table, "added": added, **sizes}


def pe_visible(ns: dict, seed: int) -> object:
    return _encoding(ns, 4, 50, 10, torch.ones(3, 10, 4))


def pe_hidden(ns: dict, seed: int) -> object:
    cases = [
        _encoding(ns, width, max_len, length, encoding_input(seed, width, length))
        for width, max_len, length in encoding_cases(seed)
    ]
    encoding = student(ns, "PositionalEncoding")
    default = [b.numel() for b in encoding(8).buffers()]
    moved = encoding(8, dropout=0.0).to(torch.float64).eval()
    with torch.no_grad():
        moved_out = moved(torch.zeros(1, 5, 8, dtype=torch.float64))
    torch.manual_seed(seed)
    train = encoding(16, dropout=0.5, max_len=64).train()
    dropped = train(torch.ones(4, 64, 16))
    return {"cases": cases, "default": default, "moved": moved_out, "dropped": dropped}


def rotary_visible(ns: dict, seed: int) -> object:
    return student(ns, "apply_rotary")(torch.tensor(ROTARY_VISIBLE))


def rotary_hidden(ns: dict, seed: int) -> object:
    rotary = student(ns, "apply_rotary")
    seen = []
    for index, (shape, base, dtype) in enumerate(rotary_cases(seed)):
        x = rotary_input(seed, index, shape, dtype)
        out = rotary(x) if base is None else rotary(x, base=base)
        seen.append({"out": out, "x": x})  # x as the call left it (changed in place?)
    return seen


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/a_masks.py (course.probing).
CELLS = {
    "test_mask_visible": "mask_visible",
    "test_mask_hidden": "mask_hidden",
    "test_padding_visible": "padding_visible",
    "test_padding_hidden": "padding_hidden",
    "test_pe_visible": "pe_visible",
    "test_pe_hidden": "pe_hidden",
    "test_rotary_visible": "rotary_visible",
    "test_rotary_hidden": "rotary_hidden",
}
ITEMS = by_cell(CELLS, globals())
