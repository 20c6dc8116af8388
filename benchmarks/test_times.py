"""A tier of the test suite run as the Makefile runs it, timed file by file; writes docs/speed.md's
table of the tiers.

    python benchmarks/test_times.py fast            # make test-fast's selection
    python benchmarks/test_times.py test --top 20   # make test's
    python benchmarks/test_times.py deep --floor    # make test-deep's, with the floor's limits
    python benchmarks/test_times.py test --table-only   # the table again from what was recorded

The tier runs in ``--jobs`` processes (pytest-xdist, the conftest's grouping), with pytest's
``--durations=0`` and ``-v``: each test's setup, call and teardown seconds, summed per file (a
module- or session-scoped fixture counts where the first test that asks for it sits), and each
test's process (``gw0``, ``gw1``), summed per process, to see the two processes balanced. Printed:
the wall-clock and CPU seconds (pytest and all it started), the load average before and after,
the ``--top`` slowest files, and the machine (``full_modes.machine()``: processor, cores,
GFLOP/s). The latest run of each tier is kept in ``tools/stages/test_times.json``; docs/speed.md's
table (between its two markers) is written from that file. The lint and the system packages that
``make`` runs before pytest are not timed here.

``--floor`` runs the tier's processes under ``full_modes.FLOOR_LIMITS`` (float32 only, AVX2
kernels), as ``benchmarks/full_modes.py --floor`` does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import full_modes  # noqa: E402 - benchmarks/ is not a package

REPO = full_modes.REPO
RESULTS = REPO / "tools" / "stages" / "test_times.json"
SPEED = full_modes.SPEED
BEGIN = "<!-- test_times: begin (written by benchmarks/test_times.py) -->"
END = "<!-- test_times: end -->"
# The Makefile's selections (its test-fast, test and test-deep targets).
TIERS = {
    "fast": ("make test-fast", "not slow and not deep"),
    "test": ("make test", "not deep"),
    "deep": ("make test-deep", "deep"),
}
GOALS = {"fast": 120, "test": 900, "deep": 600}  # issue 79, on the floor machine
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")
# `-v` under pytest-xdist: "[gw1] [ 45%] PASSED tests/test_x.py::test_y"
ON_WORKER = re.compile(r"^\[(gw\d+)\] \[\s*\d+%\] ([A-Z]+) (\S.*?)\s*$")
# `-v` in one process: "tests/test_x.py::test_y PASSED  [ 45%]"
IN_ONE = re.compile(r"^(tests/\S.*?) ([A-Z]+)\s+\[\s*\d+%\]\s*$")
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed)")


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


CPU_FILE = "TEST_TIMES_CPU"  # where the plugin below writes each test's CPU seconds


def cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """As a plugin of the tier's processes (``-p test_times``): each test's CPU seconds, its
    setup, call and teardown, with the processes they started and ended (a server that outlives
    the test counts where it ends), one line each into the file named by ``TEST_TIMES_CPU``."""
    start = cpu_seconds()
    yield
    if os.environ.get(CPU_FILE):
        with open(os.environ[CPU_FILE], "a") as out:
            out.write(f"{cpu_seconds() - start:.3f} {item.nodeid}\n")


def parse(output: str, cpu: str = "") -> dict:
    """From pytest's ``-v --durations=0`` output: each test's seconds (setup, call and teardown
    summed), its process and outcome, and the summary line's counts; from the plugin's lines
    ``cpu``, each test's CPU seconds."""
    used: dict[str, float] = defaultdict(float)
    for line in cpu.splitlines():
        seconds_text, nodeid = line.split(" ", 1)
        used[nodeid] += float(seconds_text)
    seconds: dict[str, float] = defaultdict(float)
    worker: dict[str, str] = {}
    outcome: dict[str, str] = {}
    counts: dict[str, int] = {}
    for line in output.splitlines():
        if found := DURATION.match(line):
            seconds[found[3]] += float(found[1])
        elif found := ON_WORKER.match(line):
            worker[found[3]], outcome[found[3]] = found[1], found[2]
        elif found := IN_ONE.match(line):
            worker[found[1]], outcome[found[1]] = "main", found[2]
        if line.startswith("=") and " in " in line and SUMMARY.search(line):
            counts = {
                kind.rstrip("s") if kind != "passed" else kind: int(n)
                for n, kind in SUMMARY.findall(line)
            }
    tests = set(seconds) | set(worker) | set(used)
    return {
        "tests": {
            t: {
                "seconds": round(seconds.get(t, 0.0), 2),
                "cpu": round(used.get(t, 0.0), 2),
                "worker": worker.get(t, "?"),
                "outcome": outcome.get(t, "?"),
            }
            for t in sorted(tests)
        },
        "counts": counts,
    }


def by_file(tests: dict[str, dict]) -> list[dict]:
    """Seconds, CPU seconds and tests per file, the slowest first."""
    files: dict[str, dict] = defaultdict(lambda: {"seconds": 0.0, "cpu": 0.0, "tests": 0})
    for nodeid, test in tests.items():
        entry = files[file_of(nodeid)]
        entry["seconds"] += test["seconds"]
        entry["cpu"] += test.get("cpu", 0.0)
        entry["tests"] += 1
    rows = [
        {
            "file": f,
            "seconds": round(e["seconds"], 1),
            "cpu": round(e["cpu"], 1),
            "tests": e["tests"],
        }
        for f, e in files.items()
    ]
    return sorted(rows, key=lambda r: (-r["cpu"], -r["seconds"], r["file"]))


def by_worker(tests: dict[str, dict], figure: str = "seconds") -> dict[str, float]:
    """Seconds (``figure="cpu"``: CPU seconds) of tests per process (``gw0``, ``gw1``; ``main``
    without pytest-xdist)."""
    workers: dict[str, float] = defaultdict(float)
    for test in tests.values():
        workers[test["worker"]] += test.get(figure, 0.0)
    return {w: round(s, 1) for w, s in sorted(workers.items())}


