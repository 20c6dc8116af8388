"""Grading on a Dask cluster: the scores of ``--jobs 1``, a dead worker costs nothing.

Two clusters: a LocalCluster started by ``course autograde --cluster local:2``, and a scheduler
and two workers started here as separate ``dask`` processes talking TCP on localhost. The class:
A's reference, blank and a typical mistake, and a hostile student that patches the notebook's
own tests (so its verdict comes from the judge, on the worker).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import psutil
import pytest
from distributed import Client

from grader.coordinator import cluster, demo, pipeline
from grader.coordinator.nbgrader_run import kill_tree
from grader.shared import report
from grader.shared.paths import CourseError
from tests.conftest import class_outcome, make_course_copy
from tests.test_adversarial import CASES

pytestmark = pytest.mark.slow
ASSIGNMENT, NOTEBOOK = "a_masks", "masks_and_positions"
HOSTILE = "patches_user_ns"
STUDENTS = ["blank", "mask_transposed", "reference", HOSTILE]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def class_to_grade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course with A released and its submissions in place, not graded yet."""
    root = make_course_copy(tmp_path_factory.mktemp("cluster") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    hostile = CASES[HOSTILE](nbformat.read(str(reference), as_version=4))
    (root / "submitted" / HOSTILE / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(hostile, str(root / "submitted" / HOSTILE / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))
    return root


def copy_of(root: Path, target: Path) -> Path:
    shutil.copytree(root, target)
    return target


@pytest.fixture(scope="module")
def sequential(class_to_grade: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The class graded on this machine, one student at a time (``--jobs 1``)."""
    root = copy_of(class_to_grade, tmp_path_factory.mktemp("jobs1") / "course")
    pipeline.autograde(root, ASSIGNMENT, jobs=1, students=STUDENTS)
    return root


def outcome(root: Path) -> dict[str, tuple]:
    return class_outcome(root, ASSIGNMENT, NOTEBOOK, STUDENTS)


def course(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [str(BIN / "course"), "--root", str(root), "autograde", ASSIGNMENT, *args]
    for student in STUDENTS:
        command += ["--student", student]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_the_sequential_run_is_not_trivial(sequential: Path) -> None:
    found = outcome(sequential)
    assert sum(found["reference"][0].values()) > sum(found["mask_transposed"][0].values()) > 0
    assert sum(found["blank"][0].values()) == 0
    assert found[HOSTILE][1] and found[HOSTILE][2] == "flagged"  # the judge overruled it


def test_a_local_cluster_gives_the_scores_of_jobs_1(
    class_to_grade: Path, sequential: Path, tmp_path: Path
) -> None:
    root = copy_of(class_to_grade, tmp_path / "course")
    done = course(root, "--cluster", "local:2")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert outcome(root) == outcome(sequential)
    for student in STUDENTS:  # the autograded notebooks came back from the workers
        graded = root / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        assert nbformat.read(str(graded), as_version=4).cells, student


# ----------------------------------------------------------------------------- TCP
@pytest.fixture(scope="module")
def tcp_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list]]:
    """A ``dask scheduler`` and two ``dask worker`` processes on localhost (TCP)."""
    folder = tmp_path_factory.mktemp("dask")
    file = folder / "scheduler.json"
    common = ["--no-dashboard"]
    scheduler = subprocess.Popen(
        [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--scheduler-file", file, *common],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    processes = [scheduler]
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert file.exists(), "the dask scheduler did not start"
        address = json.loads(file.read_text())["address"]
        workers = [
            subprocess.Popen(
                [
                    BIN / "dask",
                    "worker",
                    address,
                    "--nthreads",
                    "1",
                    "--host",
                    "127.0.0.1",
                    "--death-timeout",
                    "60",
                    *common,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=folder,
            )  # fmt: skip
            for _ in range(2)
        ]
        processes += workers
        yield address, workers
    finally:
        for process in reversed(processes):
            kill_tree(process.pid)


def family(pid: int) -> list[psutil.Process]:
    process = psutil.Process(pid)
    return [process, *process.children(recursive=True)]


def grading_now(pid: int) -> bool:
    """Whether the worker process ``pid`` has an nbgrader grading process under it."""
    try:
        return any("grader.nbgrader.main" in p.cmdline() for p in family(pid)[1:])
    except psutil.Error:  # a process of the family ended meanwhile: ask again
        return False


def busy_worker(client: Client, deadline: float) -> tuple[str, str]:
    """A worker that is running a grading task, by the worker's own state, with nbgrader running
    under it, and that task's key, as soon as there is one."""

    def executing(dask_worker: object) -> list[str]:
        """On a worker: the keys of the tasks it runs now, by its own state (a local function:
        sent by value, the workers cannot import the tests)."""
        return [str(ts.key) for ts in dask_worker.state.executing]  # type: ignore[attr-defined]

    while time.monotonic() < deadline:
        pids = client.run(os.getpid)  # asked again each time: a worker may have joined since
        for worker, keys in client.run(executing).items():
            grading = [key for key in keys if key.startswith("grade-")]
            if grading and worker in pids and grading_now(pids[worker]):
                return worker, grading[0]
        time.sleep(0.2)
    raise AssertionError("no worker ever ran a grading task")


def processing_when_removed(client: Client, worker: str, deadline: float) -> set[str]:
    """The tasks that ``worker`` was still processing when the scheduler lost it: from the
    "remove-worker" event in the worker's own topic of events."""
    while time.monotonic() < deadline:
        for _, event in client.get_events(worker):
            if isinstance(event, dict) and event.get("action") == "remove-worker":
                return {str(key) for key in event["processing-tasks"]}
        time.sleep(0.2)
    raise AssertionError(f"the scheduler never said that it lost {worker}")


def test_a_worker_that_dies_mid_task_loses_nothing(
    tcp_cluster: tuple[str, list], class_to_grade: Path, sequential: Path, tmp_path: Path
) -> None:
    """The worker is killed while its grading task runs (its own state says it is running it
    before the kill; the scheduler's record of the loss names it as still processing); the task
    is graded again elsewhere and every score is that of ``--jobs 1``."""
    address, workers = tcp_cluster
    root = copy_of(class_to_grade, tmp_path / "course")
    command = [str(BIN / "course"), "--root", str(root), "autograde", ASSIGNMENT]
    command += ["--scheduler", address] + [f"--student={s}" for s in STUDENTS]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with Client(address, timeout="20s") as client:
        victim, task = busy_worker(client, time.monotonic() + 120)
        victim_pid = client.run(os.getpid)[victim]
        killed = [w for w in workers if victim_pid in {p.pid for p in family(w.pid)}]
        assert len(killed) == 1, f"no worker process runs {victim}"
        kill_tree(killed[0].pid)  # the machine dies: worker, nbgrader and kernel at once
        lost = processing_when_removed(client, victim, time.monotonic() + 120)
    assert task in lost, f"{task} had ended on {victim} before the kill: {sorted(lost)}"
    log, _ = run.communicate(timeout=600)
    assert run.returncode == 0, log[-3000:]
    assert outcome(root) == outcome(sequential), log[-3000:]


def test_a_worker_with_other_course_code_is_refused(tcp_cluster: tuple[str, list]) -> None:
    address, _ = tcp_cluster
    with Client(address, timeout="20s") as client:
        with pytest.raises(CourseError, match="same version of the course") as caught:
            cluster.check_workers(client, "0.0.0+another", sandboxed=True)
        assert cluster.fingerprint() in str(caught.value)  # names what the worker runs
        assert cluster.check_workers(client, cluster.fingerprint(), sandboxed=True) >= 1


def test_an_interrupted_run_keeps_what_was_merged(
    tcp_cluster: tuple[str, list], class_to_grade: Path, tmp_path: Path
) -> None:
    address, _ = tcp_cluster
    root = copy_of(class_to_grade, tmp_path / "course")
    merged: list[str] = []

    def interrupt(graded: pipeline.Graded) -> None:
        merged.append(graded.student)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipeline.autograde(root, ASSIGNMENT, students=STUDENTS, progress=interrupt, cluster=address)
    assert len(merged) == 1
    rows = pipeline.grade_rows(root)
    assert [r.student for r in rows] == merged  # the merged student, and only it
    assert [r["student"] for r in report.read(root)] == merged
