"""The student part's check of a whole notebook: ``python -m course.check NOTEBOOK``.

Also installed as the command ``course-check NOTEBOOK`` by the student part
(``pip install ./student``). It runs every code cell of the saved notebook in a fresh kernel, in
the notebook's folder, in the short mode of grading (``COURSE_FAST=1``), and reports each test
cell: passed, or the check's message (what was expected, what came, the mistake when it is a
known one). Exit 0 when every visible test passes, 1 when one fails, 2 when the notebook cannot
be read. The hidden tests are not in a student's copy: they run when the work is graded, or, in a
clone of the course, with the instructor's ``course check``, which runs them too.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

NOT_IMPLEMENTED = "not implemented yet: replace `raise NotImplementedError()` with your code"
CELL_TIMEOUT = 600  # seconds; the long cells are short in this mode


@dataclass
class Outcome:
    """One graded cell of the notebook: a test, a test whose tests are all hidden, or a
    written answer."""

    grade_id: str
    points: float
    kind: str  # "test", "hidden" or "written"
    message: str = ""


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _has_code(source: str) -> bool:
    return any(line.strip() and not line.strip().startswith("#") for line in source.splitlines())


def _message(outputs: list[dict]) -> str:
    """What a failed cell says: the check's message, not its traceback."""
    for out in outputs:
        if out["msg_type"] == "error":
            name, value = out["content"]["ename"], out["content"]["evalue"]
            if name == "NotImplementedError":
                return NOT_IMPLEMENTED
            if name in {"GradingError", "AssertionError"} and value:
                return value
            return f"{name}: {value}" if value else name
        if out["msg_type"] == "stream" and out["content"]["name"] == "stderr":
            text = out["content"]["text"].strip().splitlines() or [""]
            return (
                "the cell wrote to stderr (a warning counts as a failure when graded): "
                + (text[0][:200])
            )
    return ""


def run(path: Path) -> list[Outcome]:
    """Run the notebook at ``path`` in a fresh kernel; one :class:`Outcome` per graded cell."""
    from jupyter_client.manager import start_new_kernel  # ipykernel's client, loaded to run

    cells = json.loads(path.read_text())["cells"]
    env = dict(os.environ, COURSE_FAST="1")
    manager, client = start_new_kernel(cwd=str(path.parent.resolve()), env=env)
    outcomes = []
    try:
        for cell in cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            source = _source(cell)
            if cell["cell_type"] != "code" or not source.strip():
                if meta.get("grade") and meta.get("solution"):
                    outcomes.append(Outcome(meta["grade_id"], meta.get("points", 0), "written"))
                continue
            if meta.get("grade") and not meta.get("solution") and not _has_code(source):
                outcomes.append(Outcome(meta["grade_id"], meta.get("points", 0), "hidden"))
                continue
            outputs: list[dict] = []
            client.execute_interactive(
                source,
                timeout=CELL_TIMEOUT,
                output_hook=lambda msg, outputs=outputs: outputs.append(
                    {"msg_type": msg["header"]["msg_type"], "content": msg["content"]}
                ),
            )
            if meta.get("grade") and meta.get("solution"):
                outcomes.append(Outcome(meta["grade_id"], meta.get("points", 0), "written"))
            elif meta.get("grade"):
                outcomes.append(
                    Outcome(meta["grade_id"], meta.get("points", 0), "test", _message(outputs))
                )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return outcomes


def format_outcomes(path: Path, outcomes: list[Outcome]) -> str:
    """The report ``python -m course.check`` prints."""
    lines = [f"Checked {path}"]
    for o in outcomes:
        if o.kind == "test":
            lines.append(f"  [{'FAIL' if o.message else 'PASS'}] {o.grade_id}")
            lines += ["      " + line for line in o.message.splitlines()]
    tests = [o for o in outcomes if o.kind == "test"]
    failed = sum(1 for o in tests if o.message)
    lines.append(f"Visible tests: {len(tests) - failed} of {len(tests)} passed.")
    hidden = sum(o.kind == "hidden" for o in outcomes)
    if hidden:
        lines.append(
            f"Hidden tests: {hidden} cells, run when your work is graded (in a clone of the "
            "course, `course check` runs them too)."
        )
    written = sum(o.kind == "written" for o in outcomes)
    if written:
        lines.append(f"Written answers: {written}, graded by the instructor.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m course.check NOTEBOOK`` (and ``course-check NOTEBOOK``)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m course.check NOTEBOOK.ipynb", file=sys.stderr)
        return 2
    path = Path(args[0])
    try:
        json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        print(f"course-check: error: no readable notebook at {path}", file=sys.stderr)
        return 2
    outcomes = run(path)
    print(format_outcomes(path, outcomes))
    return 1 if any(o.kind == "test" and o.message for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
