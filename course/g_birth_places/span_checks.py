"""Checks of G's ``span_corruption``: the cases drawn from a seed, the outputs collected
(:func:`observe_span_corruption`) and judged (:func:`judge_span_corruption`).

``span_corruption`` draws random numbers, and two correct implementations may draw them in
different orders or ways, so its checks never compare with a reference output. They check
properties that every correct implementation has (the layout of the string, the pieces that
rebuild the start of the document, the ranges of the lengths, their averages over many draws,
the use of the generator) on what the function returned. Collecting the outputs and judging them
are separate, so that the trusted judge can judge outputs recorded in a student's kernel.

Edge cases, as the notebook states them: ``block_size >= 16`` (so that the longest kept text,
three MASKs and no padding fit in ``block_size + 1`` characters); every document has at least 4
characters and holds no MASK or PAD; a document shorter than the drawn length is kept whole
(kept length in [4, min(len(document), int(block_size * 7 / 8))]); the span holds at least one
character; the prefix and the suffix may be empty.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import torch

from course.data import load_wiki_lines
from course.probing import integer, returned
from course.testcells import check, expected_got, fail

MASK = "\u2047"  # the double question mark that marks where the span was, and its end
PAD = "\u25a1"  # the white square that fills the string up to block_size + 1 characters

SPAN_NAME = "span_corruption"


# ---------------------------------------------------------------- inputs drawn from a seed


def _long_lines(minimum: int) -> list[str]:
    return [line for line in load_wiki_lines() if len(line) >= minimum]


def span_case(seed: int, hidden: bool) -> dict:
    """The inputs of one check of ``span_corruption``, drawn from ``seed``.

    "single": (document, block_size, generator seed) calls of every kind (long, short, exactly 4
    characters, exactly int(block_size * 7 / 8)); "small" and "large": many calls with one
    generator on long documents (a small block size, to see every kept length, and a large one,
    to measure the span's mean length); "seeds": generator seeds for the reproducibility checks.
    """
    gen = torch.Generator().manual_seed(seed)
    small_block = integer(gen, 16, 25) if hidden else 16
    large_block = integer(gen, 96, 201) if hidden else 128
    long_lines = _long_lines(int(large_block * 7 / 8))
    pick = torch.randperm(len(long_lines), generator=gen)[:40].tolist()
    documents = [long_lines[i] for i in pick]
    single = []
    for block in [16, 128, integer(gen, 16, 65), integer(gen, 64, 257)]:
        cap = int(block * 7 / 8)
        line = _long_lines(cap)[integer(gen, 0, 51)]
        single.append((line, block))
        single.append((line[:4], block))  # the shortest document
        single.append((line[:cap], block))  # exactly the longest kept length
        single.append((line[: integer(gen, 5, cap)], block))  # shorter than the longest
    return {
        "single": [(doc, block, integer(gen, 0, 2**31)) for doc, block in single],
        "small": {"document": documents[0], "block_size": small_block, "draws": 1500},
        "large": {"documents": documents, "block_size": large_block, "draws": 1500},
        "seeds": [integer(gen, 0, 2**31) for _ in range(4)],
        "repeats": 40,
    }


# ---------------------------------------------------------------- what the function returns
def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _seed_everything(seed: int) -> None:
    """Seed the global generators of torch, Python and NumPy."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def observe_span_corruption(
    span_corruption: Callable[..., object], case: dict, catch: bool = False
) -> dict:
    """Call ``span_corruption`` as :func:`judge_span_corruption` needs; return what it gave.

    With ``catch``, a part whose call raises is kept as ``{"error": message}`` (the trusted
    judge then fails it); without, the error goes to the caller (a notebook's test cell).
    """

    def run(part: Callable[[], object]) -> object:
        if not catch:
            return part()
        try:
            return part()
        except Exception as error:  # noqa: BLE001 - a student's error is an observation
            return {"error": f"{type(error).__name__}: {error}"[:500]}

    small, large, seeds = case["small"], case["large"], case["seeds"]
    n = case["repeats"]

    def series(seed: int, draws: int) -> list:
        gen = _generator(seed)
        doc, block = small["document"], small["block_size"]
        return [span_corruption(doc, block, gen) for _ in range(draws)]

    def large_series() -> list:
        gen, docs = _generator(seeds[1]), large["documents"]
        block = large["block_size"]
        return [span_corruption(docs[i % len(docs)], block, gen) for i in range(large["draws"])]

    def global_runs() -> dict:
        runs, states = [], []
        for global_seed in (0, 1):
            _seed_everything(global_seed)
            before = torch.get_rng_state()
            runs.append(series(seeds[2], n))
            states.append(bool(torch.equal(before, torch.get_rng_state())))
        return {"runs": runs, "untouched": states}

    def without_generator() -> list:
        doc, block = small["document"], small["block_size"]
        return [span_corruption(doc, block) for _ in range(5)]

    return {
        "single": run(lambda: [span_corruption(d, b, _generator(s)) for d, b, s in case["single"]]),
        "small": run(lambda: series(seeds[0], small["draws"])),
        "again": run(lambda: series(seeds[0], n)),
        "other": run(lambda: series(seeds[3], n)),
        "large": run(large_series),
        "global": run(global_runs),
        "none": run(without_generator),
    }


