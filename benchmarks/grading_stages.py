"""Where the seconds of one graded submission go: a breakdown by stage.

    python benchmarks/grading_stages.py [--assignment a_masks] [--jobs 2] [--students all]

Grades a demo class (default: the representative class of ``course demo``; ``--students all``:
every demo student) in a scratch copy of the course, through the real pipeline
(``pipeline.autograde``: sandbox, limits, trusted judge), and times each stage of each
submission:

- from the grader's own timers (wrapped around the pipeline's functions): the scratch course,
  the nbgrader process as a whole, the judge, the report (tampering scan and gradebook reads)
  and the merge into the course gradebook;
- from the autograded notebook (nbclient records when each cell started and ended): the first
  code cell (the notebook's imports: torch, the course package), the other cells, and from the
  observations file's time the observation run after the last cell;
- what is left of the nbgrader process: before the first cell (nbgrader's start, reading the
  config, the gradebook, the sanitizing steps, and the kernel's start in bubblewrap) and after
  the observation (saving the scores into the gradebook, writing the notebook, stopping the
  kernel). Three probes, run alone on this machine after the class, split the first part:
  ``bwrap ... true``, a kernel started in the sandbox until it answers, and the import of
  nbgrader's autograde application in a fresh Python.

Every figure is wall-clock seconds per submission (the mean over the class) under ``--jobs N``;
the machine's load average is printed beside them, and the CPU seconds of all grading processes
per submission (sampled, :class:`CpuSampler`), which a busy machine inflates less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import psutil

from grader.coordinator import demo, grading, nbgrader_run, pipeline, scratch
from grader.sandbox import bubblewrap as sandbox
from grader.shared import verification
from grader.shared.paths import use_this_python

REPO = Path(__file__).resolve().parents[1]
STAGES = [
    ("scratch", "scratch course (copy of source/, gradebook)"),
    ("before_cells", "nbgrader start, sanitizing, kernel start (bwrap + ipykernel)"),
    ("imports", "first code cell (imports: torch, course)"),
    ("cells", "the notebook's other cells"),
    ("observation", "observation run for the judge (in the kernel)"),
    ("after_cells", "nbgrader: scores saved, notebook written, kernel stopped"),
    ("judge", "trusted judge (verdicts on the observations)"),
    ("report", "tampering scan, gradebook reads, copy of the notebooks"),
    ("merge", "merge into the course gradebook and the report"),
]


ORIGINALS: list = []  # the pipeline's functions before install() wrapped them


class Timer:
    """Per-student stage times, filled by wrappers around the pipeline's functions."""

    def __init__(self) -> None:
        self.stages: dict[str, dict[str, float]] = defaultdict(dict)
        self.marks: dict[str, dict[str, float]] = defaultdict(dict)
        self.lock = threading.Lock()

    def add(self, student: str, stage: str, seconds: float) -> None:
        with self.lock:
            self.stages[student][stage] = self.stages[student].get(stage, 0.0) + seconds


def install(timer: Timer) -> None:
    """Wrap the pipeline's stages with timers (this process only; again: a fresh timer)."""
    if not ORIGINALS:
        ORIGINALS.extend(
            [
                nbgrader_run.run,
                verification.judge_notebooks,
                grading.examine,
                grading.merge,
                scratch.scratch_course,
            ]
        )
    run, judge_notebooks, examine, merge, scratch_course = ORIGINALS

    def timed_run(job, student, folder, seed, zygote=None):  # noqa: ANN001, ANN202
        start = time.time()
        timer.marks[student]["grading_started"] = start  # the scratch course is ready
        result = run(job, student, folder, seed, zygote)
        timer.marks[student]["nbgrader"] = (start, time.time())
        return result

    def timed_judge(judge, assignment, seed, folder):  # noqa: ANN001, ANN202
        student = folder.parent.name
        observed = [p.stat().st_mtime for p in folder.glob(f"*{verification.SUFFIX}")]
        if observed:
            timer.marks[student]["observed"] = max(observed)
        timer.marks[student]["notebooks"] = [str(p) for p in folder.glob("*.ipynb")]
        timer.marks[student]["notebook_data"] = [p.read_text() for p in folder.glob("*.ipynb")]
        start = time.perf_counter()
        result = judge_notebooks(judge, assignment, seed, folder)
        timer.add(student, "judge", time.perf_counter() - start)
        timer.marks[student]["judged"] = time.time()
        return result

    def timed_examine(job, student, url, verdicts, run, over):  # noqa: ANN001, ANN202
        result = examine(job, student, url, verdicts, run, over)
        timer.marks[student]["examined"] = time.time()
        return result

    def timed_merge(root, url, assignment, graded, own):  # noqa: ANN001, ANN202
        start = time.perf_counter()
        merge(root, url, assignment, graded, own)
        timer.add(graded.student, "merge", time.perf_counter() - start)

    class TimedScratch:
        def __init__(self, root, assignment, student, gradebook, parent=None):  # noqa: ANN001
            self.inner = scratch_course(root, assignment, student, gradebook, parent)
            self.student = student

        def __enter__(self):  # noqa: ANN204
            timer.marks[self.student]["scratch_started"] = time.time()
            return self.inner.__enter__()

        def __exit__(self, *exc):  # noqa: ANN002, ANN204
            return self.inner.__exit__(*exc)

    nbgrader_run.run = timed_run
    verification.judge_notebooks = timed_judge
    grading.examine = timed_examine
    grading.merge = timed_merge
    scratch.scratch_course = TimedScratch


