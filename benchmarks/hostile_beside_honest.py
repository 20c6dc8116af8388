"""A hostile submission of A graded beside honest ones, as a class is graded: what it gets, what
the honest ones keep, and what it cost the machine.

    python benchmarks/hostile_beside_honest.py fork_bomb [--cold] [--runs 3]
    python benchmarks/hostile_beside_honest.py flood     (3 GB printed in its solution cell)

Each run releases A in a scratch copy of the course, builds the demo class, adds the hostile student
("hostile": the reference answers, then the payload in the mask's solution cell) and an honest one
beside the reference, and grades the three at ``--jobs 2`` (warm workers unless ``--cold``). It
prints per run the wall-clock seconds, the most processes seen in one kernel's cgroup (run as root:
grader/sandbox/cgroups.py), the load average at the end, and per student the report's status,
points, seconds and the size of the graded notebook.
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import tempfile
import threading
import time
from pathlib import Path

import nbformat
from warm_speed import course_copy  # benchmarks/: this script's folder

from grader.coordinator import demo, pipeline
from grader.coordinator.submission import solution_cells
from grader.shared.paths import use_this_python

ASSIGNMENT, NOTEBOOK = "a_masks", "masks_and_positions"
MASK = "generate_square_subsequent_mask"
PAYLOADS = {
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
    "        pass",
    "flood": "for _ in range(3000):\n    print('x' * 1_000_000)",
}


class PidsPeak(threading.Thread):
    """The most processes seen in one kernel's cgroup (pids controller, cgroup v1 or v2)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.done = 0, threading.Event()

    def run(self) -> None:
        patterns = ["/sys/fs/cgroup/pids/course-kernels/kernel-*/pids.current"]
        patterns += ["/sys/fs/cgroup/course-kernels/kernel-*/pids.current"]
        while not self.done.wait(0.2):
            for path in [p for pattern in patterns for p in glob.glob(pattern)]:
                try:
                    self.peak = max(self.peak, int(Path(path).read_text()))
                except (OSError, ValueError):
                    pass


def hostile_class(root: Path, payload: str) -> list[str]:
    """A's demo class in ``root`` with "hostile" and "honest" added; the students to grade."""
    course_copy(root)
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, code in [("hostile", payload), ("honest", "honest = True")]:
        nb = nbformat.read(str(reference), as_version=4)
        cell = solution_cells(nb)[MASK]
        cell.source = f"{cell.source}\n\n{code}"
        target = root / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, str(target))
    return ["hostile", "honest", "reference"]


def one_run(payload: str, warm: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="course-hostile-") as folder:
        root = Path(folder) / "course"
        students = hostile_class(root, payload)
        peak = PidsPeak()
        peak.start()
        start = time.perf_counter()
        graded = pipeline.autograde(root, ASSIGNMENT, jobs=2, students=students, warm=warm)
        wall = time.perf_counter() - start
        peak.done.set()
        load = os.getloadavg()[0]
        print(f"{wall:.1f} s, at most {peak.peak} processes in a kernel's cgroup, load {load:.0f}")
        seconds = {g.student: g.seconds for g in graded}
        with open(root / "grading_report.csv") as report:
            for row in csv.DictReader(report):
                notebook = root / "autograded" / row["student"] / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
                size = notebook.stat().st_size / 2**20 if notebook.is_file() else 0.0
                print(
                    f"  {row['student']:<10} {row['status']:<11} {row['points'] or '-':>3} points"
                    f"  {seconds.get(row['student'], 0.0):5.1f} s  notebook {size:6.1f} MB"
                    f"  {row['detail'][:90]}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("payload", choices=sorted(PAYLOADS))
    parser.add_argument("--cold", action="store_true", help="kernels started afresh (not warm)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    use_this_python()
    print(f"{args.payload}, {'cold' if args.cold else 'warm'}, as uid {os.geteuid()}")
    for run in range(args.runs):
        print(f"run {run + 1}: ", end="", flush=True)
        one_run(PAYLOADS[args.payload], warm=not args.cold)


if __name__ == "__main__":
    main()