def run(tier: str, jobs: int, log: Path) -> tuple[str, str, dict]:
    """Run ``tier`` as the Makefile does; its output (also written to ``log``), the CPU seconds of
    each test and the figures."""
    cpu_log = log.with_suffix(".cpu")
    cpu_log.write_text("")
    env = os.environ | {
        CPU_FILE: str(cpu_log),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        str(jobs),
        "-m",
        TIERS[tier][1],
        "-v",
        "--durations=0",
        "--durations-min=0",
        "-p",
        "no:cacheprovider",
        "-p",
        "test_times",
    ]
    before, used = os.getloadavg()[0], resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    return (
        log.read_text(),
        cpu_log.read_text(),
        {
            "command": " ".join(["python", *command[1:]]),
            "exit": done.returncode,
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "load": [round(before, 2), round(os.getloadavg()[0], 2)],
            "date": dt.datetime.now(dt.UTC).strftime("%d %b %Y %H:%M UTC"),
        },
    )


def summary(tier: str, figures: dict, parsed: dict, top: int) -> dict:
    """The record kept of one run of ``tier``."""
    files = by_file(parsed["tests"])
    return figures | {
        "tier": TIERS[tier][0],
        "counts": parsed["counts"],
        "workers": by_worker(parsed["tests"]),
        "workers_cpu": by_worker(parsed["tests"], "cpu"),
        "files": files[:top],
        "files_in_all": len(files),
    }


def printed(record: dict, top: int) -> str:
    m = full_modes.minutes
    lines = [
        f"{record['tier']}: {m(record['seconds'])} wall, {m(record['cpu_seconds'])} CPU, "
        f"load {record['load'][0]} -> {record['load'][1]}, {record['counts']}",
        f"  on {full_modes.described(record.get('machine'))}",
        "  per process, seconds of tests: "
        + ", ".join(f"{w} {m(s)}" for w, s in record["workers"].items())
        + "; CPU: "
        + ", ".join(f"{w} {m(s)}" for w, s in record.get("workers_cpu", {}).items()),
        f"  the {min(top, len(record['files']))} costliest of {record['files_in_all']} files "
        "(CPU of setup + call + teardown, with the processes they waited for; then wall clock):",
    ]
    lines += [
        f"  {r.get('cpu', 0):8.1f} s CPU {r['seconds']:8.1f} s {r['tests']:4d} tests  {r['file']}"
        for r in record["files"][:top]
    ]
    return "\n".join(lines)


def passed_and_failed(counts: dict[str, int]) -> str:
    """The tests passed, and those that failed or errored if any ("1365 (4 failed)")."""
    failed = counts.get("failed", 0) + counts.get("error", 0)
    return f"{counts.get('passed', 0)}" + (f" ({failed} failed)" if failed else "")


def table(results: dict[str, dict]) -> str:
    """docs/speed.md's table: each tier's latest run and its two costliest files (CPU
    seconds); then the machines the runs were on."""
    m = full_modes.minutes
    rows = [
        "| tier | wall (floor's goal) | CPU | load | tests | costliest files (CPU) | day |",
        "|---|---|---|---|---|---|---|",
    ]
    machines: dict[str, list[str]] = {}
    for name in sorted(results, key=lambda k: (list(TIERS).index(k.split("-")[0]), k)):
        r = results[name]
        tier = name.split("-")[0]
        slowest = ", ".join(f"{Path(f['file']).stem} {m(f.get('cpu', 0))}" for f in r["files"][:2])
        rows.append(
            f"| `{r['tier']}`{' (--floor)' if name.endswith('-floor') else ''} | "
            f"{m(r['seconds'])} ({m(GOALS[tier])}) | {m(r['cpu_seconds'])} "
            f"| {r['load'][0]}-{r['load'][1]} | {passed_and_failed(r['counts'])} | {slowest} "
            f"| {full_modes.day(r['date'])} |"
        )
        box = r.get("machine")
        said = full_modes.described(box) + (" GFLOP/s float32 / bfloat16" if box else "")
        machines.setdefault(said, []).append(r["tier"])
    rows.append("")
    rows += [f"{', '.join(tiers)}: {box}." for box, tiers in machines.items()]
    return "\n".join(rows)


def rewritten(text: str, block: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"docs/speed.md has no markers {BEGIN!r} ... {END!r}: put them back")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tier", choices=list(TIERS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="as make's JOBS")
    parser.add_argument("--top", type=int, default=15, help="how many files to print")
    parser.add_argument("--table-only", action="store_true", help="rewrite the table, run none")
    parser.add_argument("--floor", action="store_true", help="float32 only and AVX2 kernels")
    args = parser.parse_args(argv)
    if args.floor and not full_modes.floor_limits_set():
        env = os.environ | full_modes.FLOOR_LIMITS
        arguments = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *arguments], env)
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    code = 0
    if not args.table_only:
        log = Path(tempfile.gettempdir()) / f"test_times_{args.tier}.log"
        box = full_modes.machine()  # before the run: its GFLOP/s beside the load before
        output, cpu, figures = run(args.tier, args.jobs, log)
        record = summary(args.tier, figures, parse(output, cpu), args.top) | {"machine": box}
        print(printed(record, args.top))
        print(f"  pytest's output: {log}")
        results[args.tier + ("-floor" if args.floor else "")] = record
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        code = record["exit"]
    SPEED.write_text(rewritten(SPEED.read_text(), table(results)))
    print(f"wrote the table of {len(results)} runs into {SPEED.relative_to(REPO)}")
    return code


if __name__ == "__main__":
    sys.exit(main())
