"""Helpers that the test cells of the notebooks call (they check; the grader grades).

Every failed check raises :class:`GradingError`, an ``AssertionError`` whose message teaches:
what was checked, what was expected, what came, and, when we recognise it, the name of the
mistake. ``course check`` and the feedback show that message and nothing else, and a notebook
shows it first, its traceback hidden (:mod:`course.short_traceback`).

The torch functions used to compare values are captured when this module is imported (the
first cell of every notebook imports it, before any student code runs), so a notebook that
replaces ``torch.allclose`` later does not change what these helpers compute.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

import torch

from course import guard as _guard
from course import short_traceback as _short_traceback

# References captured before student code runs (see the module docstring).
_SNAPSHOT = _guard.capture()
_allclose = torch.allclose
_isclose = torch.isclose
_is_tensor = torch.is_tensor


class GradingError(AssertionError):
    """A failed check. Its message is written for the student; ``mistake`` is the stable key of
    the check that failed (:func:`mistake_key`), which the class report counts."""

    def __init__(self, message: str = "", mistake: str | None = None) -> None:
        super().__init__(message)
        self.mistake = mistake or mistake_key()

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error: the message first, the traceback one variable
        away (:mod:`course.short_traceback`)."""
        return _short_traceback.render(self)


def mistake_key(depth: int = 1) -> str:
    """The stable key of the check raising now: where it stands in the course's code.

    ``MODULE:FUNCTION+LINE``, the line counted from the function's first line: the same check
    gives the same key for every student and input (never the formatted message, which holds
    their numbers), and an edit elsewhere in the module leaves it. The frames of this module
    (``fail``, ``check``...) are skipped, unless the check is one of its generic ones (wrong
    shape, dtype, values, number), whose key then starts with ``generic:`` and ends with
    where it was called (``@MODULE:FUNCTION+LINE``). A check with a hint names the mistake it
    suspects: its key is where it was called, as a named mistake's.
    """
    frame = sys._getframe(depth)
    while frame is not None and frame.f_code.co_name in _RAISERS and _here(frame):
        frame = frame.f_back
    if frame is None:
        return "unknown"
    if not _here(frame):
        return _site(frame)
    outer = frame.f_back  # the generic check's caller: where it was asked for
    while outer is not None and _here(outer):
        outer = outer.f_back
    return f"generic:{_site(frame)}@{_site(outer) if outer is not None else '?'}"


def _site(frame: object) -> str:
    code, module = frame.f_code, frame.f_globals.get("__name__", "?")  # type: ignore[attr-defined]
    return f"{module}:{code.co_qualname}+{frame.f_lineno - code.co_firstlineno}"  # type: ignore[attr-defined]


def _caller() -> str:
    """The key of the check being made: where the function of this module that calls this
    was called from (outside this module)."""
    frame = sys._getframe(2)
    while frame is not None and _here(frame):
        frame = frame.f_back
    return _site(frame) if frame is not None else "unknown"


def _here(frame: object) -> bool:
    return frame.f_globals.get("__name__") == __name__  # type: ignore[attr-defined]


_RAISERS = {"__init__", "mistake_key", "fail", "check", "guard"}


def fail(message: str, mistake: str | None = None) -> NoReturn:
    """Raise a :class:`GradingError` with ``message``; ``mistake`` names it (a stable key; by
    default where ``fail`` was called, :func:`mistake_key`)."""
    raise GradingError(message, mistake or mistake_key(2))


def guard() -> None:
    """Fail if a function the checks rely on was replaced since this module was imported."""
    changed = _guard.replaced(_SNAPSHOT)
    if changed:
        fail(
            f"{_guard.MARKER}: {', '.join(changed)} was replaced after the notebook started. "
            "Tests cannot be trusted, so this notebook earns no points."
        )


def check(condition: bool, message: str, mistake: str | None = None) -> None:
    """Fail with ``message`` unless ``condition`` holds (``mistake``: as :func:`fail`'s)."""
    guard()
    if not condition:
        fail(message, mistake)


def expected_got(what: str, expected: object, got: object, hint: str = "") -> str:
    """Format the standard message: what is wrong, expected value, actual value, hint."""
    lines = [what, f"  expected: {expected}", f"  got:      {got}"]
    if hint:
        lines.append(f"Hint: {hint}")
    return "\n".join(lines)


