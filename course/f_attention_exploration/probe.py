"""What the trusted judge needs from assignment F's code (see :mod:`course.verify`).

One item per test cell of the notebook. The visible items ask for the visible cells' own
examples; the inputs of the hidden items are drawn from the grader's secret seed by the functions
below, which the judge calls too. Where a check names a construction tied to the standard basis,
the item also asks for the answer on the standard basis (``None`` when that call raises: the
check then names no such mistake).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from course.f_attention_exploration import synthesizer_checks as synth
from course.f_attention_exploration.experiments import random_orthonormal
from course.probing import by_cell, draw, seed_of
from course.verify import student

# (generator seed of the visible cell, wanted indices): the visible cells' examples.
VISIBLE_COPY = (0, [2])
VISIBLE_AVERAGE = (1, [1, 4])
VISIBLE_NOISY = (2, [0, 3])
VISIBLE_TWO_HEADS = (3, [1, 4])
VISIBLE_KQV = 7
VISIBLE_FLOPS = (7, 3, 5)


def visible_basis(cell_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The 6 orthonormal keys (or means) and 6 values in dimension 8 of a visible cell."""
    gen = torch.Generator().manual_seed(cell_seed)
    return random_orthonormal(6, 8, gen), random_orthonormal(6, 8, gen)


def visible_us() -> torch.Tensor:
    """The visible kqv cell's u_a, u_b, u_c, u_d (rows): beta = 10, dimension 8."""
    return 10.0 * random_orthonormal(4, 8, torch.Generator().manual_seed(VISIBLE_KQV))


def _basis(gen: torch.Generator, fewest: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random orthonormal keys and values: d from 8 to 64, n from ``fewest`` to d."""
    d = int(torch.randint(8, 65, (1,), generator=gen))
    n = int(torch.randint(fewest, d + 1, (1,), generator=gen))
    return random_orthonormal(n, d, gen), random_orthonormal(n, d, gen)


def copy_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(keys, values, j): 6 random bases, j the first, the last and a random position."""
    gen = draw(seed, "copy_cases")
    cases = []
    for _ in range(6):
        keys, values = _basis(gen, 2)
        n = keys.shape[0]
        for j in sorted({0, n - 1, int(torch.randint(0, n, (1,), generator=gen))}):
            cases.append((keys, values, j))
    return cases


def average_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, list[int]]]:
    """(keys, values, [a, b]): 6 random bases, each pair in both orders."""
    gen = draw(seed, "average_cases")
    cases = []
    for _ in range(6):
        keys, values = _basis(gen, 3)
        a, b = torch.randperm(keys.shape[0], generator=gen)[:2].tolist()
        cases += [(keys, values, [a, b]), (keys, values, [b, a])]
    return cases


def _noisy_pairs(seed: int, name: str) -> list[tuple[torch.Tensor, torch.Tensor, int, int, int]]:
    """(means, values, a, b, noise seed): 4 random bases and pairs, drawn under ``name``."""
    gen = draw(seed, name)
    cases = []
    for trial in range(4):
        means, values = _basis(gen, 3)
        a, b = torch.randperm(means.shape[0], generator=gen)[:2].tolist()
        cases.append((means, values, a, b, seed_of(seed, name, trial)))
    return cases


def noisy_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, int, int, int]]:
    """(means, values, a, b, noise seed): 4 random bases and pairs."""
    return _noisy_pairs(seed, "noisy_cases")


def two_heads_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, int, int, int]]:
    """(means, values, a, b, noise seed): 4 random bases and pairs, key a stretched."""
    return _noisy_pairs(seed, "two_heads_cases")


def kqv_cases(seed: int) -> list[torch.Tensor]:
    """Rows u_a, u_b, u_c, u_d: 6 random orthogonal sets, d from 8 to 64, beta from 5 to 20."""
    gen = draw(seed, "kqv_cases")
    cases = []
    for _ in range(6):
        d = int(torch.randint(8, 65, (1,), generator=gen))
        beta = float(5 + 15 * torch.rand(1, generator=gen))
        cases.append(beta * random_orthonormal(4, d, gen))
    return cases


def flops_cases(seed: int) -> list[tuple[int, int, int]]:
    """(M, N, k): 5 random lengths M != N from 1 to 200, widths from 1 to 1024."""
    gen = draw(seed, "flops_cases")
    cases = []
    for _ in range(5):
        m, n = torch.randperm(200, generator=gen)[:2].add(1).tolist()
        cases.append((m, n, int(torch.randint(1, 1025, (1,), generator=gen))))
    return cases


def _or_none(call: Callable[[], object]) -> object:
    """What ``call`` returns, or None when it raises (a diagnosis only, never a verdict)."""
    try:
        return call()
    except Exception:  # noqa: BLE001 - the check ignores a failure there too
        return None