# ---------------------------------------------------------------- one output
def _name(document: str, block_size: int) -> str:
    return f"{SPAN_NAME}(document of {len(document)} characters, block_size={block_size})"


def _shown(text: str, limit: int = 70) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _pieces(output: object, document: str, block_size: int) -> tuple[str, str, str]:
    """Check one output; return its (prefix, span, suffix).

    The output must read ``prefix MASK suffix MASK span MASK`` then PADs, ``block_size + 1``
    characters in all, where prefix + span + suffix is the start of ``document``, between 4 and
    int(block_size * 7 / 8) characters long, and the span is not empty.
    """
    name = _name(document, block_size)
    first, second, third, after = _body(output, name).split(MASK)
    check(
        not after,
        f"{name}: {_shown(after)} comes after the third MASK. The span must come last, closed "
        "by the third MASK, then only PAD characters.",
    )
    _check_order(name, document, first, second, third)
    prefix, suffix, span = first, second, third
    _check_kept(name, prefix, span, suffix, block_size)
    assert isinstance(output, str)
    _check_length(name, output, block_size)
    return prefix, span, suffix


def _body(output: object, name: str) -> str:
    """The text of ``output`` before its padding, holding three MASK characters."""
    check(
        isinstance(output, str),
        expected_got(f"{name} should return a string.", "str", type(output).__name__),
    )
    assert isinstance(output, str)
    start = output.find(PAD) if PAD in output else len(output)
    body, padding = output[:start], output[start:]
    check(
        set(padding) <= {PAD},
        f"{name}: after the first PAD comes {_shown(padding)}. Padding goes at the very end, "
        "after the third MASK, and nothing follows it.",
    )
    masks = body.count(MASK)
    if masks == 2:
        fail(
            f"{name}: the text holds two MASK characters: {_shown(body)}. Three are needed: "
            "prefix MASK suffix MASK span MASK; the last MASK tells where the span ends."
        )
    check(
        masks == 3,
        expected_got(
            f"{name}: the text before the padding should hold three MASK characters "
            "(prefix MASK suffix MASK span MASK).",
            3,
            f"{masks} in {_shown(body)}",
        ),
    )
    return body


