"""Shared fixtures: a scratch copy of the course, with the demo class graded once per session."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from nbgrader.api import Gradebook
from xdist.scheduler import LoadScopeScheduling

from grader.coordinator import demo, pipeline
from grader.shared import report
from grader.shared.paths import assignments, use_this_python

REPO = Path(__file__).resolve().parents[1]
# tools/ on the path, as when its scripts run: they import one another by name (notebook_code)
sys.path.append(str(REPO / "tools"))


def chosen_assignments(every: list[str], setting: str | None) -> list[str]:
    """The assignments the tests run on: all of ``every``, or those that ``setting`` (the value
    of COURSE_ASSIGNMENTS, a comma-separated list) names. A name that is no assignment is an
    error, not a narrower run: a misspelt one would empty every test parametrized by assignment
    and let their loops pass on nothing."""
    if setting is None:
        chosen = list(every)
    else:
        named = [name.strip() for name in setting.split(",")]
        unknown = [name for name in named if name not in every]
        if unknown:
            raise pytest.UsageError(
                f"COURSE_ASSIGNMENTS={setting!r} names no assignment {unknown}: the assignments "
                f"are {', '.join(every)}"
            )
        chosen = [a for a in every if a in named]
    if not chosen:
        raise pytest.UsageError(f"no assignment to test in {REPO / 'source'}")
    return chosen


# All assignments; COURSE_ASSIGNMENTS=a_masks,b_attention narrows a local run while authoring.
ASSIGNMENTS = chosen_assignments(assignments(REPO), os.environ.get("COURSE_ASSIGNMENTS"))


def run_coroutine(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coroutine)`` in a thread of its own: the test's thread may hold a running
    loop (Playwright's sync API, open for the browser tests of the same worker)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def make_course_copy(target: Path, with_release: bool = False) -> Path:
    """Copy what a course needs (config, reference runs, source/, demo/) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", target)
    shutil.copy(
        REPO / "reference_runs.json", target
    )  # the time limits (grader.shared.reference_run)
    folders = ["source", "demo"] + (["release"] if with_release else [])
    for folder in folders:
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, target / folder)
    return target


def class_outcome(
    root: Path, assignment: str, notebook: str, students: list[str]
) -> dict[str, tuple]:
    """Per student of a graded course: each test cell's score, the flag, the report's status."""
    statuses = {r["student"]: r["status"] for r in report.read(root)}
    found = {}
    with Gradebook(pipeline.db_url(root)) as gb:
        for student in students:
            row = gb.find_submission_notebook(notebook, assignment, student)
            found[student] = (
                {g.name: g.score for g in row.grades},
                row.flagged,
                statuses.get(student),
            )
    return found


# Fixtures that grade a class through nbgrader or run a browser: a test that uses one is `slow`
# (`make test` runs it, `make test-fast` does not).
SLOW_FIXTURES = {"graded_class", "adversarial_class", "lab", "browser"}

