"""The student part's check of a whole notebook: ``course check NOTEBOOK`` (:mod:`course.cli`).

It runs every code cell of the saved notebook in a fresh kernel, in the notebook's folder, in the
short mode of grading (``COURSE_FAST=1``), and reports each test cell: passed, or the check's
message (what was expected, what came, the mistake when it is a known one), then every written
answer still empty. Exit 0 when every visible test passes, 1 when one fails, 2 when the notebook
cannot be read. The hidden tests are not in a student's copy: they run when the work is graded,
or, in a clone of the course, with the clone's ``course check``, which runs them too.

The last cell of every notebook calls :func:`check_this_notebook`, the same check from inside the
notebook; it does nothing while grading or while a check runs the notebook.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

NOT_IMPLEMENTED = "not implemented yet: replace `raise NotImplementedError()` with your code"
CELL_TIMEOUT = 600  # seconds; the long cells are short in this mode
CHECKING = "COURSE_CHECKING"  # set in the kernel a check runs: its own check cell does nothing
EMPTY_ANSWERS = {"", "YOUR ANSWER HERE"}  # nbgrader's template of a written answer


@dataclass
class Outcome:
    """One graded cell of the notebook: a test, a test whose tests are all hidden, or a
    written answer."""

    grade_id: str
    points: float
    kind: str  # "test", "hidden" or "written"
    message: str = ""
    empty: bool = False  # a written answer still as it was handed out
    label: str = ""  # a written answer's "Question N"


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def has_code(source: str) -> bool:
    """True unless every line is blank or a comment (a test cell whose tests are all hidden)."""
    return any(line.strip() and not line.strip().startswith("#") for line in source.splitlines())


def message(outputs: list[dict]) -> str:
    """What a failed cell says, from its outputs in a notebook's form: the check's message, not
    its traceback ("" when no output tells of a failure)."""
    for out in outputs:
        if out["output_type"] == "error":
            name, value = out["ename"], out["evalue"]
            if name == "NotImplementedError":
                return NOT_IMPLEMENTED
            if name in {"GradingError", "AssertionError"} and value:
                return value
            return f"{name}: {value}" if value else name
        if out["output_type"] == "stream" and out["name"] == "stderr":
            text = "".join(out["text"]).strip().splitlines() or [""]
            return (
                "the cell wrote to stderr (a warning counts as a failure when graded): "
                + (text[0][:200])
            )
    return ""


def _output(msg: dict) -> dict | None:
    """A kernel's output message as a notebook stores it (None for one that is not an output)."""
    kind, content = msg["header"]["msg_type"], msg["content"]
    if kind == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if kind == "error":
        keys = ("ename", "evalue", "traceback")
        return {"output_type": "error", **{k: content[k] for k in keys}}
    if kind in {"execute_result", "display_data"}:
        shown = {"output_type": kind, "data": content["data"], "metadata": content["metadata"]}
        if kind == "execute_result":
            shown["execution_count"] = content["execution_count"]
        return shown
    return None


def _collect(outputs: list[dict], msg: dict) -> None:
    """Add one output message to a cell's ``outputs``, as a notebook keeps them (a stream
    continued, outputs cleared)."""
    if msg["header"]["msg_type"] == "clear_output":
        outputs.clear()
        return
    out = _output(msg)
    if out is None:
        return
    last = outputs[-1] if outputs else {}
    if out["output_type"] == "stream" and last.get("output_type") == "stream":
        if last["name"] == out["name"]:
            last["text"] += out["text"]
            return
    outputs.append(out)


def run_code(cells: list[dict], folder: Path, env: dict[str, str], timeout: int) -> list[list]:
    """The one runner of ``course check``, the student part's and a clone's: every code cell of
    ``cells`` run in order in one fresh kernel started in ``folder`` with the environment
    ``env``, errors not stopping the run and ``input()`` failing as when graded; each cell's
    outputs in a notebook's form ([] for a cell that is not code or holds only comments)."""
    from jupyter_client.manager import start_new_kernel  # ipykernel's client, loaded to run

    manager, client = start_new_kernel(cwd=str(folder), env=env)
    ran: list[list] = []
    try:
        for cell in cells:
            outputs: list[dict] = []
            ran.append(outputs)
            if cell["cell_type"] == "code" and has_code(_source(cell)):
                client.execute_interactive(
                    _source(cell),
                    timeout=timeout,
                    allow_stdin=False,  # as in grading: input() fails, never waits
                    output_hook=lambda msg, outputs=outputs: _collect(outputs, msg),
                )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return ran


_QUESTION = re.compile(r"\*\*Question (\d+)")


