"""The rule after a graded run (grader/shared/finish.py), and both paths that reach it.

`course autograde` (grader.coordinator.grading.examine) and plain nbgrader
(grader.nbgrader.verify_points.VerifyPoints, inside nbgrader's process) settle each notebook with
the same finish_notebook(). Here both are run on two copies of one small graded course (a gradebook
with two test cells, a source and a graded notebook, no kernel): with a tampering finding, a judge's
verdict, a quota breach, a runaway cell, they must write the same gradebook scores and the same
report line. The whole class graded both ways through nbgrader: tests/test_plain_nbgrader.py (slow).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook
from traitlets.config import Config

from grader.coordinator import grading
from grader.coordinator.nbgrader_run import Run
from grader.nbgrader import verify_points
from grader.shared import quota, report, tampering
from grader.shared.finish import TIMED_OUT, finish_notebook, status_of
from grader.shared.verification import Verification

# nbgrader's add_submission warns of its own session's autoflush (nbgrader/api.py, 0.9).
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")

A, NB, STUDENT = "a_demo", "nb", "ada"
CELLS = {"test_one": 2.0, "test_two": 3.0}  # grade id -> max points, both earned in the kernel
MARKED = f"{tampering.MARKER}: check was replaced"
STOPPED = "cell test_two ran past the time limit (3 s) and ignored the interrupt"
# Modules only the coordinator runs: nbgrader's process must not load them.


def graded_notebook(marker: bool) -> nbformat.NotebookNode:
    """The notebook as graded: the source's cell, with the run-time marker in its output."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    if marker:
        cell.outputs = [nbformat.v4.new_output("error", ename="E", evalue=MARKED, traceback=[])]
    nb.cells = [cell]
    return nb


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A graded course: gradebook (both cells earned), source, submission, graded notebook."""
    root = tmp_path_factory.mktemp("finish") / "base"
    for folder in ("source", "submitted", "autograded"):
        path = root / folder / (STUDENT if folder != "source" else "") / A / f"{NB}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(graded_notebook(False), str(path))
    with Gradebook(url(root)) as gb:
        gb.add_assignment(A)
        gb.add_notebook(NB, A)
        for cell, points in CELLS.items():
            gb.add_grade_cell(cell, NB, A, max_score=points, cell_type="code")
        gb.add_student(STUDENT)
        gb.add_submission(A, STUDENT)
        for cell, points in CELLS.items():
            gb.find_grade(cell, NB, A, STUDENT).auto_score = points
        gb.db.commit()
    return root


def course(base: Path, root: Path, marker: bool = False, big_file: bool = False) -> Path:
    """A copy of ``base`` at ``root``, its graded notebook marked and its folder over a 1 MB quota
    as asked."""
    shutil.copytree(base, root)
    graded = root / "autograded" / STUDENT / A
    nbformat.write(graded_notebook(marker), str(graded / f"{NB}.ipynb"))
    if big_file:
        (graded / "weights.bin").write_bytes(b"\0" * (2 * quota.MB))
    return root


def url(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def scores(root: Path) -> tuple[dict[str, float], bool]:
    with Gradebook(url(root)) as gb:
        row = gb.find_submission_notebook(NB, A, STUDENT)
        return {g.name: g.score for g in row.grades}, row.flagged


def by_course(root: Path, verdict: Verification | None, stopped: str) -> report.Event:
    """`course autograde`'s rule: the quota on the submission's folder, then examine."""
    folder = root / "autograded" / STUDENT / A
    over = quota.enforce(folder, 1, [f"{NB}.ipynb"])
    run = Run(True, 1.0, stopped, {NB} if stopped else set())
    job = SimpleNamespace(root=root, assignment=A, sandboxed=True)
    verdicts = {NB: verdict} if verdict else {}
    [event] = grading.examine(job, STUDENT, url(root), verdicts, run, over)
    return event


def by_plain(root: Path, verdict: Verification | None, stopped: str, monkeypatch) -> dict:
    """Plain nbgrader's rule: VerifyPoints as nbgrader runs it, last, on the graded notebook."""
    monkeypatch.setattr(verify_points, "judge_alone", lambda *args: verdict)
    config = Config()
    config.CourseDirectory.root = str(root)
    config.Limits.disk_mb = 1
    info = {"assignment": A, "student": STUDENT, "notebook": NB, "db_url": url(root)}
    course_notes = {"seed": 1, **({"stopped": stopped} if stopped else {})}
    nb = nbformat.read(str(root / "autograded" / STUDENT / A / f"{NB}.ipynb"), as_version=4)
    verify_points.VerifyPoints(config=config).preprocess(
        nb, {"nbgrader": info, "course": course_notes}
    )
    [line] = report.read(root)
    return line


