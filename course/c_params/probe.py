"""What the trusted judge needs from assignment C's code (see :mod:`course.verify`).

One item per test cell of the notebook: the counts the student's five functions return. The
sizes of the hidden items are drawn from the grader's secret seed by the functions below, which
the judge calls too; the judge counts the real PyTorch modules itself. The sizes "far too large
to build" are drawn near those of the notebook's hidden tests (products of small integers and
powers of ten, at most as large), and called with the notebook's own time limit.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch

from course.c_params.checks import call_quickly, heads_of
from course.probing import by_cell, draw
from course.verify import student

# The sizes the visible cells try (the example's configuration and a small module).
VISIBLE_EMBEDDING = [(11, 3), (50001, 200)]
VISIBLE_LAYER = [(8, 2, 32), (200, 2, 200)]
VISIBLE_BASE = [(13, 8, 2, 32, 3), (50001, 200, 2, 200, 4)]
VISIBLE_HEAD = [(200, 2), (200, 50001), (7, 5)]
# kv_cache_bytes: a small cache in float32 (bytes_per_value=4 given by name), then GPT-2 small's
# full context for one sequence with the default (float16).
VISIBLE_KV = [((3, 8, 5, 7), 4), ((12, 768, 1024, 1), None)]


def _int(gen: torch.Generator, low: int, high: int) -> int:
    """A random integer in [low, high)."""
    return int(torch.randint(low, high, (1,), generator=gen))


def _apart(d_model: int, d_hid: int) -> int:
    """d_hid moved off d_model and 3 d_model, so that the named mistakes stay apart."""
    return d_hid + 1 if d_hid in (d_model, 3 * d_model) else d_hid


def embedding_sizes(seed: int) -> list[tuple[int, int]]:
    """(ntokens, d_model) pairs of the hidden test, each in [1, 300)."""
    gen = draw(seed, "embedding_sizes")
    return [(_int(gen, 1, 300), _int(gen, 1, 300)) for _ in range(6)]


def layer_sizes(seed: int) -> list[tuple[int, int, int]]:
    """(d_model, nhead, d_hid): 1 to 8 heads, d_model a multiple of nhead, d_hid apart."""
    gen = draw(seed, "layer_sizes")
    sizes = []
    for _ in range(8):
        nhead = _int(gen, 1, 9)
        d_model = nhead * _int(gen, 1, 9)
        sizes.append((d_model, nhead, _apart(d_model, _int(gen, 1, 65))))
    return sizes


def base_sizes(seed: int) -> list[tuple[int, int, int, int, int]]:
    """(ntokens, d_model, nhead, d_hid, nlayers) of the hidden test of count_base."""
    gen = draw(seed, "base_sizes")
    sizes = []
    for _ in range(6):
        nhead = _int(gen, 1, 9)
        d_model = nhead * _int(gen, 1, 7)
        d_hid = _apart(d_model, _int(gen, 1, 49))
        sizes.append((_int(gen, 1, 200), d_model, nhead, d_hid, _int(gen, 2, 5)))
    return sizes


def head_sizes(seed: int) -> list[tuple[int, int]]:
    """(d_model, n_out) pairs in [1, 300), never equal."""
    gen = draw(seed, "head_sizes")
    sizes = []
    for _ in range(6):
        d_model, n_out = _int(gen, 1, 300), _int(gen, 1, 300)
        sizes.append((d_model, n_out + 1 if n_out == d_model else n_out))
    return sizes


def layer_heads_sizes(seed: int) -> tuple[int, int]:
    """(d_model, d_hid) of the every-number-of-heads check: d_model a multiple of 24."""
    gen = draw(seed, "layer_heads_sizes")
    return 24 * _int(gen, 1, 5), _int(gen, 1, 65)


def base_heads_sizes(seed: int) -> tuple[int, int, int, int]:
    """(ntokens, d_model, d_hid, nlayers) of count_base's every-number-of-heads check."""
    gen = draw(seed, "base_heads_sizes")
    return _int(gen, 1, 200), 24 * _int(gen, 1, 5), _int(gen, 1, 65), _int(gen, 2, 5)


def huge_sizes(seed: int) -> dict[str, tuple[int, ...]]:
    """Sizes far too large to build, one tuple per function (at most the notebook's)."""
    gen = draw(seed, "huge_sizes")

    def scaled(power: int) -> int:  # 2 to 10 times 10**power
        return _int(gen, 2, 11) * 10**power

    nhead = (1, 2, 4, 8)
    return {
        "embedding": (scaled(8), scaled(5)),
        "layer": (scaled(6), nhead[_int(gen, 0, 4)], _int(gen, 2, 41) * 10**6),
        "base": (
            scaled(8),
            scaled(6),
            nhead[_int(gen, 0, 4)],
            _int(gen, 2, 41) * 10**6,
            _int(gen, 50, 101),
        ),
        "head": (scaled(6), scaled(8)),
    }


