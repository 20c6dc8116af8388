"""The reference solution of one assignment graded under many names: does any verdict depend on
the grader's secret seed?

    python benchmarks/repeat_grading.py --assignment h_own_gpt --times 30 [--jobs 2]

Each name is its own student, so each grading draws its own secret seed: a judge whose verdict
on a correct answer hangs on the cases drawn, on rounding at a filter's edge or on the random
stream shows up as a notebook that lost points, was sent for review or was flagged. The class is
graded in a scratch copy of the course (its config and ``source/``, released there); every
submission is the source notebook's own answers. Prints one line a notebook that did not get
every autograded point, then the counts, and exits 1 when any did not.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from grader.coordinator import demo, pipeline, release
from grader.shared.paths import use_this_python

REPO = Path(__file__).resolve().parents[1]


def class_of_references(folder: Path, assignment: str, times: int) -> list[str]:
    """A scratch course in ``folder`` whose demo class is ``times`` copies of the reference."""
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copy(REPO / "reference_runs.json", folder)
    shutil.copytree(REPO / "source" / assignment, folder / "source" / assignment)
    (folder / "demo" / assignment).mkdir(parents=True)
    names = [f"reference_{k:03d}" for k in range(times)]
    for name in names:
        (folder / "demo" / assignment / f"{name}.yaml").write_text(
            "about: The reference solution, graded under another name.\n"
            "expect:\n  full_marks: true\n"
        )
    return names


def autograded_points(path: Path) -> float:
    """The points of a source notebook's test cells (what autograding can give)."""
    return release.notebook_points(path)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="h_own_gpt")
    parser.add_argument("--times", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="repeat-grading-") as scratch:
        root = Path(scratch)
        names = class_of_references(root, args.assignment, args.times)
        pipeline.release(root, args.assignment)
        demo.build_class(root, args.assignment)
        most = {
            path.stem: autograded_points(path)
            for path in (root / "source" / args.assignment).glob("*.ipynb")
        }
        start = time.perf_counter()
        results = pipeline.autograde(root, args.assignment, jobs=args.jobs, students=names)
        seconds = time.perf_counter() - start
    counts: Counter[str] = Counter()
    for graded in results:
        full = graded.ok and all(
            e.status == "graded" and e.points == most.get(e.notebook) for e in graded.events
        )
        counts["full" if full else "not full"] += 1
        for e in [] if full else graded.events:
            print(f"{graded.student} {e.notebook}: {e.status}, {e.points}/{most.get(e.notebook)}")
            if e.detail:
                print(f"  {e.detail}")
        if not graded.ok:
            print(f"{graded.student}: not graded ({graded.message})")
    print(
        f"{args.assignment}: the reference graded {args.times} times in {seconds:.0f} s "
        f"({args.jobs} jobs): {counts['full']} with every autograded point, "
        f"{counts['not full']} without"
    )
    return 1 if counts["not full"] else 0


if __name__ == "__main__":
    sys.exit(main())
