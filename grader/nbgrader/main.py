"""``python -m grader.nbgrader.main ARGS``: nbgrader's command line (``python -m nbgrader ARGS``),
started and ended faster; the grader runs one per submission
(:mod:`grader.coordinator.nbgrader_run`).

- Importing nbgrader imports ``jsonschema``, whose optional IRI format checker, when the package
  ``rfc3987_syntax`` is installed (``jupyter-events`` pulls it in), builds a Lark grammar at import
  time: more than a second of CPU per process, for a format that no notebook schema uses. Here that
  import fails, as if the package were absent, so ``jsonschema`` leaves that one format out.
- nbgrader opens the gradebook (``nbgrader.api.Gradebook``) several times per submission, each
  time with a new SQLAlchemy engine, which compiles every query again: here each gradebook's URL
  keeps one engine for the process (:func:`share_gradebook_engines`; nbgrader's ``close`` still
  disposes of its connections each time).
- When nbgrader is done, the process ends at once (``os._exit`` with nbgrader's exit code, the
  logs and output flushed): the gradebook is committed and closed and the notebooks written by then,
  and the interpreter's teardown (finalizers, zmq's context) took most of a second.

Anything but a normal exit (an exception) ends the process as Python always does.
"""

from __future__ import annotations

import logging
import os
import sys

from grader.shared.slow_imports import skip_slow_imports


def share_gradebook_engines() -> None:
    """One engine per gradebook URL and options in this process (see the module's docstring)."""
    from nbgrader import api  # after skip_slow_imports (main)

    engines: dict[tuple, object] = {}
    create = api.create_engine

    def shared(url: str, **options: object) -> object:
        key = (str(url), tuple(sorted(options.items())))
        if key not in engines:
            engines[key] = create(url, **options)
        return engines[key]

    api.create_engine = shared


def main() -> None:
    skip_slow_imports()
    from nbgrader.apps.nbgraderapp import NbGraderApp  # after skip_slow_imports, not before

    share_gradebook_engines()

    try:
        NbGraderApp.launch_instance()
        code = 0
    except SystemExit as done:
        code = done.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