# ---------------------------------------------------------------- items, by test cell
def _read_out(ns: dict, name: str, keys: torch.Tensor, wanted: list[int]) -> dict:
    function = student(ns, name)
    n, d = keys.shape
    query = function(keys.clone(), *wanted)
    basis = _or_none(lambda: function(torch.eye(d)[:n].clone(), *wanted))
    return {"query": query, "basis": basis}


def copy_visible(ns: dict, seed: int) -> object:
    cell_seed, wanted = VISIBLE_COPY
    return _read_out(ns, "query_to_copy", visible_basis(cell_seed)[0], wanted)


def copy_hidden(ns: dict, seed: int) -> object:
    return [_read_out(ns, "query_to_copy", keys, [j]) for keys, _, j in copy_cases(seed)]


def average_visible(ns: dict, seed: int) -> object:
    cell_seed, wanted = VISIBLE_AVERAGE
    return _read_out(ns, "query_for_average", visible_basis(cell_seed)[0], wanted)


def average_hidden(ns: dict, seed: int) -> object:
    return [
        _read_out(ns, "query_for_average", keys, wanted) for keys, _, wanted in average_cases(seed)
    ]


def _two_keys(name: str, visible: tuple, cases: Callable) -> tuple[Callable, Callable]:
    """The visible and hidden items of a cell that calls the student's ``name(means, a, b)``:
    on ``visible`` (cell seed, (a, b)), and on each of ``cases(seed)`` (a fresh copy of means)."""

    def visible_item(ns: dict, seed: int) -> object:
        cell_seed, (a, b) = visible
        return student(ns, name)(visible_basis(cell_seed)[0].clone(), a, b)

    def hidden_item(ns: dict, seed: int) -> object:
        function = student(ns, name)
        return [function(means.clone(), a, b) for means, _, a, b, _ in cases(seed)]

    return visible_item, hidden_item


noisy_visible, noisy_hidden = _two_keys("query_for_average_noisy", VISIBLE_NOISY, noisy_cases)
two_heads_visible, two_heads_hidden = _two_keys(
    "two_head_queries", VISIBLE_TWO_HEADS, two_heads_cases
)


def _kqv(ns: dict, us: torch.Tensor) -> dict:
    function = student(ns, "kqv_matrices")
    eye_us = us[0].norm().item() * torch.eye(us.shape[1])[:4]
    return {"out": function(*us.clone()), "basis": _or_none(lambda: function(*eye_us.clone()))}


def kqv_visible(ns: dict, seed: int) -> object:
    return _kqv(ns, visible_us())


def kqv_hidden(ns: dict, seed: int) -> object:
    return [_kqv(ns, us) for us in kqv_cases(seed)]


def _plain(counts: object) -> object:
    """A mapping as a dict, its numbers as plain int or float (as the check reads them)."""
    if not isinstance(counts, Mapping):
        return counts
    return {
        key: (int(v) if isinstance(v, int) else float(v))
        if isinstance(v, (int, float)) and not isinstance(v, bool)
        else v
        for key, v in counts.items()
    }


def flops_visible(ns: dict, seed: int) -> object:
    return _plain(student(ns, "attention_flops")(*VISIBLE_FLOPS))


def flops_hidden(ns: dict, seed: int) -> object:
    flops = student(ns, "attention_flops")
    return [_plain(flops(m, n, k)) for m, n, k in flops_cases(seed)]


def synthesizer_visible(ns: dict, seed: int) -> object:
    """The visible cell's random case (parts, causality) and its case by hand (values)."""
    cls = student(ns, "SynthesizerAttention")
    cases = [*synth.synthesizer_cases(0, hidden=False), synth.synthesizer_hand_case()]
    return [synth.observe_synthesizer(cls, case) for case in cases]


def synthesizer_hidden(ns: dict, seed: int) -> object:
    cls = student(ns, "SynthesizerAttention")
    cases = synth.synthesizer_cases(seed, hidden=True)
    return [synth.observe_synthesizer(cls, case) for case in cases]


# The test cells, each declared once: grade_id -> the function that observes it here and
# judges it in judge/f_attention_exploration.py (course.probing).
CELLS = {
    "test_copy_visible": "copy_visible",
    "test_copy_hidden": "copy_hidden",
    "test_average_visible": "average_visible",
    "test_average_hidden": "average_hidden",
    "test_noisy_visible": "noisy_visible",
    "test_noisy_hidden": "noisy_hidden",
    "test_two_heads_visible": "two_heads_visible",
    "test_two_heads_hidden": "two_heads_hidden",
    "test_kqv_visible": "kqv_visible",
    "test_kqv_hidden": "kqv_hidden",
    "test_flops_visible": "flops_visible",
    "test_flops_hidden": "flops_hidden",
    "test_synthesizer_visible": "synthesizer_visible",
    "test_synthesizer_hidden": "synthesizer_hidden",
}
ITEMS = by_cell(CELLS, globals())