CASES = {
    "graded": ({}, None, "", "graded"),
    "tampering": ({"marker": True}, None, "", "flagged"),
    "judge": ({}, Verification({"test_two": "the mask lets the future through"}), "", "flagged"),
    "refused": ({}, Verification(refused="no observations"), "", "flagged"),
    "quota": ({"big_file": True}, None, "", quota.STATUS),
    "stopped": ({}, None, STOPPED, TIMED_OUT),
    "stopped_over_quota": ({"big_file": True}, None, STOPPED, TIMED_OUT),
    "tampering_over_quota": ({"marker": True, "big_file": True}, None, STOPPED, "flagged"),
}


@pytest.mark.parametrize("case", CASES)
def test_both_paths_give_the_same_line_and_scores(
    case: str, base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made, verdict, stopped, status = CASES[case]
    first = course(base, tmp_path / "course", **made)
    shutil.copytree(first, tmp_path / "plain")
    event = by_course(first, verdict, stopped)
    line = by_plain(tmp_path / "plain", verdict, stopped, monkeypatch)
    assert event.status == line["status"] == status
    assert report._text(event.detail) == line["detail"]
    assert report._text(event.points) == line["points"]
    assert scores(first) == scores(tmp_path / "plain")
    assert not (tmp_path / "plain" / "autograded" / STUDENT / A / "weights.bin").exists()


def test_the_rule_zeroes_tampering_and_keeps_what_the_judge_upholds(
    base: Path, tmp_path: Path
) -> None:
    root = course(base, tmp_path / "flagged", marker=True)
    graded = graded_notebook(marker=True)
    event = finish_notebook(url(root), root, A, STUDENT, NB, graded, verdict=None, over="",
                            stopped=False, note="a note", notes=["more"])  # fmt: skip
    assert (event.status, event.points, event.max_points) == ("flagged", 0.0, 5.0)
    assert event.detail == f"{MARKED}; a note; more"
    assert scores(root) == ({"test_one": 0.0, "test_two": 0.0}, True)
    other = course(base, tmp_path / "judged")
    verdict = Verification({"test_one": None, "test_two": "wrong"})
    event = finish_notebook(url(other), other, A, STUDENT, NB, graded_notebook(False),
                            verdict=verdict, over="", stopped=False, note="")  # fmt: skip
    assert event.detail == "test_two passed in the notebook but fails the trusted check: wrong"
    assert scores(other) == ({"test_one": 2.0, "test_two": 0.0}, True)


def test_the_status_order() -> None:
    assert status_of(["why"], True, "too big") == "flagged"
    assert status_of([], True, "too big") == TIMED_OUT
    assert status_of([], False, "too big") == quota.STATUS
    assert status_of([], False, "") == "graded"


def test_nbgrader_s_process_loads_none_of_the_coordinator() -> None:
    """What `import grader.nbgrader.verify_points` loads (nbgrader_config.py names it), imports
    included."""
    code = "import sys, grader.nbgrader.verify_points; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "grader.shared.finish" in loaded
    wrong = {name for name in loaded if name.startswith("grader.coordinator")}
    assert not wrong, sorted(wrong)