def label(cell: dict, previous: str) -> str:
    """How a student names a graded cell: "Question N" for a written answer (from the question
    above it, ``previous``), the function or class it defines for an exercise, else its id."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if cell.get("cell_type") == "markdown" or not meta.get("solution"):
        question = _QUESTION.search(previous)
        return f"Question {question.group(1)}" if question else meta.get("grade_id", "?")
    defined = re.search(r"^(?:def|class)\s+(\w+)", _source(cell), re.MULTILINE)
    return defined.group(1) if defined else meta.get("grade_id", "?")


def _written(meta: dict, source: str, previous: str) -> Outcome:
    empty = source.strip() in EMPTY_ANSWERS
    name = label({"cell_type": "markdown", "metadata": {"nbgrader": meta}}, previous)
    return Outcome(meta["grade_id"], meta.get("points", 0), "written", empty=empty, label=name)


def outcomes(cells: list[dict], ran: list[list[dict]]) -> list[Outcome]:
    """One :class:`Outcome` per graded cell of ``cells``, whose outputs :func:`run_code` gave."""
    found, previous = [], ""
    for cell, outputs in zip(cells, ran, strict=True):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        source = _source(cell)
        if cell["cell_type"] != "code" or not source.strip():
            if meta.get("grade") and meta.get("solution"):
                found.append(_written(meta, source, previous))
            elif cell["cell_type"] == "markdown":
                previous = source  # the text above the next answer: its question
            continue
        if meta.get("grade") and meta.get("solution"):
            found.append(_written(meta, source, previous))
        elif meta.get("grade") and not has_code(source):
            found.append(Outcome(meta["grade_id"], meta.get("points", 0), "hidden"))
        elif meta.get("grade"):
            found.append(Outcome(meta["grade_id"], meta.get("points", 0), "test", message(outputs)))
    return found


def run(path: Path) -> list[Outcome]:
    """Run the notebook at ``path`` in a fresh kernel; one :class:`Outcome` per graded cell."""
    cells = json.loads(path.read_text())["cells"]
    env = dict(os.environ, COURSE_FAST="1", **{CHECKING: "1"})
    return outcomes(cells, run_code(cells, path.parent.resolve(), env, CELL_TIMEOUT))


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
    written = [o for o in outcomes if o.kind == "written"]
    empty = [o.label or o.grade_id for o in written if o.empty]
    if written:
        lines.append(
            f"Written answers: {len(written) - len(empty)} of {len(written)} written, graded by "
            "the instructor." + (f" Still empty: {', '.join(empty)}." if empty else "")
        )
    return "\n".join(lines)


def check(path: Path) -> int:
    """Check the notebook at ``path`` and print the report; the exit code of ``course check``."""
    try:
        json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        print(f"course check: error: no readable notebook at {path}", file=sys.stderr)
        return 2
    outcomes = run(path)
    print(format_outcomes(path, outcomes))
    return 1 if any(o.kind == "test" and o.message for o in outcomes) else 0


def _this_notebook(name: str) -> Path | None:
    """The saved file of the notebook whose kernel runs this: JupyterLab's session path, VS
    Code's, Colab's notebook (fetched from the browser into a temporary folder), else ``name``
    in the current folder."""
    from IPython import get_ipython  # a kernel's question: only asked inside one

    shell = get_ipython()
    names = shell.user_ns if shell is not None else {}
    for key in ("__session__", "__vsc_ipynb_file__"):
        candidate = Path(str(names.get(key, "")))
        if candidate.suffix == ".ipynb" and candidate.is_file():
            return candidate
    if "google.colab" in sys.modules:
        from google.colab import _message  # Colab's own bridge to the browser's notebook

        notebook = _message.blocking_request("get_ipynb", timeout_sec=60)["ipynb"]
        path = Path(tempfile.mkdtemp()) / name
        path.write_text(json.dumps(notebook))
        return path
    candidate = Path(name)
    return candidate if candidate.is_file() else None


def check_this_notebook(name: str) -> None:
    """The last cell of every notebook: check the saved notebook (``name`` is its file's name as
    handed out). Does nothing while grading or inside a check's own run."""
    if os.environ.get("NBGRADER_EXECUTION") or os.environ.get(CHECKING):
        return
    path = _this_notebook(name)
    if path is None:
        print(
            f"Cannot find this notebook's file here ({name} is not in {Path.cwd()}). Save it, "
            f"then in a terminal, in its folder: course check {name}"
        )
        return
    print(f"Checking the saved file {path} (save first: Ctrl+S), as grading runs it...")
    check(path)


def main(argv: list[str] | None = None) -> int:
    """``python -m course.check NOTEBOOK`` (the same as ``course check NOTEBOOK``)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: course check NOTEBOOK.ipynb", file=sys.stderr)
        return 2
    return check(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
