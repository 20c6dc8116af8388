"""Warm workers kept between runs (grader/warm/service.py, ``course workers start``).

The module's course keeps one set of workers (one worker). A first run grades a submission that
leaves behind everything it can (tests/test_warm_isolation.py's leaves()), a second run, on the
same kept workers, one that looks for it: it finds nothing, and every outcome is the cold one.
Neither run starts a zygote, an nbgrader server or a judge of its own. Then: workers that end
while a run holds them leave that run grading on its own; workers kept for other code or
another ``--jobs`` are left alone (and said so); idle workers stop, and ``course workers stop``
waits for the run that uses them; the judge server forks a judge per run that answers as a
judge process does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from grader.command import cli
from grader.coordinator import demo, pipeline
from grader.shared import verification
from grader.warm import pool as warm
from grader.warm import service as warm_service
from tests.conftest import class_outcome, make_course_copy
from tests.test_adversarial import ASSIGNMENT, MASK, NOTEBOOK, append_code
from tests.test_warm_isolation import LOOKS, leaves, marked


def gone(pid: int, seconds: float = 20) -> bool:
    end = time.monotonic() + seconds
    while warm_service._running(pid) and time.monotonic() < end:
        time.sleep(0.1)
    return not warm_service._running(pid)


@pytest.fixture(scope="module")
def kept_course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A course with A's demo class, two hostile students, and workers kept for one job."""
    root = make_course_copy(tmp_path_factory.mktemp("kept") / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    reference = root / "submitted" / "reference" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, code in {"a_leaves": leaves("1000.125"), "b_looks": LOOKS}.items():
        target = root / "submitted" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        target.parent.mkdir(parents=True)
        edited = append_code(MASK, code)(nbformat.read(str(reference), as_version=4))
        nbformat.write(edited, str(target))
    warm_service.start(root, 1, idle_minutes=10)
    try:
        yield root
    finally:
        warm_service.stop(root)


@pytest.mark.slow
def test_runs_on_kept_workers_leave_nothing_for_the_next_and_grade_as_cold(
    kept_course: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, students = kept_course, ["a_leaves", "b_looks", "reference"]
    state = warm_service.read_state(warm_service.folder(root))
    assert state is not None
    judges: list[object] = []
    started = verification.Judge._started

    def recorded(self: verification.Judge) -> object:
        judges.append(started(self))
        return judges[-1]

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a run on kept workers started workers of its own")

    with monkeypatch.context() as patch:
        patch.setattr(warm.WarmPool, "__init__", refused)
        patch.setattr(verification.Judge, "_started", recorded)
        for run in (["a_leaves"], ["b_looks", "reference"]):  # two runs, one after the other
            results = pipeline.autograde(root, ASSIGNMENT, jobs=1, students=run, warm=True)
            assert all(g.ok for g in results), [g.message for g in results]
    assert judges and all(isinstance(j, verification.ForkedJudge) for j in judges)
    kept = class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    pipeline.autograde(root, ASSIGNMENT, jobs=1, students=students, warm=False)
    assert kept == class_outcome(root, ASSIGNMENT, NOTEBOOK, students)
    assert kept["b_looks"] == kept["reference"], "the second run found what the first left"
    assert kept["reference"][1:] == (False, "graded")
    assert not marked("1000.125"), "the first run's process outlived its grading"
    assert warm_service.read_state(warm_service.folder(root)) == state  # still kept


@pytest.mark.slow
def test_workers_that_end_during_a_run_leave_it_grading_on_its_own(
    kept_course: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The kept zygote killed while a run holds the workers: they stop once that run lets them
    go, and the run (here a second one, started meanwhile) grades with workers of its own."""
    root = kept_course
    held = warm_service.attach(root, 1)
    assert held is not None
    os.kill(held.state["zygote_pid"], signal.SIGKILL)
    results = pipeline.autograde(root, ASSIGNMENT, jobs=1, students=["reference"], warm=True)
    assert results[0].ok, results[0].message
    assert "the kept warm workers ended: this run starts its own" in capfd.readouterr().err
    held.close()
    assert gone(held.pid), "the workers went on without their zygote"
    assert warm_service.read_state(warm_service.folder(root)) is None


@pytest.mark.slow
def test_idle_workers_stop_and_stop_waits_for_the_run_using_them(tmp_path: Path) -> None:
    said = warm_service.start(tmp_path, 1, idle_minutes=0.05)  # 3 s
    assert "warm workers kept" in said
    state = warm_service.read_state(warm_service.folder(tmp_path))
    held = warm_service.attach(tmp_path, 1)  # a run using them: neither idle nor stopped
    assert held is not None and state is not None
    time.sleep(5)
    assert warm_service._running(state["pid"]), "stopped while a run used them"
    stopping = threading.Thread(target=warm_service.stop, args=(tmp_path,))
    stopping.start()
    time.sleep(2)
    assert stopping.is_alive() and warm_service._running(state["pid"])
    held.close()
    stopping.join(30)
    assert not stopping.is_alive() and gone(state["pid"]) and gone(state["zygote_pid"])
    assert warm_service.read_state(warm_service.folder(tmp_path)) is None

    warm_service.start(tmp_path, 1, idle_minutes=0.05)
    state = warm_service.read_state(warm_service.folder(tmp_path))
    assert state is not None
    assert gone(state["pid"], 30), "idle workers did not stop"
    assert "no run used them for 0.05 minutes" in (tmp_path / ".warm-workers" / "log").read_text()


@pytest.fixture
def fake_workers(tmp_path: Path) -> Iterator[Path]:
    """A course whose state names a live process that looks like kept workers."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "grader.warm.service"]
    )
    place = warm_service.folder(tmp_path)
    place.mkdir()
    (place / "lease").touch()
    state = {"pid": process.pid, "key": "other code", "jobs": 3, "idle_seconds": 60}
    (place / "state.json").write_text(json.dumps(state))
    end = time.monotonic() + 10
    while not warm_service._is_service(process.pid) and time.monotonic() < end:
        time.sleep(0.05)
    try:
        assert warm_service.read_state(place) == state, open(f"/proc/{process.pid}/stat").read()
        yield tmp_path
    finally:
        process.kill()
        process.wait()


def test_workers_kept_for_other_code_or_jobs_are_left_alone(
    fake_workers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert warm_service.attach(fake_workers, 2) is None
    err = capsys.readouterr().err
    assert "were started for other code or for --jobs 3: this run starts its own" in err
    assert "would not use them" in warm_service.status(fake_workers, 2)
    with pytest.raises(warm_service.CourseError, match="`course workers stop` first"):
        warm_service.start(fake_workers, 2)


def test_state_of_a_process_that_is_not_the_workers_is_ignored(tmp_path: Path) -> None:
    place = warm_service.folder(tmp_path)
    place.mkdir()
    for pid in (os.getpid(), 2**22 + 7):  # another program, no process at all
        (place / "state.json").write_text(json.dumps({"pid": pid, "key": "k", "jobs": 1}))
        assert warm_service.read_state(place) is None
        assert warm_service.attach(tmp_path, 1) is None
    assert cli.main(["--root", str(tmp_path), "workers", "status"]) == 0
    assert cli.main(["--root", str(tmp_path), "workers", "stop"]) == 0


def test_a_forked_judge_answers_as_a_judge_process(tmp_path: Path) -> None:
    """``python -m judge --serve``: each connection gets a judge of its own, which answers as
    ``python -m judge`` does; with the server gone, a run's judge is a process of its own."""
    address = str(tmp_path / "judge.sock")
    server = subprocess.Popen([sys.executable, "-m", "judge", "--serve", address])
    try:
        end = time.monotonic() + 120
        while not os.path.exists(address) and time.monotonic() < end:
            time.sleep(0.05)
        missing, own = tmp_path / "none.pt", verification.Judge()
        bad = tmp_path / "bad.pt"
        bad.write_bytes(b"not a tensor file")
        expected = [own.verify(ASSIGNMENT, 7, path) for path in (missing, bad)]
        forked = verification.Judge(address)
        assert [forked.verify(ASSIGNMENT, 7, path) for path in (missing, bad)] == expected
        assert isinstance(forked._process, verification.ForkedJudge)
        assert expected[0].refused.startswith("no observations")
        forked.close()
        own.close()
    finally:
        server.kill()
        server.wait()
    os.unlink(address)
    after = verification.Judge(address)
    assert after.verify(ASSIGNMENT, 7, missing) == expected[0]
    assert isinstance(after._process, subprocess.Popen)
    after.close()


def test_workers_whose_lease_cannot_be_opened_are_left_alone(
    fake_workers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Workers of this code (another user's, say, whose folder this user cannot open) that this
    run cannot hold: it starts its own, and says why."""
    place = warm_service.folder(fake_workers)
    state = {**json.loads((place / "state.json").read_text()), "key": warm_service.code_key(2)}
    (place / "state.json").write_text(json.dumps(state))
    (place / "lease").unlink()
    assert warm_service.attach(fake_workers, 2) is None
    assert "the kept warm workers cannot be used" in capsys.readouterr().err
