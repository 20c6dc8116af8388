"""Seconds per submission when autograding the demo class: sequential vs parallel, or the
cost of the sandbox.

    python benchmarks/autograde_speed.py [--assignment a_masks] [--jobs 2]
    python benchmarks/autograde_speed.py --sandbox-cost [--assignment a_masks] [--jobs 2]

Grades the demo class of one assignment in a scratch copy of the course twice and prints the
wall-clock seconds per submission: once with ``--jobs 1`` and once with ``--jobs N``; or, with
``--sandbox-cost``, both with ``--jobs N``, once in the sandbox (bubblewrap)
and once with ``--unsafe-no-sandbox``, alternating the order over ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from grader.coordinator import demo, pipeline
from grader.shared.paths import use_this_python

REPO = Path(__file__).resolve().parents[1]


def scratch_course(folder: Path) -> Path:
    """A copy of the course's config, source/ and demo/ in ``folder``."""
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copy(REPO / "reference_runs.json", folder)
    for name in ("source", "demo"):
        shutil.copytree(REPO / name, folder / name)
    return folder


def timed_grading(root: Path, assignment: str, students: list[str], **how: object) -> float:
    """Wall-clock seconds to autograde ``students`` (``how``: pipeline.autograde's options)."""
    start = time.perf_counter()
    results = pipeline.autograde(root, assignment, students=students, **how)
    seconds = time.perf_counter() - start
    failed = [g.student for g in results if not g.ok]
    if failed:
        raise SystemExit(f"not graded: {failed[:5]} ({len(failed)} in all)")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a_masks")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--sandbox-cost", action="store_true", help="sandbox vs no sandbox")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --sandbox-cost")
    args = parser.parse_args()
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="course-bench-") as tmp:
        root = scratch_course(Path(tmp))
        pipeline.release(root, args.assignment)
        students = demo.build_class(root, args.assignment)
        n = len(students)
        print(f"{args.assignment}: {n} submissions, {os.cpu_count()} CPU cores")
        if args.sandbox_cost:
            sandbox_cost(root, args.assignment, students, args.jobs, args.rounds)
            return
        sequential = timed_grading(root, args.assignment, students, jobs=1)
        parallel = timed_grading(root, args.assignment, students, jobs=args.jobs)
    print(f"sequential (--jobs 1): {sequential:6.1f} s, {sequential / n:5.2f} s per submission")
    print(
        f"parallel (--jobs {args.jobs}):   {parallel:6.1f} s, {parallel / n:5.2f} s per submission"
        f" (x{sequential / parallel:.2f})"
    )


def sandbox_cost(root: Path, assignment: str, students: list[str], jobs: int, rounds: int) -> None:
    """Grade the same class in and out of the sandbox, alternating; print each run and means."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(rounds):
        for unsafe in (False, True) if round_ % 2 == 0 else (True, False):
            seconds = timed_grading(root, assignment, students, jobs=jobs, unsafe_no_sandbox=unsafe)
            times[unsafe].append(seconds)
            label = "no sandbox" if unsafe else "sandbox   "
            print(
                f"round {round_ + 1}, {label}: {seconds:6.1f} s, {seconds / len(students):5.2f} s"
            )
    n = len(students)
    safe, unsafe = (sum(times[k]) / len(times[k]) / n for k in (False, True))
    print(f"sandbox (bubblewrap):         {safe:5.2f} s per submission (--jobs {jobs})")
    print(f"--unsafe-no-sandbox:          {unsafe:5.2f} s per submission")
    print(f"cost of the sandbox:          {safe - unsafe:+5.2f} s per submission")


if __name__ == "__main__":
    main()
