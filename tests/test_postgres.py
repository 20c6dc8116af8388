"""A PostgreSQL gradebook: a real server on a Unix socket, graded into with 2 jobs.

The server is Debian's PostgreSQL (``make setup`` installs it), started for this module by
``initdb``/``pg_ctl`` in a temporary folder (as the ``postgres`` user when the tests run as
root: initdb refuses root), listening on a Unix socket only, and stopped at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.coordinator import demo, pipeline
from grader.shared.paths import CourseError
from tests.conftest import make_course_copy

ASSIGNMENT, NOTEBOOK = "a_masks", "masks_and_positions"
STUDENTS = ["reference", "blank", "mask_transposed", "alt_correct"]


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Callable[[str], str]]:
    """A fresh PostgreSQL server on a private Unix socket: a function that creates a database
    and gives its URL."""
    # Debian: /usr/lib/postgresql/VERSION/bin; Fedora and others: on PATH
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or [
        Path(p) for p in [shutil.which("initdb")] if p
    ]
    assert bins, "PostgreSQL is not installed: run `make setup` (README.md: each system)"
    bindir = bins[-1].parent
    base = Path(tempfile.mkdtemp(prefix="course-pg-"))  # short: a socket path has 107 bytes
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sockets, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(*command: object) -> None:
        subprocess.run([*as_postgres, *map(str, command)], check=True, capture_output=True)

    def database(name: str) -> str:
        run(bindir / "createdb", "-h", sockets, "-U", "postgres", name)
        return f"postgresql+psycopg2://postgres@/{name}?host={sockets}"

    run(bindir / "initdb", "-D", data, "--auth=trust", "-U", "postgres")
    options = f"-k {sockets} -c listen_addresses=''"
    run(bindir / "pg_ctl", "-D", data, "-o", options, "-l", base / "log", "-w", "start")
    try:
        yield database
    finally:
        run(bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: Callable[[str], str], request: pytest.FixtureRequest) -> str:
    """The URL of an empty database of its own for each test: each runs alone, in any order."""
    return postgres_server(re.sub(r"\W", "_", request.node.name).lower()[:60])


def scores(url: str, student: str) -> dict[str, float]:
    with Gradebook(url) as gb:
        nb = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
        return {g.name: g.score for g in nb.grades}


def course_on(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A course whose gradebook is ``url``, with A released and its demo class submitted."""
    monkeypatch.setenv("COURSE_DB", url)
    root = make_course_copy(tmp_path / "course")
    pipeline.release(root, ASSIGNMENT)
    demo.build_class(root, ASSIGNMENT)
    return root


def test_a_class_graded_in_parallel_into_postgresql(
    postgres_url: str,
    graded_class: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every score equals the sqlite run's; the table reads from the server."""
    root = course_on(postgres_url, tmp_path, monkeypatch)
    graded = pipeline.autograde(root, ASSIGNMENT, jobs=2, students=STUDENTS)
    assert all(g.ok for g in graded), [g.message for g in graded]
    assert not (root / "gradebook.db").exists(), "an sqlite gradebook was written"
    sqlite_url = pipeline.db_url(graded_class)
    for student in STUDENTS:
        assert scores(postgres_url, student) == scores(sqlite_url, student), student
    rows = {r.student: r for r in pipeline.grade_rows(root) if r.assignment == ASSIGNMENT}
    sqlite_rows = {
        r.student: r for r in pipeline.grade_rows(graded_class) if r.assignment == ASSIGNMENT
    }
    for student in STUDENTS:  # the table reads the same scores from the server
        assert rows[student].auto_score == sqlite_rows[student].auto_score, student
    assert rows["blank"].auto_score == 0 < rows["reference"].auto_score


def test_an_unreachable_database_is_one_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-server-here"
    monkeypatch.setenv("COURSE_DB", f"postgresql+psycopg2://ann:secret@/gradebook?host={missing}")
    root = make_course_copy(tmp_path / "course")
    (root / "submitted" / "ann" / ASSIGNMENT).mkdir(parents=True)
    with pytest.raises(CourseError, match="cannot open the gradebook database") as caught:
        pipeline.autograde(root, ASSIGNMENT, students=["ann"])
    assert "secret" not in str(caught.value)


def test_a_local_cluster_grades_into_postgresql(
    postgres_url: str,
    graded_class: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dask workers grade from the server's snapshot; the coordinator merges into the server."""
    root = course_on(postgres_url, tmp_path, monkeypatch)  # its own database, empty
    students = ["mask_transposed", "alt_correct"]
    graded = pipeline.autograde(root, ASSIGNMENT, students=students, cluster="local:2")
    assert all(g.ok for g in graded), [g.message for g in graded]
    for student in students:
        assert scores(postgres_url, student) == scores(pipeline.db_url(graded_class), student)
