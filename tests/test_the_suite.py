"""The suite's own guards fail when what they name is false (issue 81, and CONTRIBUTING.md's "What
the suite proves and what it does not"):

- a misspelt ``COURSE_ASSIGNMENTS`` is an error, not a run on no assignment, and a test
  parametrized by nothing fails at collection (``empty_parameter_set_mark``);
- a test not marked ``slow`` that starts the course's ``nbgrader autograde``, cold or forked by a
  warm worker, fails (``tests/conftest.py``), as a test that grades is ``slow``;
- a test module that writes a tracked file, or leaves a file that git would add, fails
  (``tests/conftest.py``'s ``git status`` before and after each module).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grader.shared import process_output
from grader.warm.forkserver import ForkServer
from tests.conftest import REPO, chosen_assignments, repository_state, state_changes


def loaded_conftest(config: pytest.Config) -> object:
    """tests/conftest.py as pytest loaded it (``tests.conftest``, which the tests import, is
    another copy: its exception class and stash key are not the hooks')."""
    path = str(REPO / "tests" / "conftest.py")
    (found,) = [p for p in config.pluginmanager.get_plugins() if getattr(p, "__file__", "") == path]
    return found


def test_a_misspelt_assignment_is_an_error_not_an_empty_run() -> None:
    every = ["a_masks", "b_attention"]
    assert chosen_assignments(every, None) == every
    assert chosen_assignments(every, "b_attention,a_masks") == every  # the course's order
    assert chosen_assignments(every, "a_masks") == ["a_masks"]
    with pytest.raises(pytest.UsageError, match=r"names no assignment \['a_mask'\]"):
        chosen_assignments(every, "a_mask")
    with pytest.raises(pytest.UsageError, match="names no assignment"):
        chosen_assignments(every, "")
    with pytest.raises(pytest.UsageError, match="no assignment to test"):
        chosen_assignments([], None)


def test_a_test_parametrized_by_nothing_fails(request: pytest.FixtureRequest) -> None:
    assert request.config.getini("empty_parameter_set_mark") == "fail_at_collect"


def test_grading_outside_a_slow_test_is_refused(request: pytest.FixtureRequest) -> None:
    """This test is not slow: the course's nbgrader process of a grading run does not start,
    cold or warm; nbgrader's other commands and any other process do."""
    conftest = loaded_conftest(request.config)
    cold = [sys.executable, "-P", "-m", "grader.nbgrader.main", "autograde", "a_masks"]
    with pytest.raises(conftest.GradedOutsideSlow, match="grades through nbgrader: mark it slow"):
        process_output.BoundedPopen(cold)
    with pytest.raises(conftest.GradedOutsideSlow, match="mark it slow"):
        ForkServer.spawn(None, ["autograde", "a_masks", "--force"], Path(), {}, [])  # type: ignore[arg-type]
    started = request.node.stash[conftest.GRADED_OUTSIDE_SLOW]
    assert len(started) == 2 and "autograde a_masks" in started[0]
    started.clear()  # seen: this test is not failed for them
    other = process_output.BoundedPopen([sys.executable, "-c", "print('autograde')"])
    assert other.wait() == 0


def test_a_written_tracked_file_is_seen(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Every module of this run is guarded (this repository is a git work tree); in a work tree
    of its own, a tracked file written (again, where it was changed already) or removed, and a
    new file git would add, are changes; an ignored file and a read are not."""
    assert "_writes_no_tracked_file" in request.fixturenames and (REPO / ".git").exists()
    assert repository_state(tmp_path) == {}  # no work tree: nothing to compare

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "--quiet")
    (tmp_path / ".gitignore").write_text("scratch/\n")
    (tmp_path / "record.json").write_text("{}\n")
    (tmp_path / "notes.md").write_text("notes\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "tracked")
    clean = repository_state(tmp_path)
    assert clean == {}
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "out.json").write_text("ignored")
    (tmp_path / "record.json").read_text()
    assert state_changes(clean, repository_state(tmp_path)) == []
    (tmp_path / "record.json").write_text('{"written": "by a test"}\n')
    edited = repository_state(tmp_path)
    assert state_changes(clean, edited) == [" M record.json"]
    (tmp_path / "record.json").write_text('{"written": "again, longer, by a test"}\n')
    (tmp_path / "notes.md").unlink()
    (tmp_path / "new.txt").write_text("left behind")
    changes = state_changes(edited, repository_state(tmp_path))
    assert changes == [" D notes.md", " M record.json", "?? new.txt"]