class CpuSampler(threading.Thread):
    """The CPU seconds of every process this one starts (nbgrader, bwrap, the kernels, the
    judge), sampled every 0.1 s: a kernel stopped at once is never waited for, so the
    children's rusage misses it (the last 0.1 s of each process is missed here)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[tuple[int, float], float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.done.is_set():
            for child in me.children(recursive=True):
                try:
                    with child.oneshot():
                        times = child.cpu_times()
                        key = (child.pid, child.create_time())
                    self.seen[key] = times.user + times.system
                except psutil.Error:
                    pass
            self.done.wait(0.1)

    def total(self) -> float:
        self.done.set()
        self.join()
        return sum(self.seen.values())


def when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def cell_times(notebook_text: str) -> tuple[float, float, float, float] | None:
    """(first cell's start, first cell's end, last cell's end, seconds in the other cells)."""
    nb = json.loads(notebook_text)
    spans = []
    for cell in nb["cells"]:
        execution = cell.get("metadata", {}).get("execution", {})
        if cell["cell_type"] == "code" and "iopub.execute_input" in execution:
            end = execution.get("shell.execute_reply") or execution.get("iopub.status.idle")
            spans.append((when(execution["iopub.execute_input"]), when(end)))
    if not spans:
        return None
    others = sum(b - a for a, b in spans[1:])
    return spans[0][0], spans[0][1], spans[-1][1], others


def breakdown(timer: Timer, student: str) -> dict[str, float]:
    """The stage times of one student (seconds)."""
    marks, stages = timer.marks[student], dict(timer.stages[student])
    start, end = marks["nbgrader"]
    stages["scratch"] = marks["grading_started"] - marks["scratch_started"]
    times = cell_times(marks["notebook_data"][0]) if marks.get("notebook_data") else None
    if times is None:
        stages["before_cells"] = end - start
        return stages
    first_start, first_end, last_end, others = times
    stages["before_cells"] = first_start - start
    stages["imports"] = first_end - first_start
    stages["cells"] = others
    observed = marks.get("observed", last_end)
    stages["observation"] = max(0.0, observed - last_end)
    stages["after_cells"] = max(0.0, end - max(observed, last_end))
    stages["report"] = marks["examined"] - marks["judged"]
    return stages


def probe_seconds(command: list[str], repeat: int = 3, **how: object) -> float:
    """The median wall-clock seconds of running ``command``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, **how)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def kernel_start_seconds(root: Path, repeat: int = 3) -> float:
    """The median seconds from starting a kernel in the sandbox to its first reply."""
    code = (
        "import asyncio, tempfile, time\n"
        "from grader.nbgrader.kernels import SandboxedKernelManager\n"
        "async def main():\n"
        "    km = SandboxedKernelManager(kernel_name='python3')\n"
        "    start = time.perf_counter()\n"
        "    await km.start_kernel(cwd=tempfile.mkdtemp())\n"
        "    kc = km.client(); kc.start_channels(); await kc.wait_for_ready(timeout=120)\n"
        "    print(time.perf_counter() - start)\n"
        "    kc.stop_channels(); await km.shutdown_kernel(now=True)\n"
        "asyncio.run(main())\n"
    )
    times = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=root
        )
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def as_before(enabled: bool) -> None:
    """Grade with nbgrader's command line as it was before the speed-ups (``python -m nbgrader``,
    the kernel stopped gracefully) when ``enabled``; as now otherwise."""
    if not hasattr(as_before, "command"):
        as_before.command = nbgrader_run.command

    def before(job, student, scratch, seed, zygote=None):  # noqa: ANN001, ANN202
        line = as_before.command(job, student, scratch, seed, zygote)
        line = [part for part in line if part != "--Execute.shutdown_kernel=immediate"]
        return [("nbgrader" if part == "grader.nbgrader.main" else part) for part in line]

    nbgrader_run.command = before if enabled else as_before.command


def grade_class(root: Path, args: argparse.Namespace, students: list[str], label: str) -> None:
    """Grade ``students`` once (a fresh timer) and print the breakdown."""
    timer = Timer()
    install(timer)
    n = len(students)
    print(f"\n== {label}: {args.assignment}, {n} submissions, --jobs {args.jobs}")
    print(f"before: {load()}")
    sampler = CpuSampler()
    sampler.start()
    start = time.perf_counter()
    results = pipeline.autograde(
        root, args.assignment, jobs=args.jobs, students=students,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
        warm=not args.cold,
    )  # fmt: skip
    wall = time.perf_counter() - start
    cpu = sampler.total() / n
    print(f"after:  {load()}")
    failed = [g.student for g in results if not g.ok]
    if failed:
        raise SystemExit(f"not graded: {failed}")
    per = [breakdown(timer, s) for s in students]
    worker = sum(g.seconds for g in results) / n
    print(
        f"wall {wall:.1f} s for {n}: {wall / n:.2f} s per submission at --jobs {args.jobs}"
        f" ({worker:.2f} s per submission per worker in nbgrader); CPU of the processes "
        f"grading started (nbgrader, kernels, judge), sampled: {cpu:.2f} s per submission"
    )
    print(f"{'stage':<14} {'s/submission':>12} {'share':>6}  what")
    total = sum(statistics.mean(p.get(k, 0.0) for p in per) for k, _ in STAGES)
    for key, what in STAGES:
        mean = statistics.mean(p.get(key, 0.0) for p in per)
        print(f"{key:<14} {mean:12.2f} {mean / total:6.0%}  {what}")
    print(f"{'sum':<14} {total:12.2f}         (one worker's time per submission)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", default="a_masks")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--students", default="representative", help="representative or all")
    parser.add_argument("--unsafe-no-sandbox", action="store_true")
    parser.add_argument("--cold", action="store_true", help="kernels started afresh (not warm)")
    parser.add_argument(
        "--compare",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="grade the class ROUNDS times each with nbgrader's command line as before the "
        "speed-ups and as now, alternating",
    )
    args = parser.parse_args()
    use_this_python()
    with tempfile.TemporaryDirectory(prefix="course-stages-") as tmp:
        root = Path(tmp)
        for name in ("nbgrader_config.py", "reference_runs.json"):
            shutil.copy(REPO / name, root)
        for name in ("source", "demo"):
            shutil.copytree(REPO / name, root / name)
        pipeline.release(root, args.assignment)
        students = demo.build_class(root, args.assignment)
        if args.students != "all":
            students = demo.representative(root, args.assignment, students)
        print(f"{os.cpu_count()} cores; wall-clock seconds unless said otherwise")
        if not args.compare:
            grade_class(root, args, students, "now")
        for round_ in range(args.compare):
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for before in order:
                as_before(before)
                grade_class(
                    root, args, students, f"round {round_ + 1}, {'before' if before else 'now'}"
                )
        as_before(False)
        print(f"\nprobes, alone ({load()}):")
        bwrap = sandbox.sandbox_command([shutil.which("true") or "/bin/true"], tmp, tmp, [], [])
        print(f"  bwrap ... true:                        {probe_seconds(bwrap):5.2f} s")
        print(f"  kernel in the sandbox, first reply:    {kernel_start_seconds(root):5.2f} s")
        imports = "import nbgrader.apps.nbgraderapp, grader.nbgrader.execute_keeping_points"
        plain = probe_seconds([sys.executable, "-c", imports])
        print(f"  python + nbgrader's imports (plain):   {plain:5.2f} s")
        fast = f"import sys; sys.modules['rfc3987_syntax'] = None; {imports}"
        started = probe_seconds([sys.executable, "-c", fast])
        print(f"  the same, as grader.nbgrader.main:     {started:5.2f} s")
        kernel_imports = [sys.executable, "-c", "import torch, matplotlib.pyplot, course"]
        print(f"  python + torch, matplotlib, course:    {probe_seconds(kernel_imports):5.2f} s")


if __name__ == "__main__":
    main()
