"""A cell's output within its limit
(grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints.output), message by message as nbclient
hands them over, and a grading process's own output kept bounded (grader/shared/process_output.py);
the graded class's floods are in test_adversarial.py."""

from __future__ import annotations

import os
import re
import subprocess
import threading

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat import NotebookNode

from grader.nbgrader.execute_keeping_points import CUT, ExecuteKeepingPoints
from grader.shared import process_output


def client(kb: int = 1) -> ExecuteKeepingPoints:
    """A client of a one-cell notebook, as ``preprocess`` sets it up, keeping ``kb`` a cell."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("flood()")])
    executor = ExecuteKeepingPoints(cell_output_kb=kb)
    NotebookClient.__init__(executor, nb)
    executor.clear_before_next_output = False  # as nbclient sets it when the cell starts
    return executor


def message(kind: str, content: dict, parent: str = "cell-1") -> dict:
    header = {"msg_type": kind}
    return {
        "msg_type": kind,
        "header": header,
        "content": content,
        "parent_header": {"msg_id": parent},
    }


def stream(text: str) -> dict:
    return message("stream", {"name": "stdout", "text": text})


def shown(executor: ExecuteKeepingPoints, msg: dict, display_id: str | None = None) -> list:
    outs: list[NotebookNode] = executor.nb.cells[0].outputs
    executor.output(outs, msg, display_id, 0)
    return outs


def test_output_within_the_limit_is_kept_whole() -> None:
    executor = client()
    for _ in range(3):
        outs = shown(executor, stream("x" * 300))
    assert [o.text for o in outs] == ["x" * 300] * 3


def test_a_stream_past_the_limit_keeps_its_beginning_and_says_so_once() -> None:
    executor = client()
    shown(executor, stream("a" * 1000))
    shown(executor, stream("b" * 1000))
    outs = shown(executor, stream("c" * 1000))
    assert [o.text for o in outs] == ["a" * 1000, "b" * 24, CUT.format(1)]


def test_an_error_after_a_flood_is_kept_so_that_the_cell_fails() -> None:
    executor = client()
    shown(executor, stream("x" * 5000))
    error = {"ename": "AssertionError", "evalue": "y" * 5000, "traceback": ["line"] * 100}
    outs = shown(executor, message("error", error))
    assert outs[-1].output_type == "error"
    assert len(outs[-1].evalue) == 1024 and len(outs[-1].traceback) == 20


def test_a_display_past_the_limit_is_left_out_or_emptied_where_an_update_names_it() -> None:
    executor = client()
    big = {"data": {"text/html": "<b>" + "z" * 2000 + "</b>"}, "metadata": {}}
    outs = shown(executor, message("display_data", big))
    assert [o.get("text") for o in outs] == [CUT.format(1)]  # left out: only the note
    named = {**big, "transient": {"display_id": "plot"}}
    outs = shown(executor, message("display_data", named), display_id="plot")
    assert outs[-1].data == {"text/plain": ""}  # its place kept for an update of "plot"
    assert executor._display_id_map["plot"][0] == [len(outs) - 1]


def test_a_cleared_cell_starts_its_count_again() -> None:
    executor = client()
    shown(executor, stream("a" * 1000))
    outs = executor.nb.cells[0].outputs
    outs.clear()  # nbclient's clear_output
    outs = shown(executor, stream("b" * 1000))
    assert [o.text for o in outs] == ["b" * 1000]


class Widget:
    """An Output widget's stand-in, as nbclient hands it the cell's output while it is open."""

    def __init__(self) -> None:
        self.got: list[dict] = []

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> None:
        self.got.append(msg)


def test_output_to_a_widget_counts_and_is_left_out_past_the_limit() -> None:
    executor = client()
    widget = Widget()
    executor.output_hook_stack["cell-1"].append(widget)
    for _ in range(5):
        outs = shown(executor, stream("w" * 400))
    assert len(widget.got) == 2  # about 450 characters each with the message's content
    assert [o.text for o in outs] == [CUT.format(1)]


def test_what_a_grading_process_prints_is_kept_bounded() -> None:
    """A kernel can print without end to its nbgrader process's output (a subprocess, or
    ``os.write(sys.stdout.fileno(), ...)``): the grader keeps its beginning and its end."""
    read, write = os.pipe()

    def flood() -> None:
        with os.fdopen(write, "wb") as out:
            out.write(b"start\n" + b"x" * (5 * process_output.TAIL) + b"\nTraceback: the end\n")

    writer = threading.Thread(target=flood)
    writer.start()
    log = process_output.read_all(read, timeout=60)
    writer.join()
    os.close(read)
    assert log.startswith("start\n") and log.endswith("Traceback: the end\n")
    assert len(log) < process_output.HEAD + process_output.TAIL + 100
    assert re.search(r"\[\.\.\. \d+ bytes of output left out \.\.\.\]", log)


def test_reading_a_grading_process_gives_up_at_its_time_limit() -> None:
    read, write = os.pipe()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process_output.read_all(read, timeout=0.2)
    finally:
        os.close(read)
        os.close(write)
