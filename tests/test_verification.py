"""The trusted verification's parts: the judge's file reading, its process, the disagreements.

The end-to-end property (a patched kernel gains no point) is in ``test_adversarial.py``; the
judge's agreement with every demo student is in ``test_checks_direct.py``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course import verify
from course.contract import LOG_SUFFIX as LOG
from grader.nbgrader.execute_keeping_points import ExecuteKeepingPoints
from grader.nbgrader.observation import (
    INTERRUPTED_ITEM,
    KILLED_ITEM,
    KernelObservation,
    read_log_file,
)
from grader.shared.verification import JUDGE_NICENESS, Judge, Verification, disagreements
from judge import core


class Payload:
    """An object whose unpickling would run code (a hostile observations file)."""

    def __reduce__(self):
        return (os.system, ("touch /tmp/course-judge-was-fooled",))


def test_observations_with_code_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "hostile.pt"
    torch.save({"test_mask_visible": Payload()}, path)
    with pytest.raises(core.Refused):
        core.load(str(path))
    assert not Path("/tmp/course-judge-was-fooled").exists()
    path.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(core.Refused):
        core.load(str(path))


def test_links_and_missing_files_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.pt"
    torch.save({"a": torch.zeros(2)}, real)
    link = tmp_path / "link.pt"
    link.symlink_to(real)
    with pytest.raises(core.Refused):
        core.load(str(link))
    with pytest.raises(core.Refused, match="no observations"):
        core.load(str(tmp_path / "absent.pt"))
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(core.Refused, match="dictionary"):
        core.load(str(tmp_path / "list.pt"))


def test_the_judge_process_gives_verdicts(tmp_path: Path) -> None:
    seed = 7
    right = torch.triu(torch.full((3, 3), float("-inf")), diagonal=1)
    torch.save({"test_mask_visible": right, "test_mask_hidden": [torch.zeros(1)]}, tmp_path / "o")
    judge = Judge()
    try:
        result = judge.verify("a_masks", seed, tmp_path / "o")
        refused = judge.verify("a_masks", seed, tmp_path / "absent")
        # below the grading workers: its verdicts take the CPU they leave
        assert os.getpriority(os.PRIO_PROCESS, judge._process.pid) >= os.nice(0) + 5
    finally:
        judge.close()
    assert result.verdicts["test_mask_visible"] is None
    assert "one mask per size" in result.verdicts["test_mask_hidden"]
    assert "not observed" in result.verdicts["test_pe_visible"]
    assert refused.refused


NICED = """
import os, subprocess
from grader.shared.verification import JUDGE_NICENESS, below_the_workers
os.nice(3)
judge = subprocess.Popen(["sleep", "30"])
try:
    below_the_workers(judge.pid)
    print(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, judge.pid))
finally:
    judge.kill()
