"""Seconds per submission when autograding the demo class: sequential vs parallel.

    python benchmarks/autograde_speed.py [--assignment a_masks] [--jobs 2]

Grades the demo class of one assignment in a scratch copy of the course twice, once with
``--jobs 1`` and once with ``--jobs N``, and prints the wall-clock seconds per submission.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from grader import demo, pipeline
from grader.paths import use_this_python

REPO = Path(__file__).resolve().parents[1]


def scratch_course(folder: Path) -> Path:
    """A copy of the course's config, source/ and demo/ in ``folder``."""
    shutil.copy(REPO / "nbgrader_config.py", folder)
    for name in ("source", "demo"):
        shutil.copytree(REPO / name, folder / name)
    return folder


def timed_grading(root: Path, assignment: str, students: list[str], jobs: int) -> float:
    """Wall-clock seconds to autograde ``students`` with ``jobs`` processes."""
    start = time.perf_counter()
    results = pipeline.autograde(root, assignment, jobs=jobs, students=students)
    seconds = time.perf_counter() - start
    failed = [g.student for g in results if not g.ok]
    if failed:
        raise SystemExit(f"grading failed for {failed}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a_masks")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="course-bench-") as tmp:
        root = scratch_course(Path(tmp))
        pipeline.release(root, args.assignment)
        students = demo.build_class(root, args.assignment)
        n = len(students)
        print(f"{args.assignment}: {n} submissions, {os.cpu_count()} CPU cores")
        sequential = timed_grading(root, args.assignment, students, jobs=1)
        parallel = timed_grading(root, args.assignment, students, jobs=args.jobs)
    print(f"sequential (--jobs 1): {sequential:6.1f} s, {sequential / n:5.2f} s per submission")
    print(
        f"parallel (--jobs {args.jobs}):   {parallel:6.1f} s, {parallel / n:5.2f} s per submission"
        f" (x{sequential / parallel:.2f})"
    )


if __name__ == "__main__":
    main()
