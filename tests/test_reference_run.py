"""Time limits derived from the reference solution's run (grader.shared.reference_run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grader.shared import reference_run
from grader.shared.limits import time_limits
from tests.conftest import ASSIGNMENTS, REPO


def test_the_repository_records_a_current_run_of_every_assignment() -> None:
    """A fresh clone grades with derived limits at once (`course release` updates the file)."""
    for assignment in ASSIGNMENTS:
        run = reference_run.current(REPO, assignment)
        assert run, f"reference_runs.json is stale for {assignment}: run `course release`"
        assert 0 < run["slowest_cell_seconds"] <= run["seconds"]


def course_with_run(tmp_path: Path, seconds: float, slowest: float) -> Path:
    (tmp_path / "source").mkdir(parents=True)
    shutil.copytree(REPO / "source" / "a_masks", tmp_path / "source" / "a_masks")
    notebooks = {
        p.name: reference_run._sha256(p) for p in (tmp_path / "source" / "a_masks").glob("*.ipynb")
    }
    run = {"notebooks": notebooks, "seconds": seconds, "slowest_cell": "x"}
    run["slowest_cell_seconds"] = slowest
    (tmp_path / reference_run.FILE).write_text(json.dumps({"a_masks": run}))
    return tmp_path


def test_limits_follow_the_reference_run_within_floor_and_ceiling(tmp_path: Path) -> None:
    root = course_with_run(tmp_path / "slow", seconds=50.0, slowest=6.0)
    times = time_limits(root, "a_masks", cell_ceiling=120, submission_ceiling=900)
    assert (times.cell_seconds, times.submission_seconds) == (60, 200)
    assert "50 s" in times.basis
    fast = time_limits(course_with_run(tmp_path / "fast", 2.0, 0.5), "a_masks", 120, 900)
    assert (fast.cell_seconds, fast.submission_seconds) == (30, 120)  # the floors
    capped = time_limits(root, "a_masks", cell_ceiling=20, submission_ceiling=90)
    assert (capped.cell_seconds, capped.submission_seconds) == (20, 90)  # the configuration


def test_a_stale_run_is_not_used(tmp_path: Path) -> None:
    root = course_with_run(tmp_path, seconds=50.0, slowest=6.0)
    notebook = next((root / "source" / "a_masks").glob("*.ipynb"))
    notebook.write_text(notebook.read_text().replace("causal", "causal "))
    times = time_limits(root, "a_masks", cell_ceiling=120, submission_ceiling=900)
    assert (times.cell_seconds, times.submission_seconds) == (120, 900)
    assert times.basis == "the configured limits"


def test_a_reference_that_fails_is_one_clear_message(tmp_path: Path) -> None:
    import nbformat
    import pytest

    from grader.shared.paths import CourseError

    folder = tmp_path / "source" / "z_broken"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1 / 0")]
    nbformat.write(nb, str(folder / "broken.ipynb"))
    with pytest.raises(CourseError, match="reference solution of z_broken fails.*ZeroDivision"):
        reference_run.record(tmp_path, "z_broken")
    assert not (tmp_path / reference_run.FILE).exists()