"""


def test_under_a_niced_run_the_judge_still_runs_below_the_workers() -> None:
    """``nice course autograde``: the judge goes JUDGE_NICENESS below the niced workers, not to
    an absolute niceness (above them, or refused to a user who is not root)."""
    done = subprocess.run([sys.executable, "-c", NICED], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    workers, judge = map(int, done.stdout.split())
    assert workers >= 3 and judge == min(19, workers + JUDGE_NICENESS), done.stdout


def test_a_closed_judge_refuses_and_starts_no_process(tmp_path: Path) -> None:
    """An interrupted run closes its judge while a worker thread may still ask for a verdict:
    the thread gets a refusal at once, not a new judge that imports torch first."""
    judge = Judge()
    judge.start()
    judge.close()
    late = judge.verify("a_masks", 7, tmp_path / "o")
    assert late.refused and "stopped" in late.refused
    assert judge._process is None


def test_only_points_the_judge_rejects_are_overruled() -> None:
    verdicts = {"t1": None, "t2": "wrong values", "t3": "wrong shape"}
    scores = {"t1": 1.0, "t2": 2.0, "t3": 0.0, "written": 3.0}
    found = disagreements(Verification(verdicts=verdicts), scores)
    assert list(found) == ["t2"] and "wrong values" in found["t2"]
    refused = disagreements(Verification(refused="no observations"), scores)
    assert set(refused) == {"t1", "t2", "written"}
    assert disagreements(Verification(refused="x"), {"t1": 0.0}) == {}


# ----------------------------------------------------------------------------- observation log
def test_observe_logs_item_by_item_and_fails_the_named_items(tmp_path: Path) -> None:
    """Items in ``failed`` are not called; the log is removed once every item is observed."""
    path = tmp_path / "nb.observations.pt"
    calls = []

    def mask(sz: int) -> torch.Tensor:
        calls.append(sz)
        return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)

    namespace = {"generate_square_subsequent_mask": mask}
    verify.observe("a_masks", 7, str(path), namespace, failed={"test_mask_hidden": "KernelDied"})
    observed = core.load(str(path))
    assert observed["test_mask_hidden"] == {"error": "KernelDied"}
    assert isinstance(observed["test_mask_visible"], torch.Tensor)
    assert "NameError" in observed["test_pe_visible"]["error"]  # not defined: an error item
    assert calls == [3]  # the visible item only (its size): the failed hidden one was not called
    assert not Path(f"{path}{LOG}").exists()


def test_the_grader_reads_which_item_killed_the_kernel(tmp_path: Path) -> None:
    """The log of a kernel that died in an item: that item fails, the interrupted ones too; a
    log that names nothing new (or a link, or garbage) gives no fresh kernel."""
    path = tmp_path / "nb.observations.pt"
    log = Path(f"{path}{LOG}")
    log.write_text("start a\nstart b\ninterrupted b\nstart c\n")
    notes = []
    observation = KernelObservation(ExecuteKeepingPoints(), path, 1, lambda *n: notes.append(n))
    assert observation.learn_from_log()
    assert observation.failed == {"b": INTERRUPTED_ITEM, "c": KILLED_ITEM}
    assert [kind for kind, _ in notes] == ["died"] and "observed c" in notes[0][1]
    assert not observation.learn_from_log()  # nothing new: no progress, no fresh kernel
    log.write_text("start a\nerror a\n")
    assert not observation.learn_from_log()  # died after the items: none to blame
    log.unlink()
    log.symlink_to("/etc/passwd")
    assert read_log_file(log) == []
    log.unlink()
    log.write_bytes(b"start \xff\x00$(rm -rf /)\nstart ok_item\n")
    assert read_log_file(log) == ["start ok_item"]


# What ExecuteKeepingPoints (grader/nbgrader/execute_keeping_points.py) takes from nbconvert and
# nbclient beyond their public API: it re-implements ExecutePreprocessor.preprocess and overrides
# nbclient's _async_handle_timeout. When either changes, re-read ours against the new code, then
# update.
PREPROCESS_SHA256 = "58beeaafc496ae5ff502acdabd85296d9a7302176317d904b6c61b9a1e109f72"


def test_what_we_copied_from_nbconvert_and_nbclient_has_not_changed() -> None:
    import hashlib
    import inspect

    from nbclient import NotebookClient
    from nbconvert.preprocessors import ExecutePreprocessor

    source = inspect.getsource(ExecutePreprocessor.preprocess)
    assert hashlib.sha256(source.encode()).hexdigest() == PREPROCESS_SHA256, (
        "nbconvert's ExecutePreprocessor.preprocess changed: re-read "
        "ExecuteKeepingPoints.preprocess (grader/nbgrader/execute_keeping_points.py) against it"
    )
    ours = inspect.signature(ExecuteKeepingPoints._async_handle_timeout).parameters
    theirs = inspect.signature(NotebookClient._async_handle_timeout).parameters
    assert list(ours) == list(theirs), "nbclient's _async_handle_timeout changed its parameters"
    assert hasattr(ExecutePreprocessor, "_check_assign_resources"), "nbconvert renamed it"


def test_a_function_interrupted_at_its_limit_is_not_called_again() -> None:
    """course.verify.stop_runaways, run by the grader after a cell was interrupted, replaces
    the notebook's function (or method) that was running by one that raises at once."""
    import _thread
    import signal
    import threading

    # interrupt_main does nothing where SIGINT is ignored: the pytest-xdist worker that ran the
    # browser tests ignores it, and the loop below then never ended
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    module = sys.modules["__main__"]
    namespace = vars(module)  # a notebook's namespace: the functions' globals are __main__'s
    exec(
        "def count(n):\n    while True:\n        pass\n"
        "class Model:\n    def __init__(self):\n        while True:\n            pass\n",
        namespace,
    )
    try:
        for call, name in (
            (lambda: module.count(3), "count"),
            (lambda: module.Model(), "__init__"),
        ):
            threading.Timer(0.3, _thread.interrupt_main).start()
            with pytest.raises(KeyboardInterrupt) as interrupted:
                call()
            sys.last_traceback = interrupted.value.__traceback__
            assert verify.stop_runaways() == name
            with pytest.raises(TimeoutError, match="ran past the time limit in an earlier cell"):
                call()
    finally:
        signal.signal(signal.SIGINT, previous)
        namespace.pop("count", None)
        namespace.pop("Model", None)