# `make test` runs the suite in two processes (pytest-xdist, `-n 2`), each group of tests whole in
# one of them: the browser tests (one JupyterLab, one Chromium), otherwise a module (its
# module-scoped servers, clusters and classes start once). The two longest groups are queued
# first, one for each process; the modules that read the graded class last, when it is graded
# (`graded_class`: one process grades it, the other waits for it).
BROWSER = "tests/e2e/"
FIRST = [BROWSER, "tests/test_adversarial.py"]


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` under pytest-xdist."""
    path = nodeid.split("::")[0]
    return BROWSER if path.startswith(BROWSER) else path


class ByGroup(LoadScopeScheduling):
    """pytest-xdist's scheduling by scope, with :func:`group_of` as the scope, in the order of
    collection (:func:`pytest_collection_modifyitems`)."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (`-p no:xdist` runs without it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> ByGroup:
    return ByGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    readers = set()
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        if "graded_class" in fixtures:
            readers.add(group_of(item.nodeid))

    def order(item: pytest.Item) -> int:
        group = group_of(item.nodeid)
        return FIRST.index(group) if group in FIRST else 3 if group in readers else 2

    items.sort(key=order)


# A test that grades through nbgrader is `slow` (pyproject.toml's markers say so, `make test-fast`
# leaves them out): any other test that starts the course's `nbgrader autograde` in this process,
# cold or forked by a warm worker (grader/coordinator/nbgrader_run.py's two ways), fails, named.
GRADED_OUTSIDE_SLOW = pytest.StashKey[list[str]]()


class GradedOutsideSlow(BaseException):
    """Raised where a test not marked slow starts nbgrader's grading (BaseException: grading's
    own error handling does not turn it into a report line)."""


def _grades(arguments: list[str]) -> bool:
    """Whether a command line (or a forked nbgrader's arguments) autogrades."""
    words = [str(a) for a in arguments]
    return "autograde" in words and ("grader.nbgrader.main" in words or words[0] == "autograde")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Outside the slow tests, the nbgrader process of a grading run refuses to start."""
    if item.get_closest_marker("slow"):
        yield
        return
    from grader.shared import process_output  # noqa: PLC0415 - imported where needed
    from grader.warm.forkserver import ForkServer  # noqa: PLC0415

    started = item.stash.setdefault(GRADED_OUTSIDE_SLOW, [])

    def refuse(arguments: list[str]) -> None:
        if _grades(arguments):
            started.append(" ".join(map(str, arguments))[:200])
            raise GradedOutsideSlow(f"{item.nodeid} grades through nbgrader: mark it slow")

    popen, spawn = process_output.BoundedPopen, ForkServer.spawn

    class Refusing(popen):  # type: ignore[misc, valid-type]
        def __init__(self, args: list[str], *rest: object, **options: object) -> None:
            refuse(args)
            super().__init__(args, *rest, **options)

    def refusing_spawn(server: ForkServer, command: list[str], *rest: object) -> object:
        refuse(command)
        return spawn(server, command, *rest)

    process_output.BoundedPopen, ForkServer.spawn = Refusing, refusing_spawn
    try:
        yield
    finally:
        process_output.BoundedPopen, ForkServer.spawn = popen, spawn


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A test that started nbgrader without the slow mark fails, whatever it caught."""
    outcome = yield
    report = outcome.get_result()
    started = item.stash.get(GRADED_OUTSIDE_SLOW, [])
    if started and report.when == "call" and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} is not marked slow but grades through nbgrader ({started[0]}): "
            "mark it slow (pyproject.toml's markers)"
        )


# No test writes a tracked file (or leaves a new one that git would add): each test module runs
# between two looks at `git status`, and one that changed it fails, naming what changed.
def repository_state(root: Path = REPO) -> dict[str, tuple[int, int] | None]:
    """What ``git status`` shows in ``root`` (a tracked file changed or gone, an untracked file
    not ignored), each with its size and modification time (None when gone): a file written
    again is seen even where it was changed before. Empty where ``root`` is no git work tree
    (a copy of the files, as on the GPU machine)."""
    if not (root / ".git").exists():
        return {}
    command = ["git", "--no-optional-locks", "status", "--porcelain=v1", "-z", "-uall"]
    listed = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    entries, state = iter(listed.stdout.split("\0")), {}
    for entry in entries:
        if not entry:
            continue
        if entry[0] in "RC":
            next(entries)  # a rename's or a copy's first path
        path = root / entry[3:]
        found = path.stat() if path.exists() else None
        state[entry] = (found.st_size, found.st_mtime_ns) if found else None
    return state


def state_changes(before: dict, after: dict) -> list[str]:
    """The entries of ``git status`` (:func:`repository_state`) that differ between the two."""
    return sorted(
        entry
        for entry in before.keys() | after.keys()
        if before.get(entry, 0) != after.get(entry, 0)
    )


@pytest.fixture(scope="module", autouse=True)
def _writes_no_tracked_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test module leaves ``git status`` of the repository as it found it."""
    before = repository_state()
    yield
    if changed := state_changes(before, repository_state()):
        pytest.fail(
            f"{request.node.nodeid} (or a test running beside it, or you, during the run) "
            f"changed what git sees in the repository: {changed[:10]}. A test writes under its "
            "tmp_path, never a tracked file; a tracked record is written by its own command",
            pytrace=False,
        )


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each process's own temporary folder (``TMPDIR``): grading's scratch
    folders of one process are not seen by the other's checks for leftovers."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        folder = tempfile.mkdtemp(prefix=f"tests-{worker}-")
        os.chmod(folder, 0o755)  # as /tmp for the users tests run servers as (postgres)
        os.environ["TMPDIR"] = folder
        tempfile.tempdir = None


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(tempfile.gettempdir(), ignore_errors=True)


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
# feedback, the honest students of the adversarial class by its record, the parallel run; the pair
# who copied from each other, for the class report).
NEEDED = {"a_masks": {"mask_transposed", "copied_pair_1", "copied_pair_2"}}


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


@pytest.fixture(scope="module")
def e_given() -> dict:
    """E's read-only ``given_lm`` cell and its reference classes, run from the source notebook
    (``tests.test_devices.e_definitions``)."""
    from tests.test_devices import e_definitions  # torch: only for the tests that ask

    return e_definitions()


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo class of every assignment (:func:`pipeline_students`), released, graded with 2
    jobs and with feedback. Graded once per run: under pytest-xdist the first process that
    needs it grades it into the run's shared folder, the other waits for it (a file lock)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root, done = shared / "graded" / "course", shared / "graded" / "done"
    with FileLock(shared / "graded.lock"):
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)  # a process that failed half-way
            make_course_copy(root)
            demo.run(root, ASSIGNMENTS, jobs=2, say=lambda line: None, choose=pipeline_students)
            done.touch()
    return root


@pytest.fixture(scope="module")
def lms_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course of the LMS tests (tests/test_lms.py, tests/test_lms_gradebook.py)."""
    from tests.test_lms import build_template  # only where an LMS test asks for it

    return build_template(tmp_path_factory)


@pytest.fixture
def lms_course(lms_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of :func:`lms_template`."""
    return Path(shutil.copytree(lms_template, tmp_path / "course"))
