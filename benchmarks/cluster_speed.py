"""Throughput of grading a large class: ``--jobs N`` on this machine vs a Dask LocalCluster.

    python benchmarks/cluster_speed.py [--submissions 200] [--assignment a_masks] [--workers 2]

Builds a synthetic class of ``--submissions`` submissions of one assignment (its demo students,
repeated under new names), grades it twice in a scratch copy of the course, once with
``--jobs N`` and once on a LocalCluster of N one-thread workers, and prints the wall-clock
seconds per submission of each. It also times the coordinator's own share of the cluster run
(writing the returned notebooks, merging the scores and the report line, one submission at a
time): with W workers in all, a class of S submissions takes about
S x max(seconds per submission per worker / W, merge seconds), which it prints for N machines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from autograde_speed import scratch_course, timed_grading  # run as a script from benchmarks/

from grader.coordinator import cluster, demo, grading, pipeline
from grader.shared.paths import use_this_python


def synthetic_class(root: Path, assignment: str, size: int) -> list[str]:
    """``size`` submissions: the demo students, copied round-robin as ``NAME-K``."""
    built = demo.build_class(root, assignment)
    students = []
    for k in range(size):
        model = built[k % len(built)]
        name = f"{model}-{k // len(built)}"
        shutil.copytree(
            root / "submitted" / model / assignment, root / "submitted" / name / assignment
        )
        students.append(name)
    return students


def fresh_copy(template: Path, target: Path) -> Path:
    shutil.copytree(template, target)
    return target


class MergeClock:
    """Seconds the coordinator spends writing and merging results (patched in, then out)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self._saved = (grading.merge, cluster.write_autograded)

    def __enter__(self) -> MergeClock:
        merge, write = self._saved

        def timed_merge(*args: object, **kwargs: object) -> None:
            start = time.perf_counter()
            merge(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            self.count += 1

        def timed_write(*args: object, **kwargs: object) -> None:
            start = time.perf_counter()
            write(*args, **kwargs)
            self.seconds += time.perf_counter() - start

        grading.merge, cluster.write_autograded = timed_merge, timed_write
        return self

    def __exit__(self, *exc: object) -> None:
        grading.merge, cluster.write_autograded = self._saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a_masks")
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    use_this_python()
    n, w = args.submissions, args.workers
    with tempfile.TemporaryDirectory(prefix="course-bench-") as tmp:
        template = Path(tmp) / "template"
        template.mkdir()
        scratch_course(template)
        pipeline.release(template, args.assignment)
        students = synthetic_class(template, args.assignment, n)
        print(f"{args.assignment}: {n} submissions, {os.cpu_count()} CPU cores", flush=True)
        root = fresh_copy(template, Path(tmp) / "jobs")
        local = timed_grading(root, args.assignment, students, jobs=w)
        print(f"--jobs {w}:           {local:7.1f} s, {local / n:5.2f} s per submission")
        root = fresh_copy(template, Path(tmp) / "cluster")
        with MergeClock() as clock:
            spread = timed_grading(root, args.assignment, students, cluster=f"local:{w}")
    merge = clock.seconds / max(1, clock.count)
    print(f"--cluster local:{w}:   {spread:7.1f} s, {spread / n:5.2f} s per submission")
    print(f"coordinator's merge: {merge:5.3f} s per submission (one at a time)")
    per_worker = spread / n * w  # seconds of one worker per submission, this machine
    print(f"\nprojection, machines like this one with {w} workers each ({n} submissions):")
    for machines in (1, 2, 4, 8, 16, 32):
        each = max(per_worker / (machines * w), merge)
        print(f"  {machines:3d} machines: {each:5.2f} s per submission, {n * each / 60:6.1f} min")


if __name__ == "__main__":
    main()
