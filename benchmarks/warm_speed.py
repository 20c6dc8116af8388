"""Bare nbgrader, ``course autograde --cold`` and ``course autograde`` (warm), side by side.

    python benchmarks/warm_speed.py [--assignment a_masks] [--jobs 1 2] [--students all]

Grades one demo class (default: the representative class of ``course demo``; ``--students
all``: every demo student) in scratch copies of the course, in one run:

- bare ``nbgrader autograde`` (one process for the class, nbgrader's own config: no sandbox, no
  limits, no judge, nbgrader's default kernel), and ``nbgrader autograde`` with the course's
  config but neither the sandbox nor the judge (one process for the class);
- ``course autograde --cold`` (kernels started afresh in bubblewrap) and ``course autograde``
  (warm, the default: kernels forked from the run's zygote, grader/warm/pool.py), at each
  ``--jobs``;
- ``course autograde`` on warm workers kept between runs (``course workers start``,
  grader/warm/service.py), twice, at each ``--jobs``, with the seconds their start took
  (``--kept-runs 0``: not measured).

Prints the wall-clock seconds per submission (and per submission and worker), the trusted
judge's share of each run, the ratio of warm at one worker to bare nbgrader, and whether the
warm runs gave exactly the scores, flags and report statuses of the cold run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbgrader.api import Gradebook

from grader.coordinator import demo, grading, pipeline
from grader.shared import report
from grader.shared.paths import release_notebooks, use_this_python
from grader.warm import service as warm_service

REPO = Path(__file__).resolve().parents[1]
PLAIN_COURSE = [
    "--Execute.kernel_manager_class=grader.nbgrader.kernels.IsolatedKernelManager",
    "--VerifyPoints.enabled=False",
]
BARE_CONFIG = """c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "transformers"
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_url = "sqlite:///{root}/gradebook.db"
c.Execute.timeout = 120
"""


def course_copy(folder: Path) -> Path:
    """A copy of the course's config, source/ and demo/ in ``folder``."""
    folder.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copy(REPO / "reference_runs.json", folder)
    for name in ("source", "demo"):
        shutil.copytree(REPO / name, folder / name)
    return folder


def bare_copy(course: Path, folder: Path, assignment: str, students: list[str]) -> Path:
    """The released course with nbgrader's own configuration only (no course step), holding
    the submissions of ``students`` only (nbgrader autograde grades every one it finds)."""
    folder.mkdir(parents=True)
    (folder / "nbgrader_config.py").write_text(BARE_CONFIG.format(root=str(folder)))
    shutil.copy(course / "gradebook.db", folder)
    for name in ("source", "release"):
        shutil.copytree(course / name / assignment, folder / name / assignment)
    for student in students:
        shutil.copytree(course / "submitted" / student, folder / "submitted" / student)
    return folder


class JudgeTimer:
    """Seconds spent in the trusted judge (grader.shared.verification.judge_notebooks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._judge = grading.verification.judge_notebooks

    def __enter__(self) -> JudgeTimer:
        def timed(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return self._judge(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        grading.verification.judge_notebooks = timed
        return self

    def __exit__(self, *exc: object) -> None:
        grading.verification.judge_notebooks = self._judge


def bare(root: Path, assignment: str, students: list[str], *flags: str) -> float:
    """Seconds of one ``nbgrader autograde`` of the class in ``root`` (with ``flags``)."""
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force", *flags]
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde"}
    command += ["--CourseDirectory.root=" + str(root)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if os.environ.get("BARE_LOG"):
        Path(os.environ["BARE_LOG"]).write_text(done.stdout + done.stderr)
    graded = [s.name for s in (root / "autograded").iterdir() if (s / assignment).is_dir()]
    if done.returncode != 0 or sorted(graded) != sorted(students):
        raise SystemExit(f"bare nbgrader failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")
    return seconds


def course(root: Path, assignment: str, students: list[str], jobs: int, warm: bool) -> tuple:
    """Seconds of ``course autograde`` of the class, the judge's seconds, and the outcome."""
    with JudgeTimer() as judge:
        start = time.perf_counter()
        results = pipeline.autograde(root, assignment, jobs=jobs, students=students, warm=warm)
        seconds = time.perf_counter() - start
    failed = [g.student for g in results if not g.ok]
    if failed:
        raise SystemExit(f"not graded ({'warm' if warm else 'cold'}): {failed}")
    return seconds, judge.seconds, outcome(root, assignment, students)


