"""Every random case of the trusted judge has one right answer, over many seeds.

The judge draws each hidden case from the submission's secret seed (``course/ASSIGNMENT/probe.py``
calls the student's code on it, ``judge/ASSIGNMENT.py`` decides). A case that more than one
correct implementation answers differently (a tie for the most frequent place, two equally good
merges...) makes a correct student lose a point by chance: that is a bug of the case's generator.

So, in this process (no notebook, no kernel): each correct demo style of an assignment (the
reference and every ``expect: {full_marks: true}`` student, ``alt_correct*``) runs its notebook's
cells once (:mod:`tests.direct_run`), then every item of the probe is observed on each style for
many seeds, as the kernel observes it (``course.verify.portable``). On every seed the judge must
pass the reference's observation, and every other style must give the same observation or one the
judge passes too.

An item whose observation does not change with the seed (a visible cell's fixed example) is
checked on one seed. A random item gets as many seeds as fit in :data:`SECONDS` of CPU time, at
least :data:`MIN_SEEDS` and at most :data:`MAX_SEEDS`: the cheap discrete cases, where ties hide
(places, merges, counts, accuracies), get hundreds in the fast tier; the costly tensor cases a few
(their answers are real numbers, compared up to rounding). ``COURSE_SWEEP_SECONDS=20`` sweeps
deeper (about 15 minutes on 2 cores).
"""

from __future__ import annotations

import importlib
import math
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from course import verify
from course.probing import by_cell
from grader.coordinator import demo
from tests.conftest import ASSIGNMENTS, REPO
from tests.direct_run import build_classes, like_a_kernel, run_student

SECONDS = float(os.environ.get("COURSE_SWEEP_SECONDS", "0.25"))  # CPU seconds per random item
MIN_SEEDS, MAX_SEEDS = 4, 400
JUDGED = [a for a in ASSIGNMENTS if (REPO / "judge" / f"{a}.py").is_file()]


def seeds() -> Iterator[int]:
    """Seeds as the grader draws them (1 to 2**31 - 1), the same sequence on every run."""
    draw = random.Random(20261125)
    while True:
        yield draw.randrange(1, 2**31 - 1)


def correct_styles(assignment: str) -> list[str]:
    """The reference first, then every demo student expected to get full marks."""
    described = demo.descriptions(REPO, assignment)
    others = [s for s, d in described.items() if d.get("expect", {}).get("full_marks")]
    return [demo.REFERENCE, *sorted(set(others) - {demo.REFERENCE})]


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_classes(tmp_path_factory.mktemp("sweep"), REPO, JUDGED)


def same(a: object, b: object) -> bool:
    """Whether two observations are equal (tensors and floats up to rounding)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and (
                torch.equal(a, b)
                or (a.is_floating_point() and torch.allclose(a, b, rtol=1e-4, atol=1e-6))
            )
        )
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def verdict(judge, seed: int, observed: object) -> str | None:  # noqa: ANN001 - a judge
    """The judge's verdict on one observation: None when it passes, else why not."""
    if isinstance(observed, dict) and set(observed) == {"error"}:
        return f"the code raised {observed['error']}"
    try:
        judge(seed, observed)
    except Exception as error:  # noqa: BLE001 - the checks fail with AssertionError or worse
        return f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
    return None


@pytest.mark.parametrize("assignment", JUDGED)
def test_every_random_case_has_one_right_answer(
    submitted: Path, monkeypatch: pytest.MonkeyPatch, assignment: str
) -> None:
    monkeypatch.setenv("COURSE_FAST", "1")
    styles = correct_styles(assignment)
    assert len(styles) >= 3, f"{assignment}: the reference and two other correct styles"
    spaces: dict[str, dict] = {}
    for style in styles:
        monkeypatch.chdir(submitted / style / assignment)  # a kernel's working folder
        found: list[dict] = []
        run_student(submitted, REPO, assignment, style, found)
        (spaces[style],) = found
    monkeypatch.chdir(submitted / demo.REFERENCE / assignment)
    probe = importlib.import_module(f"course.{assignment}.probe")
    items = probe.ITEMS
    judges = by_cell(probe.CELLS, vars(importlib.import_module(f"judge.{assignment}")))
    assert set(items) == set(judges), "one probe item per judged test cell"
    problems, swept = [], {}
    with like_a_kernel():
        for name, item in items.items():
            start, count, first = time.process_time(), 0, None
            for seed in seeds():
                reference = verify.portable(item(spaces[demo.REFERENCE], seed))
                count += 1
                if count == 1:
                    first = reference
                elif count == 2 and same(reference, first):
                    break  # a fixed example: the seed plays no part (checked on the first)
                wrong = verdict(judges[name], seed, reference)
                if wrong:
                    problems.append(f"{name}, seed {seed}: the reference fails: {wrong}")
                for style in styles[1:]:
                    observed = verify.portable(item(spaces[style], seed))
                    if not same(observed, reference):
                        wrong = verdict(judges[name], seed, observed)
                        if wrong:
                            problems.append(
                                f"{name}, seed {seed}: {style} answers otherwise than the "
                                f"reference and fails: {wrong}"
                            )
                spent = time.process_time() - start
                if count >= MAX_SEEDS or (count >= MIN_SEEDS and spent > SECONDS):
                    break
            swept[name] = count
    assert not problems, (
        f"{assignment}: {len(problems)} case(s) with more than one right answer, or a judge "
        f"that fails the reference (seeds per item: {swept}):\n" + "\n".join(problems[:20])
    )
