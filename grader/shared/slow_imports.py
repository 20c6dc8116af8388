"""A slow import left out of every process that loads nbgrader: ``jsonschema``'s optional IRI format
checker (``rfc3987_syntax``) builds a Lark grammar at import time, more than a second of CPU, for a
format no notebook schema uses (:mod:`grader.nbgrader.main` explains)."""

import sys


def skip_slow_imports() -> None:
    """Make ``import rfc3987_syntax`` fail in this process (see the module's docstring); the
    ``course`` command does it too, before it loads nbgrader."""
    sys.modules.setdefault("rfc3987_syntax", None)