def outcome(root: Path, assignment: str, students: list[str]) -> dict:
    """Each student's notebooks: every graded cell's score, the flag, the report's status."""
    statuses = {(r["student"], r["notebook"]): r["status"] for r in report.read(root)}
    found = {}
    with Gradebook(pipeline.db_url(root)) as gb:
        for student in students:
            for name in release_notebooks(root, assignment):
                row = gb.find_submission_notebook(name, assignment, student)
                scores = {g.name: g.score for g in row.grades}
                found[student, name] = (scores, row.flagged, statuses.get((student, name)))
    return found


def kept_runs(root: Path, assignment: str, students: list[str], jobs: int, runs: int) -> list:
    """``runs`` runs of ``course autograde`` on kept workers (started first, stopped after)."""
    if runs <= 0:
        return []
    start = time.perf_counter()
    warm_service.start(root, jobs, idle_minutes=10)
    print(f"course workers start --jobs {jobs}: {time.perf_counter() - start:.1f} s")
    try:
        return [course(root, assignment, students, jobs, True) for _ in range(runs)]
    finally:
        warm_service.stop(root)


def differences(found: dict, cold: dict) -> list:
    return [key for key in found if found[key] != cold.get(key)]


def line(label: str, seconds: float, n: int, jobs: int, judge: float | None = None) -> str:
    text = f"{label:<34} {seconds:7.1f} s  {seconds / n:6.2f} s/submission"
    text += f"  {seconds * jobs / n:6.2f} s/submission/worker"
    if judge is not None:
        text += f"  judge {judge / n:5.2f} s/submission ({judge / (seconds * jobs):4.1%})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a_masks")
    parser.add_argument("--jobs", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--students", default="representative", help="representative or all")
    parser.add_argument("--kept-runs", type=int, default=2, help="runs on kept workers per --jobs")
    args = parser.parse_args()
    use_this_python()
    a = args.assignment
    with tempfile.TemporaryDirectory(prefix="course-warm-bench-") as tmp:
        root = course_copy(Path(tmp) / "course")
        pipeline.release(root, a)
        students = demo.build_class(root, a)
        if args.students != "all":
            students = demo.representative(root, a, students)
        for other in (root / "submitted").iterdir():  # the nbgrader runs grade all they find
            if other.name not in students:
                shutil.rmtree(other)
        n = len(students)
        plain = bare_copy(root, Path(tmp) / "bare", a, students)
        print(f"{a}: {n} submissions, {os.cpu_count()} CPU cores, load {os.getloadavg()[0]:.2f}")
        bare_seconds = bare(plain, a, students)
        print(line("bare nbgrader autograde", bare_seconds, n, 1))
        # The course's nbgrader_config.py without the sandbox and the judge (the course's
        # preprocessors and time limits kept): one nbgrader process for the class.
        plain_course = bare(root, a, students, *PLAIN_COURSE)
        print(line("nbgrader autograde, course config*", plain_course, n, 1))
        cold_outcome, warm_one = None, None
        for jobs in args.jobs:
            for warm in (False, True):
                seconds, judge, found = course(root, a, students, jobs, warm)
                label = f"course autograde{'' if warm else ' --cold'} --jobs {jobs}"
                print(line(label, seconds, n, jobs, judge))
                cold_outcome = cold_outcome or (None if warm else found)
                if warm and found != cold_outcome:
                    print(f"  DIFFERENT from cold: {differences(found, cold_outcome)}")
                if warm and jobs == 1:
                    warm_one = seconds
            kept = kept_runs(root, a, students, jobs, args.kept_runs)
            for seconds, judge, found in kept:
                print(line(f"course autograde --jobs {jobs}, kept", seconds, n, jobs, judge))
                if found != cold_outcome:
                    print(f"  DIFFERENT from cold: {differences(found, cold_outcome)}")
            if kept:
                mean = sum(seconds for seconds, _, _ in kept) * jobs / n / len(kept)
                print(f"  kept, --jobs {jobs}: {mean:.2f} s/submission/worker on average")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
        if warm_one is not None:
            print(
                f"warm at one worker / bare nbgrader: {warm_one / bare_seconds:.2f} (goal <= 0.5)"
            )
            print(f"warm at one worker / nbgrader, course config*: {warm_one / plain_course:.2f}")
        print("* no sandbox (IsolatedKernelManager), no judge (VerifyPoints off)")
        print("warm scores, flags and statuses equal to cold: see DIFFERENT lines (none: equal)")


if __name__ == "__main__":
    main()
