"""Shared fixtures: a scratch copy of the course, with the demo class graded once per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from grader import demo
from grader.paths import assignments, use_this_python

REPO = Path(__file__).resolve().parents[1]
# All assignments; COURSE_ASSIGNMENTS=a_masks,b_attention narrows a local run while authoring.
ASSIGNMENTS = [
    a for a in assignments(REPO) if a in os.environ.get("COURSE_ASSIGNMENTS", a).split(",")
]


def make_course_copy(target: Path, with_release: bool = False) -> Path:
    """Copy what a course needs (config, reference runs, source/, demo/) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", target)
    shutil.copy(REPO / "reference_runs.json", target)  # the time limits (grader.reference_run)
    folders = ["source", "demo"] + (["release"] if with_release else [])
    for folder in folders:
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, target / folder)
    return target


# Fixtures that grade a class through nbgrader or run a browser: a test that uses one is `slow`
# (`make test` runs it, `make test-fast` does not).
SLOW_FIXTURES = {"graded_class", "adversarial_class", "lab", "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _this_python() -> None:
    use_this_python()


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread() -> None:
    """Torch on one thread in the test process. The tests' tensors are small, and on a busy
    2-core machine (a grading kernel beside the tests) two threads mostly spin waiting for each
    other: 5 to 15 times the CPU time, measured. Kernels and nbgrader get their own threads."""
    import torch  # noqa: PLC0415 - torch stays out of the grader's own imports

    torch.set_num_threads(1)


# Demo students of A that other slow tests read in the graded class (the CLI's check and
# feedback, the honest students of the adversarial class, the parallel run).
NEEDED = {"a_masks": {"mask_transposed"}}


def pipeline_students(assignment: str, students: list[str] | None = None) -> list[str]:
    """The demo students graded through nbgrader by ``make test``.

    Every demo student's checks and judge run in-process in the fast tier
    (``test_checks_direct.py``); the real pipeline grades, for every assignment, the reference,
    the blank release, one other correct style (a false flag would show there) and the first
    typical mistake, plus the students of :data:`NEEDED`. ``make demo ALL=1`` grades them all.
    """
    students = students or sorted(demo.descriptions(REPO, assignment))
    described = demo.descriptions(REPO, assignment)
    correct = [s for s in students if described[s].get("expect", {}).get("full_marks")]
    kept = [s for s in correct if s == demo.REFERENCE] + [
        s for s in correct if s != demo.REFERENCE
    ][:1]
    mistakes = [s for s in students if described[s].get("expect", {}).get("fail")]
    needed = NEEDED.get(assignment, set()) & set(students)
    return sorted({demo.BLANK, *kept, *mistakes[:1], *needed})


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo class of every assignment (:func:`pipeline_students`), released, graded with 2
    jobs and with feedback."""
    root = make_course_copy(tmp_path_factory.mktemp("graded") / "course")
    demo.run(root, ASSIGNMENTS, jobs=2, say=lambda line: None, choose=pipeline_students)
    return root
