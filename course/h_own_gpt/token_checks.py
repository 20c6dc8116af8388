"""Checks for assignment H's tokens: sampling the next token, and byte-pair merges.

``sample_next`` draws at random, so its checks never compare draws with a reference's draws.
The contract has it draw with ``torch.multinomial``: the observation records the probabilities
it was given and what it returned, and when the draws are that call's output, the probabilities
are compared with the distribution that the contract defines (the caller passes a function that
computes it, and what each known mistake gives instead), exactly, whatever the random stream.
Otherwise (a sampler that draws another way, or maps the ids it drew), the checks draw many
times from one row of logits and compare the frequencies with that distribution, and check the
support (no token outside the kept set); such a failure is statistical (its mistake key starts
with :data:`course.contract.STATISTICAL`). The observation runs in a state of its own: the
global generator forked, autocast off, float32 by default, whatever the notebook's cells left.
``bpe_merges`` is deterministic: its merges are compared with the
caller's reference, or, in the visible cell, with a worked example.

The messages naming the mistakes are in :mod:`course.h_own_gpt.recipe_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from course import contract
from course.h_own_gpt import recipe_checks as named
from course.probing import known_state, returned
from course.testcells import check, expected_got, fail, mistake_key

DRAWS = 4000  # rows per call: each case's frequencies come from this many draws

SAMPLE_MISTAKES = ("TIES_DROPPED", "CROSSING_DROPPED", "TOP_P_ON_ALL", "TEMPERATURE_AFTER")
NOTEBOOK_SEED = 2024  # the seed of the cases the notebook's own hidden test draws


# ================================================================ sample_next
def _case(
    logits: list[float], temperature: float, top_k: int | None, top_p: float | None, seed: int
) -> dict:
    return {
        "logits": torch.tensor(logits),
        "temperature": temperature,
        "top_k": top_k,
        "top_p": top_p,
        "seed": seed,
    }


def sample_visible_cases() -> list[dict]:
    """Worked examples: plain, top_k=1, a tie at the k-th logit, a crossing token, a temperature."""
    return [
        _case([0.0, math.log(3.0)], 1.0, None, None, 0),  # probabilities 1/4, 3/4
        _case([1.0, 3.0, 2.0, 0.5], 1.0, 1, None, 1),  # only token 1
        _case([3.0, 2.0, 2.0, 1.0], 1.0, 2, None, 2),  # tokens 0, 1 and 2 (1 and 2 tied)
        _case([math.log(0.5), math.log(0.3), math.log(0.2)], 1.0, None, 0.6, 3),  # tokens 0, 1
        _case([0.0, math.log(3.0)], 0.5, None, None, 4),  # probabilities 1/10, 9/10
    ]


VISIBLE_PROBABILITIES = [
    [0.25, 0.75],
    [0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0],  # filled in below: softmax of [3, 2, 2] then 0
    [0.5 / 0.8, 0.3 / 0.8, 0.0],
    [0.1, 0.9],
]
_tied = torch.softmax(torch.tensor([3.0, 2.0, 2.0]), 0).tolist()
VISIBLE_PROBABILITIES[2] = [*_tied, 0.0]
VISIBLE_MISTAKES: list[dict[str, list[float]]] = [
    {},
    {},
    {
        "TIES_DROPPED": [
            _tied[0] / (_tied[0] + _tied[1]),
            _tied[1] / (_tied[0] + _tied[1]),
            0.0,
            0.0,
        ]
    },
    {"CROSSING_DROPPED": [1.0, 0.0, 0.0]},
    {"TEMPERATURE_AFTER": [0.25, 0.75]},
]


EDGE = 1e-3  # how far every drawn case stays from a filter's edge


def _clear_of_edges(
    logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None
) -> bool:
    """Whether no filter of the case sits on its edge (float64): no running total of top-p within
    EDGE of top_p, and, where top-k is followed by top-p, its k-th and (k+1)-th logits apart by
    EDGE. There float32 and float64 keep the same tokens, whatever order a sampler sums in."""
    z = logits.double() / temperature
    if top_k is not None and top_p is not None:
        values = torch.sort(z, descending=True).values
        if values[top_k - 1] - values[top_k] < EDGE:
            return False
        z = z.masked_fill(z < values[top_k - 1], float("-inf"))
    if top_p is None:
        return True
    probs = torch.sort(torch.softmax(z, 0), descending=True).values
    before = torch.cumsum(probs, 0) - probs  # the running total before each token
    return bool(((before - top_p).abs() >= EDGE).all())


def _logits(k: int, gen: torch.Generator) -> torch.Tensor:
    """The row of case ``k``: continuous logits, or (k = 3) three strong tokens, a weak 4th and a
    heavy tail, so that top-p must follow top-k."""
    vocab = int(torch.randint(6, 14, (1,), generator=gen))
    logits = torch.randn(vocab, generator=gen) * 1.5
    if k == 3:
        vocab = int(torch.randint(10, 14, (1,), generator=gen))
        strong = 2.0 + 0.3 * torch.rand(3, generator=gen)
        tail = 0.4 * torch.rand(vocab - 4, generator=gen)
        logits = torch.cat([strong, torch.tensor([0.5]), tail])
        logits = logits[torch.randperm(vocab, generator=gen)]
    return logits


def sample_cases(seed: int) -> list[dict]:
    """Logits, temperatures, top_k and top_p drawn from ``seed``.

    The logits are continuous (no accidental tie, so the set top-p keeps is never ambiguous)
    but for two ties made on purpose (and one row where top-p on what top-k left and top-p on
    every token keep different sets): at the top of every row (two most probable tokens, each
    below one half, so top-p keeps both), and, where top_k is used alone, between the k-th and
    the (k+1)-th largest logits (top-k must keep both). A row whose filters sit within EDGE of
    an edge is drawn again: there rounding, not the rule, would decide which tokens stay.
    """
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for k in range(6):
        top_k = [None, 3, None, 4, 2, 5][k]
        top_p = [None, None, 0.7, 0.8, None, 0.9][k]
        temperature = [1.0, 0.7, 1.6, 1.0, 0.8, 1.3][k]
        while True:
            logits = _logits(k, gen)
            order = torch.argsort(logits, descending=True)
            logits[order[1]] = logits[order[0]]  # a tie at the top
            if top_k is not None and top_p is None:
                logits[order[top_k]] = logits[order[top_k - 1]]  # a tie at the k-th logit
            if _clear_of_edges(logits, temperature, top_k, top_p):
                break
        cases.append(
            {
                "logits": logits,
                "temperature": temperature,
                "top_k": top_k,
                "top_p": top_p,
                "seed": int(torch.randint(0, 2**31 - 1, (1,), generator=gen)),
            }
        )
    return cases


@contextmanager
def _own_state() -> Iterator[None]:
    """The observation's state (:func:`course.probing.known_state`), gradients off."""
    with known_state(), torch.no_grad():
        yield