def kv_sizes(seed: int) -> list[tuple[tuple[int, int, int, int], int | None, int]]:
    """((nlayers, d_model, seq_len, batch), bytes_per_value, nhead) of kv_cache_bytes's trials.

    1 to 48 layers, 1 to 16 heads (d_model an even multiple of nhead, up to 2,048), up to 2,048
    positions and 16 sequences; bytes_per_value is None (the default, float16, not passed) in
    every other trial, else 1, 4 or 8, passed by name as the notebook does.
    """
    gen = draw(seed, "kv_sizes")
    trials = []
    for trial in range(8):
        nhead = (1, 2, 4, 8, 12, 16)[_int(gen, 0, 6)]
        d_model = nhead * 2 * _int(gen, 1, 65)
        sizes = (_int(gen, 1, 49), d_model, _int(gen, 1, 2049), _int(gen, 1, 17))
        per_value = None if trial % 2 == 1 else (1, 4, 8)[_int(gen, 0, 3)]
        trials.append((sizes, per_value, nhead))
    return trials


def kv_huge_sizes(seed: int) -> tuple[int, int, int, int]:
    """(nlayers, d_model, seq_len, batch) of a cache no memory holds, at most the notebook's
    (100, 10**5, 10**6, 10**4)."""
    gen = draw(seed, "kv_huge_sizes")
    return (
        _int(gen, 10, 101),
        _int(gen, 1, 11) * 10**4,
        _int(gen, 1, 11) * 10**5,
        _int(gen, 1, 11) * 10**3,
    )


KV_BUILT = "the cache's tensors and sum their bytes"


def count_of(value: object) -> object:
    """A returned count as the judge can load it: an integer (numpy and torch integers
    included, as the checks accept them) as ``int``; anything else as it came (a bool, a float,
    or a type name once saved), which the judge's checks reject as the notebook's do."""
    if isinstance(value, bool):
        return value
    try:
        return int(operator.index(value))  # type: ignore[arg-type]
    except TypeError:
        return value


def _counts(count: Callable[..., object], sizes: list[tuple[int, ...]]) -> list[object]:
    return [count_of(count(*args)) for args in sizes]


def _hidden(
    ns: dict,
    name: str,
    sizes: list[tuple[int, ...]],
    huge: tuple[int, ...],
    heads: Callable[[Callable[..., object]], object] | None = None,
) -> dict:
    count = student(ns, name)
    seen: dict[str, object] = {"trials": _counts(count, sizes)}
    if heads is not None:
        seen["heads"] = heads(count)
    seen["huge"] = count_of(call_quickly(count, huge, name))
    return seen


# ---------------------------------------------------------------- items, by test cell
def embedding_visible(ns: dict, seed: int) -> object:
    return _counts(student(ns, "count_embedding"), VISIBLE_EMBEDDING)


def embedding_hidden(ns: dict, seed: int) -> object:
    return _hidden(ns, "count_embedding", embedding_sizes(seed), huge_sizes(seed)["embedding"])


def layer_visible(ns: dict, seed: int) -> object:
    return _counts(student(ns, "count_encoder_layer"), VISIBLE_LAYER)


def layer_hidden(ns: dict, seed: int) -> object:
    d_model, d_hid = layer_heads_sizes(seed)

    def heads(count: Callable[..., object]) -> list[object]:
        return [count_of(count(d_model, h, d_hid)) for h in heads_of(d_model)]

    return _hidden(ns, "count_encoder_layer", layer_sizes(seed), huge_sizes(seed)["layer"], heads)


def base_visible(ns: dict, seed: int) -> object:
    return _counts(student(ns, "count_base"), VISIBLE_BASE)


def base_hidden(ns: dict, seed: int) -> object:
    ntokens, d_model, d_hid, nlayers = base_heads_sizes(seed)

    def heads(count: Callable[..., object]) -> list[object]:
        return [count_of(count(ntokens, d_model, h, d_hid, nlayers)) for h in heads_of(d_model)]

    return _hidden(ns, "count_base", base_sizes(seed), huge_sizes(seed)["base"], heads)


def head_visible(ns: dict, seed: int) -> object:
    return _counts(student(ns, "count_head"), VISIBLE_HEAD)


def head_hidden(ns: dict, seed: int) -> object:
    return _hidden(ns, "count_head", head_sizes(seed), huge_sizes(seed)["head"])


def _kv_call(count: Callable[..., object], sizes: tuple[int, ...], per_value: int | None) -> object:
    if per_value is None:
        return count_of(count(*sizes))
    return count_of(count(*sizes, bytes_per_value=per_value))


def kv_cache_visible(ns: dict, seed: int) -> object:
    count = student(ns, "kv_cache_bytes")
    return [_kv_call(count, sizes, per_value) for sizes, per_value in VISIBLE_KV]


def kv_cache_hidden(ns: dict, seed: int) -> object:
    count = student(ns, "kv_cache_bytes")
    trials = [_kv_call(count, sizes, per_value) for sizes, per_value, _ in kv_sizes(seed)]
    huge = call_quickly(count, kv_huge_sizes(seed), "kv_cache_bytes", built=KV_BUILT)
    return {"trials": trials, "huge": count_of(huge)}


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/c_params.py (course.probing).
CELLS = {
    "test_embedding_visible": "embedding_visible",
    "test_embedding_hidden": "embedding_hidden",
    "test_layer_visible": "layer_visible",
    "test_layer_hidden": "layer_hidden",
    "test_base_visible": "base_visible",
    "test_base_hidden": "base_hidden",
    "test_head_visible": "head_visible",
    "test_head_hidden": "head_hidden",
    "test_kv_cache_visible": "kv_cache_visible",
    "test_kv_cache_hidden": "kv_cache_hidden",
}
ITEMS = by_cell(CELLS, globals())
