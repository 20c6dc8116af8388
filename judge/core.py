"""Verdicts from observations: the part of the judge shared by every assignment."""

from __future__ import annotations

import importlib
import os
import stat
from collections.abc import Callable

import torch

from course import contract
from course.probing import by_cell

# Observations larger than this are refused (a submission could write a huge file).
MAX_BYTES = 256 * 2**20

Judge = Callable[[int, object], None]


class Refused(Exception):
    """The file of observations cannot be read safely."""


def load(path: str) -> dict:
    """The observations at ``path``: a regular file (no link), small, weights only."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise Refused(f"no observations ({error.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            raise Refused("the observations are not a regular file of reasonable size")
        try:
            data = torch.load(handle, weights_only=True)
        except Exception as error:  # noqa: BLE001 - any unreadable file is refused
            raise Refused(f"the observations cannot be read ({type(error).__name__})") from None
    if not isinstance(data, dict):
        raise Refused("the observations are not a dictionary")
    return data


def verdicts(assignment: str, seed: int, observations: dict) -> dict[str, str | None]:
    """One verdict per test cell: None when it passes, else the reason it fails.

    The test cells are those of the probe's table (``course.<assignment>.probe.CELLS``); each is
    judged by the function of ``judge/<assignment>.py`` that the table names."""
    return verdicts_and_mistakes(assignment, seed, observations)[0]


def verdicts_and_mistakes(
    assignment: str, seed: int, observations: dict
) -> tuple[dict[str, str | None], dict[str, dict[str, str]]]:
    """:func:`verdicts`, and for each failed cell the mistake that failed it: its stable key
    (``GradingError.mistake``, :func:`course.testcells.mistake_key`) and its whole message."""
    cells = importlib.import_module(f"course.{assignment}.probe").CELLS
    judges: dict[str, Judge] = by_cell(cells, vars(importlib.import_module(f"judge.{assignment}")))
    result: dict[str, str | None] = {}
    mistakes: dict[str, dict[str, str]] = {}
    for cell, judge in judges.items():
        result[cell], mistake = _judged(judge, seed, observations.get(cell, _MISSING))
        if mistake:
            mistakes[cell] = mistake
    return result, mistakes


def future_mask(length: int) -> torch.Tensor:
    """The reference additive causal mask (L, L): 0.0 on and below the diagonal, -inf above."""
    return torch.triu(torch.full((length, length), float("-inf")), diagonal=1)


_MISSING = contract.error_observation("not observed (the verification did not run to this item)")


def _verdict(judge: Judge, seed: int, observed: object) -> str | None:
    return _judged(judge, seed, observed)[0]


def _judged(judge: Judge, seed: int, observed: object) -> tuple[str | None, dict[str, str]]:
    """The verdict, and the mistake (key, message) when a check of the course failed."""
    if contract.is_error(observed):  # no value to judge: keyed by what was raised
        verdict = f"the code raised {observed['error']}"
        kind = str(observed["error"]).split(":", 1)[0].split("(", 1)[0].strip()[:60]
        return verdict, {"key": f"{contract.RAISED}:{kind}", "message": verdict}
    try:
        judge(seed, observed)
    except AssertionError as error:  # a check of the course: its message teaches
        key = getattr(error, "mistake", None) or contract.UNNAMED
        mistake = {"key": key, "message": str(error)[: contract.MESSAGE_CHARS]}
        return str(error).splitlines()[0][:300] or "a check failed", mistake
    except Exception as error:  # noqa: BLE001 - observations of the wrong kind or shape
        return f"{type(error).__name__}: {str(error)[:200]}", {
            "key": contract.BROKEN,
            "message": "",
        }
    return None, {}
