"""The notebooks' install line, for real: the first cell of every notebook (``tools/colab.py``)
run in a fresh virtual environment, where it runs pip on a ``git clone`` of this repository
(``tests/install_record.py`` says how: no stand-in for pip, the cell the notebooks' own, torch
from this machine's disk under the instructor's pins), then A's visible tests there.

The test writes the run's record in its own temporary folder and holds it against the clone
it installed: the record is what ``tools/colab.py`` accepts. It never writes the tracked
``tools/install_tested.json``: ``python -m tests.install_record`` does, by hand. Deep: a fresh
virtual environment, 1 to 2 minutes (mostly pip).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import install_record
from tools import colab


@pytest.mark.deep
@pytest.mark.slow  # a fresh virtual environment and a real pip install: a few minutes
def test_the_notebooks_first_cell_installs_the_student_part_from_a_git_clone(
    tmp_path: Path,
) -> None:
    tracked = colab.TESTED.read_bytes()
    seen = install_record.install(tmp_path)
    clone = Path(seen["clone"])
    assert seen["commit"] == install_record.git("rev-parse", "HEAD")
    assert f"git+{seen['repository']}#subdirectory=student" in seen["cell"]
    assert install_record.problems(seen) == []
    # the test's own check: a fault of the run is a problem, and no record is made of it
    faults = {
        "installed while grading": {**seen, "installed_while_grading": True},
        "an NVIDIA library": {**seen, "installed": [*seen["installed"], "nvidia-nccl==2.28"]},
        "the grader came": {**seen, "importable": {**seen["importable"], "grader": True}},
        "a test cell failed": {**seen, "failures": ["a_masks/x.ipynb test t: AssertionError"]},
        "a test cell not run": {**seen, "test_cells": seen["test_cells"][1:]},
        "no data": {**seen, "files": [f for f in seen["files"] if "/data/" not in f]},
    }
    for name, doctored in faults.items():
        assert install_record.problems(doctored), name
        with pytest.raises(ValueError, match="the install did not work"):
            install_record.record(doctored)

    path = tmp_path / "install_tested.json"
    made = install_record.write(seen, path)
    assert json.loads(path.read_text()) == made
    assert colab.untested(path, clone) == "", colab.untested(path, clone)
    assert made["cell_sha256"] == colab.cell_sha256()
    assert made["student_sha256"] == colab.student_sha256(clone)
    installed = dict(entry.split("==") for entry in made["installed"])
    assert installed[colab.DISTRIBUTION] == colab.student_version(clone)
    assert installed["torch"].endswith("+cpu"), installed["torch"]  # find-links' CPU wheel
    assert made["links"] and made["python"] and made["pip"], made
    visible = install_record.visible_test_cells(clone)
    assert len(made["visible_tests"]) == len(visible) > 0
    assert set(made["visible_tests"].values()) == {"passed"}
    assert colab.TESTED.read_bytes() == tracked, "the test wrote the tracked record"
