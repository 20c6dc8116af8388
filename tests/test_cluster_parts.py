"""The parts of cluster grading that need no cluster: addresses, file transfer, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.command import cli
from grader.coordinator import cluster
from grader.shared.paths import CourseError
from tests.conftest import make_course_copy


def test_local_n_and_scheduler_addresses() -> None:
    assert cluster.parse_cluster("local:3") == 3
    assert cluster.parse_cluster("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    for wrong in ("local:0", "local:two", "local:"):
        with pytest.raises(CourseError, match="local:N"):
            cluster.parse_cluster(wrong)


def test_cluster_option_wants_local_n(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = make_course_copy(tmp_path / "course")
    code = cli.main(["--root", str(root), "autograde", "a_masks", "--cluster", "tcp://x:1"])
    assert code == 2
    assert "--cluster expects local:N" in capsys.readouterr().err


def test_an_unreachable_scheduler_is_one_clear_message() -> None:
    with pytest.raises(CourseError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        cluster.connect("tcp://127.0.0.1:9", timeout="1s")


def test_files_travel_without_links_and_stay_inside(tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    (folder / "data").mkdir(parents=True)
    (folder / "nb.ipynb").write_text("{}")
    (folder / "data" / "x.txt").write_text("x")
    (folder / "link").symlink_to("/etc/passwd")
    (folder / "linked_dir").symlink_to(folder / "data")
    files = cluster.read_submission(folder)
    assert files == {"data/x.txt": b"x", "nb.ipynb": b"{}"}
    target = tmp_path / "copy"
    cluster._write_files(target, files)
    assert (target / "data" / "x.txt").read_text() == "x"
    for hostile in ("../escape.txt", "/etc/cron.d/x", "a/../../b"):
        with pytest.raises(CourseError, match="refused a file path"):
            cluster._write_files(target, {hostile: b"!"})
    assert not (tmp_path / "escape.txt").exists()


def test_a_huge_submission_is_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "MAX_SUBMISSION_MB", 1)
    (tmp_path / "big.bin").write_bytes(b"0" * (2 * 2**20))
    with pytest.raises(CourseError, match="more than 1 MB"):
        cluster.read_submission(tmp_path)


def test_the_fingerprint_follows_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    first = cluster.fingerprint()
    assert first == cluster.fingerprint() and first.startswith("0.1.0+")
    monkeypatch.setattr(cluster, "PACKAGES", ("course", "grader"))
    assert cluster.fingerprint() != first


def test_a_task_refuses_a_worker_with_other_code() -> None:
    task = cluster.Task(
        assignment="a_masks", student="ann", submission={}, source={}, config=b"",
        gradebook=b"", limits={}, times=None, sandboxed=True, threads=1, expected="0+other",
    )  # fmt: skip
    with pytest.raises(CourseError, match="this worker runs course .* the coordinator 0\\+other"):
        cluster.grade_task(task)