@contextmanager
def _recorded_multinomial(calls: list[dict]) -> Iterator[None]:
    """``torch.multinomial`` (and the method) as they are, each call's input and output kept."""
    function, method = torch.multinomial, torch.Tensor.multinomial

    def recording(input: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        out = function(input, *args, **kwargs)
        calls.append({"input": input.detach().clone(), "out": out.detach().clone()})
        return out

    torch.multinomial, torch.Tensor.multinomial = recording, recording
    try:
        yield
    finally:
        torch.multinomial, torch.Tensor.multinomial = function, method


def _drawn_from(calls: list[dict]) -> dict:
    """What one call of torch.multinomial on equal rows drew from: its first row, normalised,
    and what it returned (nothing when it was not called once on rows all alike)."""
    if len(calls) != 1:
        return {}
    weights, out = calls[0]["input"], calls[0]["out"]
    if weights.dim() != 2 or not bool((weights == weights[:1]).all()):
        return {}
    first = weights[0].double()
    return {"drawn_from": first / first.sum(), "multinomial": out}


def observe_sampling(sample_next: Callable, case: dict) -> dict:
    """DRAWS draws from the case's row, again with a fresh generator, and the global RNG; the
    probabilities given to torch.multinomial and what it returned."""
    rows = case["logits"].expand(DRAWS, -1).clone()
    args = (case["temperature"], case["top_k"], case["top_p"])
    calls: list[dict] = []
    with _own_state():
        before = torch.get_rng_state()
        with _recorded_multinomial(calls):
            first = sample_next(rows, *args, generator=torch.Generator().manual_seed(case["seed"]))
        untouched = bool(torch.equal(before, torch.get_rng_state()))
        again = sample_next(
            rows.clone(), *args, generator=torch.Generator().manual_seed(case["seed"])
        )
    return {
        "draws": first,
        "again": again,
        "untouched": untouched,
        "rows": bool(torch.equal(rows, case["logits"].expand(DRAWS, -1))),
        **_drawn_from(calls),
    }


def case_name(case: dict) -> str:
    return (
        f"sample_next(logits of {case['logits'].numel()} tokens, "
        f"temperature={case['temperature']}, top_k={case['top_k']}, top_p={case['top_p']})"
    )


def _fits(counts: torch.Tensor, probs: torch.Tensor) -> bool:
    """The counts look drawn from ``probs``: nothing outside its support, frequencies near it."""
    if bool((counts[probs == 0] > 0).any()):
        return False
    frequencies = counts / counts.sum()
    spread = 5 * torch.sqrt(probs * (1 - probs) / counts.sum()) + 2e-3
    return bool(((frequencies - probs).abs() <= spread).all())


def _drew_by_multinomial(got: dict, draws: torch.Tensor, vocab: int) -> bool:
    """Whether the draws are the output of the one torch.multinomial call the observation
    recorded, on probabilities over the case's tokens."""
    drawn_from, out = got.get("drawn_from"), got.get("multinomial")
    return (
        isinstance(drawn_from, torch.Tensor)
        and tuple(drawn_from.shape) == (vocab,)
        and bool(torch.isfinite(drawn_from).all())
        and isinstance(out, torch.Tensor)
        and out.numel() == DRAWS
        and torch.equal(out.reshape(-1).long(), draws)
    )


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    return bool(((got - expected).abs() <= 1e-5 + 1e-4 * expected).all())


def _judge_drawn_from(
    drawn_from: torch.Tensor, probs: torch.Tensor, mistakes: dict[str, list[float]], name: str
) -> None:
    """The probabilities given to torch.multinomial against the contract's (and the mistakes')."""
    drawn_from = drawn_from.double()
    if _close(drawn_from, probs):
        return
    for mistake, wrong in mistakes.items():
        if _close(drawn_from, torch.tensor(wrong, dtype=torch.float64)):
            fail(f"{name}: {getattr(named, mistake)}")
    fail(
        expected_got(
            f"{name}: the probabilities given to torch.multinomial are not the filtered "
            "distribution.",
            [round(p, 4) for p in probs.tolist()],
            [round(p, 4) for p in drawn_from.tolist()],
        )
    )


def _judge_frequencies(
    counts: torch.Tensor, probs: torch.Tensor, mistakes: dict[str, list[float]], name: str
) -> None:
    """The frequencies of the draws against the contract's distribution (and the mistakes'):
    what decides when the draws are not one torch.multinomial's output. Its failures are
    statistical (their keys start with :data:`course.contract.STATISTICAL`), a token drawn that
    no filter keeps excepted."""
    if _fits(counts, probs):
        return
    outside = sorted(set(torch.nonzero(counts * (probs == 0)).flatten().tolist()))
    for mistake, wrong in mistakes.items():
        if _fits(counts, torch.tensor(wrong, dtype=torch.float64)):
            fail(f"{name}: {getattr(named, mistake)}", _statistical(outside))
    if outside:
        fail(f"{name} drew tokens {outside}, which the filters should have removed.")
    fail(
        expected_got(
            f"{name}: the frequencies of {DRAWS} draws do not follow the distribution.",
            [round(p, 3) for p in probs.tolist()],
            [round(f, 3) for f in (counts / counts.sum()).tolist()],
        ),
        _statistical(outside),
    )


def _statistical(outside: list[int]) -> str | None:
    """The key of a failure decided by frequencies (None, the usual key: one decided by a token
    that should never be drawn)."""
    return None if outside else contract.STATISTICAL + mistake_key(2)


def judge_sampling(
    got: object, case: dict, probabilities: list[float], mistakes: dict[str, list[float]]
) -> None:
    """The draws of one case against the probabilities the contract gives (and the mistakes')."""
    name = case_name(case)
    got = returned(got, name)
    assert isinstance(got, dict)
    draws = got["draws"]
    check(
        isinstance(draws, torch.Tensor)
        and tuple(draws.shape) == (DRAWS,)
        and draws.dtype == torch.long,
        expected_got(
            f"{name} on logits of shape ({DRAWS}, V) should return one token id per row.",
            f"LongTensor of shape ({DRAWS},)",
            f"{type(draws).__name__} {getattr(draws, 'dtype', '')} "
            f"{tuple(getattr(draws, 'shape', ()))}",
        ),
    )
    check(got["rows"], f"{name} changed the logits it was given (in place).")
    vocab = case["logits"].numel()
    check(
        bool(((draws >= 0) & (draws < vocab)).all()), f"{name} returned ids outside 0..{vocab - 1}."
    )
    probs = torch.tensor(probabilities, dtype=torch.float64)
    if _drew_by_multinomial(got, draws, vocab):
        _judge_drawn_from(got["drawn_from"], probs, mistakes, name)
    else:
        _judge_frequencies(torch.bincount(draws, minlength=vocab).double(), probs, mistakes, name)
    again = got["again"]
    check(
        isinstance(again, torch.Tensor) and torch.equal(again, draws) and got["untouched"],
        f"{name}: {named.GLOBAL_GENERATOR}",
    )


def numbers(got: object, probabilities: list[float]) -> str:
    """The probabilities a case's draws came from beside the contract's: a line with the largest
    difference and its token, then both rows (the frequencies of the draws when the sampler did
    not draw by one torch.multinomial call; nothing but what it raised when it raised)."""
    if not isinstance(got, dict) or not isinstance(got.get("draws"), torch.Tensor):
        return f"no draws ({str(got.get('error', got) if isinstance(got, dict) else got)[:200]})"
    probs, draws = torch.tensor(probabilities, dtype=torch.float64), got["draws"]
    vocab = probs.numel()
    if _drew_by_multinomial(got, draws, vocab):
        what, row = "given to torch.multinomial", got["drawn_from"].double()
    elif draws.dtype == torch.long and bool(((draws >= 0) & (draws < vocab)).all()):
        what, row = f"frequencies of {draws.numel()} draws", torch.bincount(draws, minlength=vocab)
        row = row.double() / max(draws.numel(), 1)
    else:
        return f"draws of dtype {draws.dtype}, ids outside 0..{vocab - 1} or not one per row"
    gap = (row - probs).abs()
    token = int(gap.argmax())
    return (
        f"largest difference {float(gap[token]):.2g} at token {token} ({what}: "
        f"{float(row[token]):.6f}, the contract's: {float(probs[token]):.6f})\n"
        f"  the contract's: {[round(p, 6) for p in probs.tolist()]}\n"
        f"  the sampler's:  {[round(p, 6) for p in row.tolist()]}"
    )


# ================================================================ bpe_merges
BPE_VISIBLE = ({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 6)
BPE_VISIBLE_MERGES = [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("e", "w"), ("ew", "est")]
BPE_VISIBLE_MISTAKES = {
    "NOT_WEIGHTED": [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("d", "est"), ("e", "r")],
    "TIE_FIRST": [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w"), ("n", "e"), ("ne", "w")],
}


def bpe_cases(seed: int) -> list[tuple[dict[str, int], int]]:
    """Corpora of words from a small alphabet (many ties, repeated letters) and merge counts."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for alphabet, words in (("ab", 6), ("abc", 10), ("abcde", 16)):
        counts: dict[str, int] = {}
        for _ in range(words):
            length = int(torch.randint(1, 7, (1,), generator=gen))
            word = "".join(
                alphabet[int(i)] for i in torch.randint(len(alphabet), (length,), generator=gen)
            )
            counts[word] = counts.get(word, 0) + int(torch.randint(1, 5, (1,), generator=gen))
        cases.append((counts, int(torch.randint(3, 12, (1,), generator=gen))))
    cases.append(({"aaa": 3, "ab": 5}, 5))  # overlapping pairs; stops when no pair is left
    cases.append(({"xab": 1, "xa": 5, "ab": 3}, 3))  # a merge next to a longer symbol
    cases.append(({"ba": 1, "ab": 1, "cd": 1}, 2))  # a three-way tie
    return cases


def observe_bpe(bpe_merges: Callable, cases: list) -> list:
    """The merges for each case (a copy of the counts is given, the original kept)."""
    return [bpe_merges(dict(counts), n) for counts, n in cases]


def _pairs(value: object, name: str, tuples: bool) -> list[tuple[str, str]]:
    value = returned(value, name)
    kinds = (tuple,) if tuples else (tuple, list)
    check(
        isinstance(value, (list, tuple))
        and all(
            isinstance(p, kinds) and len(p) == 2 and all(isinstance(s, str) for s in p)
            for p in value
        ),
        expected_got(
            f"{name} should return a list of pairs of strings.",
            "[('e', 's'), ...]",
            repr(value)[:120],
        ),
    )
    assert isinstance(value, (list, tuple))
    if any(s.endswith("</w>") or s == "</w>" for p in value for s in p):
        fail(f"{name}: {named.END_OF_WORD}")
    return [tuple(p) for p in value]  # type: ignore[misc]


def judge_bpe_visible(got: object, tuples: bool = True) -> None:
    """The worked example of the notebook."""
    counts, n = BPE_VISIBLE
    name = f"bpe_merges({counts}, {n})"
    merges = _pairs(got, name, tuples)
    for mistake, wrong in BPE_VISIBLE_MISTAKES.items():
        if merges == wrong:
            fail(f"{name}: {getattr(named, mistake)}")
    check(
        merges == BPE_VISIBLE_MERGES, expected_got(f"{name} is wrong.", BPE_VISIBLE_MERGES, merges)
    )


def judge_bpe(
    got: object, cases: list, reference: Callable, mistakes: tuple[str, ...], tuples: bool = True
) -> None:
    """Each case's merges against ``reference(counts, n)``, naming known mistakes."""
    check(isinstance(got, list) and len(got) == len(cases), "not one list of merges per case")
    assert isinstance(got, list)
    for value, (counts, n) in zip(got, cases, strict=True):
        shown = str(counts) if len(str(counts)) < 80 else f"{len(counts)} words"
        name = f"bpe_merges({shown}, {n})"
        merges = _pairs(value, name, tuples)
        expected = reference(counts, n)
        if merges == expected:
            continue
        for mistake in mistakes:
            if merges == reference(counts, n, mistake=mistake):
                fail(f"{name}: {getattr(named, mistake)}")
        if len(merges) > len(expected):
            fail(f"{name}: {len(merges)} merges; when no pair is left, stop ({len(expected)}).")
        fail(expected_got(f"{name} is wrong.", expected, merges))
