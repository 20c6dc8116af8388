"""benchmarks/test_times.py reads pytest's output into seconds per file and per process (no suite
is run here: the output is given)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "test_times.py"
spec = importlib.util.spec_from_file_location("test_times", SCRIPT)
test_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(test_times)

# pytest -n 2 -v --durations=0, cut down: two workers, a parametrized id with a space, a module
# fixture's setup on the first test of its file, a failure.
XDIST = """\
created: 2/2 workers
[gw0] [ 20%] PASSED tests/test_a.py::test_one
[gw1] [ 40%] PASSED tests/e2e/test_lab.py::test_opens
[gw0] [ 60%] PASSED tests/test_a.py::test_two[a b]
[gw1] [ 80%] FAILED tests/test_b.py::TestX::test_three
[gw0] [100%] PASSED tests/test_a.py::test_four
============================= slowest durations ==============================
30.00s setup    tests/test_a.py::test_one
12.50s call     tests/e2e/test_lab.py::test_opens
2.00s call     tests/test_a.py::test_one
1.25s call     tests/test_a.py::test_two[a b]
0.75s teardown tests/test_a.py::test_two[a b]
0.50s call     tests/test_b.py::TestX::test_three
0.00s setup    tests/test_a.py::test_four
=========== 1 failed, 4 passed, 3 deselected in 47.10s ===========
"""


# The plugin's lines: CPU seconds of each test (setup, call and teardown), in the order run.
CPU = """\
40.000 tests/test_a.py::test_one
3.500 tests/e2e/test_lab.py::test_opens
1.000 tests/test_a.py::test_two[a b]
80.250 tests/test_b.py::TestX::test_three
"""


def test_seconds_are_summed_per_test_and_per_file_costliest_first() -> None:
    parsed = test_times.parse(XDIST, CPU)
    tests = parsed["tests"]
    assert tests["tests/test_a.py::test_one"] == {
        "seconds": 32.0,
        "cpu": 40.0,
        "worker": "gw0",
        "outcome": "PASSED",
    }
    assert tests["tests/test_a.py::test_two[a b]"]["seconds"] == 2.0  # call + teardown
    assert tests["tests/test_b.py::TestX::test_three"]["outcome"] == "FAILED"
    assert parsed["counts"] == {"failed": 1, "passed": 4, "deselected": 3}
    files = test_times.by_file(tests)
    assert files == [
        {"file": "tests/test_b.py", "seconds": 0.5, "cpu": 80.2, "tests": 1},
        {"file": "tests/test_a.py", "seconds": 34.0, "cpu": 41.0, "tests": 3},
        {"file": "tests/e2e/test_lab.py", "seconds": 12.5, "cpu": 3.5, "tests": 1},
    ]
    assert test_times.by_worker(tests) == {"gw0": 34.0, "gw1": 13.0}
    assert test_times.by_worker(tests, "cpu") == {"gw0": 41.0, "gw1": 83.8}
    without_cpu = test_times.by_file(test_times.parse(XDIST)["tests"])  # the slowest first
    assert [f["file"] for f in without_cpu] == [f["file"] for f in files[1:]] + [files[0]["file"]]


def test_one_process_output_is_read_too() -> None:
    output = (
        "tests/test_a.py::test_one PASSED                    [ 50%]\n"
        "tests/test_a.py::test_two ERROR                     [100%]\n"
        "1.50s call     tests/test_a.py::test_one\n"
        "==== 1 passed, 1 error in 2.00s ====\n"
    )
    parsed = test_times.parse(output)
    assert test_times.by_worker(parsed["tests"]) == {"main": 1.5}
    assert parsed["tests"]["tests/test_a.py::test_two"]["outcome"] == "ERROR"
    assert parsed["counts"] == {"passed": 1, "error": 1}


def test_the_record_table_and_tiers_follow_the_makefile() -> None:
    makefile = (REPO / "Makefile").read_text()
    for target, mark in test_times.TIERS.values():
        block = makefile.split(f"\n{target.split()[1]}:", 1)[1].split("\n\n")[0]
        (line,) = [line for line in block.splitlines() if "-m pytest" in line]
        assert line.split(" -m ")[-1].strip('"') == mark
    parsed = test_times.parse(XDIST)
    figures = {"seconds": 47.1, "cpu_seconds": 80.0, "load": [0.1, 1.9], "exit": 1}
    record = test_times.summary("fast", figures | {"date": "07 Dec 2026 17:00 UTC"}, parsed, 2)
    assert [f["file"] for f in record["files"]] == ["tests/test_a.py", "tests/e2e/test_lab.py"]
    assert record["files_in_all"] == 3 and record["tier"] == "make test-fast"
    text = test_times.table({"fast": record})
    row = text.splitlines()[2]
    assert row.startswith(
        "| `make test-fast` | 47 s (2 min 00 s) | 1 min 20 s | 0.1-1.9 | 4 (1 failed) |"
    )
    assert "test_a 0 s, test_lab 0 s" in row and row.endswith("| 2026-12-07 |")
    assert text.splitlines()[-1] == "make test-fast: not recorded."
    printed = test_times.printed(record, 2)
    assert "gw0 34 s, gw1 13 s" in printed and "the 2 costliest of 3 files" in printed


def test_the_docs_hold_the_markers_once() -> None:
    speed = (REPO / "docs" / "speed.md").read_text()
    assert speed.count(test_times.BEGIN) == 1 and speed.count(test_times.END) == 1
    with pytest.raises(SystemExit, match="markers"):
        test_times.rewritten("no markers", "table")
    new = test_times.rewritten(f"a\n{test_times.BEGIN}\nold\n{test_times.END}\nb", "new")
    assert new == f"a\n{test_times.BEGIN}\nnew\n{test_times.END}\nb"