def check_tensor(
    value: object,
    name: str,
    shape: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Check that ``value`` is a tensor with the given shape and dtype; return it."""
    guard()
    check(
        _is_tensor(value),
        expected_got(f"{name} should be a torch.Tensor.", "torch.Tensor", type(value).__name__),
    )
    assert isinstance(value, torch.Tensor)
    if shape is not None:
        check(
            tuple(value.shape) == tuple(shape),
            expected_got(f"{name} has the wrong shape.", tuple(shape), tuple(value.shape)),
        )
    if dtype is not None:
        check(
            value.dtype == dtype,
            expected_got(f"{name} has the wrong dtype.", dtype, value.dtype),
        )
    return value


def same_values(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    """True when two tensors have one shape and equal values, -inf and +inf included."""
    if tuple(actual.shape) != tuple(expected.shape):
        return False
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    return bool(_allclose(a, e, atol=atol, rtol=rtol, equal_nan=False))


def first_difference(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """Describe the first index where two same-shaped tensors differ."""
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    bad = ~_isclose(a, e, atol=atol, rtol=rtol)
    index = tuple(int(i) for i in bad.nonzero()[0])
    return f"at index {index}: expected {e[index].item():.6g}, got {a[index].item():.6g}"


def check_close(
    actual: object,
    expected: torch.Tensor,
    name: str,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    hint: str = "",
) -> None:
    """Check that ``actual`` has the shape and values of ``expected`` (to the tolerances)."""
    tensor = check_tensor(actual, name, shape=tuple(expected.shape))
    if same_values(tensor, expected, atol, rtol):
        return
    fail(
        expected_got(
            f"{name} has the wrong values.",
            "the reference values",
            first_difference(tensor, expected, atol, rtol),
            hint,
        ),
        _caller() if hint else None,
    )


def name_the_mistake(
    actual: torch.Tensor,
    mistakes: Mapping[str, torch.Tensor],
    atol: float = 1e-5,
    rtol: float = 1e-5,
) -> str | None:
    """Return the message of the first known mistake whose output equals ``actual``.

    ``mistakes`` maps a message (naming the misconception) to the output that the mistaken
    implementation would give on the same input.
    """
    for message, wrong in mistakes.items():
        if same_values(actual, wrong, atol, rtol):
            return message
    return None


def entry_key(site: str, message: str) -> str:
    """The stable key of one entry of a ``mistakes`` table checked at ``site``: the site and
    the message's first words, without digits (a message may hold sizes)."""
    words = re.findall(r"[a-z]+", message.lower())[:8]
    return f"{site}#{'-'.join(words)}"


def check_against_reference(
    actual: object,
    expected: torch.Tensor,
    name: str,
    mistakes: Mapping[str, torch.Tensor] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-5,
) -> None:
    """Compare with the reference; when the values are wrong, name the mistake if we know it."""
    tensor = check_tensor(actual, name, shape=tuple(expected.shape))
    if same_values(tensor, expected, atol, rtol):
        return
    known = name_the_mistake(tensor, mistakes or {}, atol, rtol)
    if known:
        fail(f"{name}: {known}", entry_key(mistake_key(2), known))
    fail(
        expected_got(
            f"{name} has the wrong values.",
            "the reference values",
            first_difference(tensor, expected, atol, rtol),
        )
    )


def check_number(
    actual: object, expected: float, name: str, rel: float = 1e-9, hint: str = ""
) -> None:
    """Check that a Python number equals ``expected`` up to a relative tolerance."""
    check(
        isinstance(actual, (int, float)) and not isinstance(actual, bool),
        expected_got(f"{name} should be a number.", "int or float", type(actual).__name__),
    )
    assert isinstance(actual, (int, float))
    close = math.isclose(float(actual), float(expected), rel_tol=rel, abs_tol=0.0)
    check(
        close,
        expected_got(f"{name} is wrong.", expected, actual, hint),
        _caller() if hint else None,
    )


def passed(what: str) -> None:
    """Print a short confirmation after a test cell's checks all pass."""
    guard()
    print(f"OK: {what}")


def randomise_parameters(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Give every parameter of ``module`` its own random values, drawn from ``seed``; return it.

    A check that compares a module with the expected computation on its weights calls this
    first: at initialisation two LayerNorms (or two biases) hold the same values, so a module
    that uses one in place of the other would pass. Matrices get values uniform in
    ``±1/sqrt(fan-in)``, vectors (biases, LayerNorm's gains and shifts) uniform in ``±1``; a
    shared (tied) tensor is drawn once.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():  # each tensor once, tied ones included
            values = torch.rand(parameter.shape, generator=gen, dtype=torch.float64) * 2 - 1
            if parameter.dim() >= 2:
                values = values / math.sqrt(parameter.shape[-1])
            parameter.copy_(values.to(parameter.dtype))
    return module