def _check_kept(name: str, prefix: str, span: str, suffix: str, block_size: int) -> None:
    """The span is not empty; the pieces hold 4 .. int(block_size * 7 / 8) characters."""
    kept = len(prefix) + len(span) + len(suffix)
    cap = int(block_size * 7 / 8)
    check(
        bool(span),
        f"{name}: the span (between the second and the third MASK) is empty. Cut out at least "
        "one character, and keep the order of the pieces: prefix MASK suffix MASK span MASK.",
    )
    if kept > cap:
        fail(
            f"{name}: truncation outside the range: the pieces hold {kept} characters of the "
            f"document, more than int(block_size * 7 / 8) = {cap}. Truncate to a length drawn "
            f"from 4 .. {cap} (both included)."
        )
    if kept < 4:
        fail(
            f"{name}: truncation outside the range: the pieces hold {kept} characters, fewer "
            "than 4."
        )


def _check_order(name: str, document: str, first: str, second: str, third: str) -> None:
    """prefix + span + suffix must be the start of the document: name the usual mistakes."""
    if document.startswith(first + third + second):
        return
    if document.startswith(first + second + third):
        fail(
            f"{name}: the pieces are in the wrong order. After the prefix and the first MASK "
            "comes the SUFFIX (what followed the span), then MASK, then the span itself: "
            "prefix MASK suffix MASK span MASK."
        )
    if third and second.startswith(third) and document.startswith(first + second):
        fail(
            f"{name}: the span was not removed from the text: the characters between the first "
            "two MASKs start with the span. Between them goes the suffix only (what followed the "
            "span), so that the model must recover the span."
        )
    fail(
        f"{name}: prefix + span + suffix is not the start of the document (prefix = "
        f"{_shown(first, 30)}, suffix = {_shown(second, 30)}, span = {_shown(third, 30)}). "
        "Truncate by keeping the FIRST characters, then cut that text into prefix, span, suffix."
    )


def _check_length(name: str, output: str, block_size: int) -> None:
    if len(output) == block_size:
        fail(
            f"{name}: wrong length: the string has block_size = {block_size} characters; it "
            f"needs block_size + 1 = {block_size + 1}, since the input is the string without "
            "its last character and the target the string without its first."
        )
    check(
        len(output) == block_size + 1,
        expected_got(
            f"{name}: wrong length (pad with PAD up to block_size + 1 characters).",
            block_size + 1,
            len(output),
        ),
    )


# ---------------------------------------------------------------- many outputs
def _outputs(value: object, count: int, what: str) -> list:
    value = returned(value, SPAN_NAME, what)
    check(
        isinstance(value, list) and len(value) == count,
        f"not one output per call of {SPAN_NAME} ({what})",
    )
    assert isinstance(value, list)
    return value


def _check_kept_lengths(kept: Sequence[int], block_size: int) -> None:
    """Every kept length from 4 to int(block_size * 7 / 8) must come up."""
    cap = int(block_size * 7 / 8)
    seen = set(kept)
    name = f"{SPAN_NAME}(long document, block_size={block_size}), {len(kept)} calls"
    if cap not in seen:
        fail(
            f"{name}: truncation outside the range: the kept text never had "
            f"int(block_size * 7 / 8) = {cap} characters (longest seen: {max(seen)}). The upper "
            "end is included (torch.randint's `high` is excluded: use cap + 1)."
        )
    if 4 not in seen:
        fail(
            f"{name}: truncation outside the range: the kept text never had 4 characters "
            f"(shortest seen: {min(seen)}). Every length from 4 to {cap} must have a chance."
        )
    missing = sorted(set(range(4, cap + 1)) - seen)
    check(
        not missing,
        f"{name}: the kept lengths {missing} never came up. Every length from 4 to {cap} must "
        "have a chance.",
    )


