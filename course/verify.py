"""The kernel's half of the trusted verification: observe the student's code on fresh inputs.

When a notebook is graded, the notebook's own test cells run in the student's kernel, where
student code could replace anything they call. So after the last cell the grader runs one more
piece of code in the same kernel: :func:`observe`. It calls the student's functions and classes
on inputs drawn from a seed the notebook never saw (``course/<assignment>/probe.py`` says which
calls) and saves what they returned, as tensors and plain values, to a file. The grader's trusted
judge (``judge/``, a separate process where no student code runs) loads that file with
``torch.load(weights_only=True)``, draws the same inputs from the same seed, and decides every
test cell's verdict itself. A test cell that passed in the kernel but fails in the judge flags
the notebook.

Nothing here needs to be trusted: whatever the student's code does to this module, the file can
only earn a point by holding the right outputs for inputs it could not know in advance.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable

import torch

from course import contract, probing

Observation = dict[str, object]


def observe(
    assignment: str,
    seed: int,
    path: str,
    namespace: dict | None = None,
    failed: dict[str, str] | None = None,
) -> None:
    """Run ``course.<assignment>.probe`` on the kernel's namespace; save the results to ``path``.

    Every item is observed on its own: an item whose call raises is saved as
    ``{"error": message}``, and the judge fails that item only. ``namespace`` defaults to the
    notebook's (``__main__``). Items named in ``failed`` are not called: each is saved as
    ``{"error": failed[name]}``. Each item runs in the state the judge draws its cases in
    (:func:`course.probing.known_state`), whatever the notebook's cells left.

    Item by item, the log ``PATH.log`` (plain text, read by the grader) says which item starts
    (``start NAME``) and which one raised (``error NAME``) or was interrupted (``interrupted
    NAME``); it is removed once every item is observed. When an item kills the kernel (``os._exit``,
    a crash, the memory limit, a loop that ignores the interrupt), the grader reads the log, starts
    a fresh kernel and observes again with that item in ``failed``: one item that kills the kernel
    costs that item only (:class:`grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints`).
    """
    probe = importlib.import_module(f"course.{assignment}.probe")
    namespace = vars(sys.modules["__main__"]) if namespace is None else namespace
    failed = failed or {}
    results: dict[str, object] = {}
    items: dict[str, Callable[[dict, int], object]] = probe.ITEMS
    log_file = contract.log_path(path)
    with open(log_file, "w", buffering=1) as log:  # line by line: read after a crash
        for name, item in items.items():
            if name in failed:
                results[name] = contract.error_observation(failed[name])
                continue
            log.write(contract.log_line("start", name))
            log.flush()
            try:
                with probing.known_state():
                    results[name] = portable(item(namespace, seed))
            except BaseException as error:  # noqa: BLE001 - a student's error is an observation
                kind = "interrupted" if isinstance(error, KeyboardInterrupt) else "error"
                log.write(contract.log_line(kind, name))
                log.flush()
                results[name] = contract.error_observation(f"{type(error).__name__}: {error}")
        torch.save(results, path)
    os.unlink(log_file)  # observed to the end: the log is of no use


def portable(value: object) -> object:
    """``value`` as tensors, numbers, strings, lists and dicts (what weights_only loads).

    Anything else (a student's own object) becomes its type name, which never equals a tensor.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).clone().contiguous()
    if type(value) in (bool, int, float, str) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): portable(v) for k, v in value.items()}
    return f"<{type(value).__name__}>"


def student(namespace: dict, name: str) -> Callable:
    """The student's function or class ``name`` from the notebook's namespace."""
    if name not in namespace:
        raise NameError(f"{name} is not defined in the notebook")
    return namespace[name]


RUNAWAY = "{} ran past the time limit in an earlier cell: it is not called again while grading"


def stop_runaways() -> str:
    """After a cell was interrupted at its time limit: replace the notebook's function (or
    method) that was running then by one that raises at once, so that each later test that
    calls it fails in no time instead of waiting out its own limit. Returns its name ('' when
    the loop was at a cell's top level: nothing to replace)."""
    main = vars(sys.modules["__main__"])
    frames = [frame for frame, _ in traceback.walk_tb(getattr(sys, "last_traceback", None))]
    ours = [frame for frame in frames if frame.f_globals is main]
    if not ours or ours[-1].f_code.co_name == "<module>":
        return ""
    frame = ours[-1]
    name = frame.f_code.co_name
    stopped = _raises_at_once(name)
    function = main.get(name)
    if getattr(function, "__code__", None) is frame.f_code:
        main[name] = stopped
    elif "self" in frame.f_locals:
        setattr(type(frame.f_locals["self"]), name, stopped)
    else:
        return ""
    return name


def _raises_at_once(name: str) -> Callable:
    def stopped(*args: object, **kwargs: object) -> None:
        raise TimeoutError(RUNAWAY.format(name))

    return stopped
