"""A failed check shows its message first: what a notebook prints for a :class:`GradingError`.

IPython formats an error as its traceback, and the message comes last: a failed check would show
some 35 lines through ``course/<assignment>/checks.py`` and ``course/testcells.py`` before the
message that names the mistake, and on screen a student would see only the traceback. IPython
first asks the exception for its own lines (its ``_render_traceback_``, IPython 7.34, Colab's, to
9 alike): ``GradingError`` answers with :func:`render`, which gives the message, then one line
that says how to see the traceback (:data:`HIDDEN`). With ``COURSE_TRACEBACK=1`` in the kernel's
environment (in a notebook: ``%env COURSE_TRACEBACK=1``), the message comes first, then IPython's
whole traceback.

Only what is shown changes: the error output keeps its name and message (``ename``
``GradingError``, ``evalue`` the message), which nbgrader, ``course check`` and the feedback read.
Any other exception (a bug in the student's code, ``NotImplementedError``) keeps IPython's
traceback. Nothing is registered: the method is the class's, so a kernel forked from the warm
grader's zygote (which imported the course before any kernel existed) shows the same, and plain
Python or pytest never calls it.

Why not ``InteractiveShell.set_custom_exc``: IPython drops what its handler returns, so the handler
would have to send the error output itself (a private method of the shell); the shell holds one
handler, and Colab's own (for ImportError) would be replaced; and a kernel forked from the zygote
would miss the registration made when the course was imported.
"""

from __future__ import annotations

import os
import sys
import traceback

VARIABLE = "COURSE_TRACEBACK"  # set (not "0" or empty): the whole traceback after the message
HIDDEN = (
    "(The traceback through the course's checks is hidden: run %env COURSE_TRACEBACK=1 and this "
    "cell again to see it.)"
)
RED, RESET = "\x1b[0;31m", "\x1b[0m"  # the error's name, as IPython colours it


def render(error: BaseException) -> list[str]:
    """The lines IPython shows for ``error`` (its structured traceback): the message first.

    Never raises: IPython 9 shows no error output at all for an exception whose
    ``_render_traceback_`` raises, and a test cell without one would earn its points.
    """
    try:
        lines = message_lines(error)
    except Exception:  # noqa: BLE001 - see the docstring: IPython must get lines
        return [type(error).__name__]
    if os.environ.get(VARIABLE, "").strip() in ("", "0"):
        return [*lines, HIDDEN]
    try:
        return [*lines, "", *full_traceback(error)]
    except Exception:  # noqa: BLE001 - the message at least
        return [*lines, "(The traceback could not be formatted.)"]


def message_lines(error: BaseException) -> list[str]:
    """``Name: first line of the message``, then the message's other lines."""
    first, *rest = str(error).splitlines() or [""]
    return [f"{RED}{type(error).__name__}{RESET}: {first}", *rest]


def full_traceback(error: BaseException) -> list[str]:
    """IPython's own traceback of ``error``, as it would have shown it (plain Python's outside
    IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        return shell.InteractiveTB.structured_traceback(type(error), error, error.__traceback__)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return text.rstrip("\n").splitlines()