def _check_spans(cut: Sequence[tuple[str, str, str]], block_size: int) -> None:
    """Span lengths: a quarter of the kept text on average, random, at a random place."""
    name = f"{SPAN_NAME}(long documents, block_size={block_size}), {len(cut)} calls"
    spans = [len(span) for _, span, _ in cut]
    kept = [len(p) + len(s) + len(x) for p, s, x in cut]
    ratio = sum(spans) / sum(kept)
    check(
        0.2 <= ratio <= 0.3,
        expected_got(
            f"{name}: the span should hold a quarter of the truncated text on average.",
            "about 0.25 of the kept characters (0.2 to 0.3 accepted)",
            f"{ratio:.3f}",
            hint="a quarter of the TRUNCATED text, not of the whole document"
            if ratio > 0.3
            else "",
        ),
    )
    longer = sum(4 * s > k for s, k in zip(spans, kept, strict=True)) / len(cut)
    shorter = sum(4 * s < k for s, k in zip(spans, kept, strict=True)) / len(cut)
    check(
        longer >= 0.05 and shorter >= 0.05,
        f"{name}: the span's length is not random: it was longer than a quarter of the kept "
        f"text in {longer:.0%} of the calls and shorter in {shorter:.0%}. Draw it at random, "
        "with a mean of a quarter.",
    )
    with_prefix = sum(bool(p) for p, _, _ in cut) / len(cut)
    with_suffix = sum(bool(x) for _, _, x in cut) / len(cut)
    check(
        with_prefix >= 0.05 and with_suffix >= 0.05,
        f"{name}: the span is not cut at a random place: {with_prefix:.0%} of the calls had a "
        f"prefix and {with_suffix:.0%} a suffix. Draw where the span starts.",
    )


def judge_span_corruption(observed: object, case: dict) -> None:
    """Judge what :func:`observe_span_corruption` recorded for ``case``."""
    check(isinstance(observed, dict), f"no observation of {SPAN_NAME}")
    assert isinstance(observed, dict)
    single = _outputs(observed.get("single"), len(case["single"]), "single calls")
    for output, (document, block, _) in zip(single, case["single"], strict=True):
        _pieces(output, document, block)
    small = case["small"]
    doc, block = small["document"], small["block_size"]
    outputs = _outputs(observed.get("small"), small["draws"], "many calls")
    cut = [_pieces(out, doc, block) for out in outputs]
    check(
        len(set(outputs)) > 1,
        f"{SPAN_NAME} gave the same string in all {len(outputs)} calls with one generator: the "
        "draws must come from `generator` and advance it (do not re-seed it at each call).",
    )
    _check_kept_lengths([len(p) + len(s) + len(x) for p, s, x in cut], block)
    n = case["repeats"]
    again = _outputs(observed.get("again"), n, "the same generator seed again")
    check(
        again == outputs[:n],
        f"{SPAN_NAME}: draws ignoring the generator: a new generator with the same seed gave "
        "other strings. Draw every random number from `generator` (torch.randint(..., "
        "generator=generator)), never from the global generators of torch, random or numpy.",
    )
    other = _outputs(observed.get("other"), n, "another generator seed")
    check(
        other != outputs[:n],
        f"{SPAN_NAME} gave the same {n} strings for two generator seeds: the draws must depend "
        "on the generator.",
    )
    seen = returned(observed.get("global"), SPAN_NAME, "global seeds")
    check(isinstance(seen, dict), f"no observation of {SPAN_NAME} under global seeds")
    assert isinstance(seen, dict)
    runs = seen["runs"]
    check(
        runs[0] == runs[1] and all(seen["untouched"]),
        f"{SPAN_NAME}: draws ignoring the generator: with the same `generator`, the result "
        "changed with torch.manual_seed / random.seed / np.random.seed, or the global torch "
        "generator moved. Draw every random number from `generator`.",
    )
    large = case["large"]
    docs, block = large["documents"], large["block_size"]
    outputs = _outputs(observed.get("large"), large["draws"], "many calls, long documents")
    _check_spans([_pieces(o, docs[i % len(docs)], block) for i, o in enumerate(outputs)], block)
    nothing = _outputs(observed.get("none"), 5, "generator=None")
    for output in nothing:
        _pieces(output, small["document"], small["block_size"])


def diagnose_span_corruption(span_corruption: Callable[..., object], case: dict) -> None:
    """Call ``span_corruption`` on ``case`` (see :func:`span_case`) and judge what it gave."""
    judge_span_corruption(observe_span_corruption(span_corruption, case), case)
