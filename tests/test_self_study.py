"""Self-study in a clone: the hidden tests of a learner's own copy (``course check``), the model
answer after an attempt with the rubric ticked beside the notebook, and ``course progress``.

Each runs in a scratch clone (``source/``, ``release/``, ``work/`` of assignment A) so that the
learner's files are the test's own; the browser half is ``tests/e2e/test_self_study_in_lab.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from course import selfstudy_files
from grader.selfstudy import check, progress, selfcheck, selfstudy_cells
from tests.conftest import REPO
from tools import student_copy

A = "a_masks"
NB = "masks_and_positions.ipynb"
COURSE = [sys.executable, "-m", "grader.command.cli"]
# An answer that passes the visible test (size 3) and no other size: only hidden tests see it.
ONLY_THREE = (
    "def generate_square_subsequent_mask(sz: int) -> torch.Tensor:\n"
    "    mask = torch.triu(torch.full((3, 3), float('-inf')), diagonal=1)\n"
    "    return mask if sz == 3 else torch.zeros(sz, sz)\n"
)


def clone(tmp_path: Path) -> Path:
    """A clone with assignment A: its source, its release and the learner's copy (work/)."""
    root = tmp_path / "clone"
    for folder in ("source", "release"):
        shutil.copytree(REPO / folder / A, root / folder / A)
    shutil.copy(REPO / "nbgrader_config.py", root)
    student_copy.make_copy(root)
    return root


def answer(root: Path, answers: dict[str, str]) -> Path:
    """Fill the learner's copy: every code answer from the source (``answers`` overrides by
    grade id, code or written); return the notebook."""
    path = root / "work" / A / NB
    nb = nbformat.read(path, as_version=4)
    source = nbformat.read(root / "source" / A / NB, as_version=4)
    solutions = {
        c.metadata.nbgrader["grade_id"]: c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    }
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers or grade_id in solutions:
            cell.source = answers.get(grade_id, solutions.get(grade_id))
    nbformat.write(nb, path)
    return path


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_the_learners_copy_gets_a_compare_control_under_each_written_question(
    tmp_path: Path,
) -> None:
    root = clone(tmp_path)
    nb = nbformat.read(root / "work" / A / NB, as_version=4)
    release = nbformat.read(root / "release" / A / NB, as_version=4)
    written = [
        c.metadata.nbgrader["grade_id"]
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"
    ]
    assert len(written) == 7
    for i, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") in written:
            grade_id = cell.metadata.nbgrader["grade_id"]
            assert nb.cells[i + 1].source.endswith(f'compare("{grade_id}");')
    assert "check_button(" in nb.cells[-2].source and "progress()" in nb.cells[-1].source
    # the release's last cell (its check, visible tests only) gives way to the three below
    assert release.cells[-1].source.startswith(selfstudy_cells.CHECK_MARKER)
    assert len(nb.cells) == len(release.cells) - 1 + len(written) + 3
    assert len(selfstudy_cells.with_cells(nb).cells) == len(nb.cells)  # never twice
    nbformat.validate(nb)
    # the release (a graded class's notebooks) and the source are not touched
    assert (root / "release" / A / NB).read_bytes() == (REPO / "release" / A / NB).read_bytes()


def test_without_source_the_copy_is_the_release(tmp_path: Path) -> None:
    shutil.copytree(REPO / "release" / A, tmp_path / "release" / A)
    student_copy.make_copy(tmp_path)
    assert (tmp_path / "work" / A / NB).read_bytes() == (REPO / "release" / A / NB).read_bytes()


def test_check_runs_the_hidden_tests_of_a_learners_copy(tmp_path: Path) -> None:
    root = clone(tmp_path)
    path = answer(root, {"mask_solution": ONLY_THREE})
    code, text = check.check(path)
    assert code == 1, text
    assert "[PASS] test_mask_visible: 1/1" in text
    assert "[FAIL] test_mask_hidden (hidden tests): 0/2" in text
    assert "  mask: fails its hidden tests: " in text
    assert "  padding: passed" in text and "  rotary: passed" in text
    source = (root / "source" / A / NB).read_text()
    assert "_reference_mask" in source and "_reference_mask" not in text  # no hidden code shown
    record = json.loads(selfcheck.record_path(path).read_text())
    assert record["exercises"]["mask"]["visible"] and not record["exercises"]["mask"]["hidden"]
    assert record["exercises"]["pe"] == {"visible": True, "hidden": True}


def test_no_hidden_test_in_a_graded_process_or_outside_a_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = clone(tmp_path)
    learner = root / "work" / A / NB
    assert selfcheck.find_clone(learner, cwd=tmp_path) == selfcheck.Clone(
        root.resolve(), (root / "source" / A / NB).resolve()
    )
    assert selfcheck.find_clone(root / "release" / A / NB, cwd=tmp_path) is None
    alone = tmp_path / "hub-home" / A / NB  # a JupyterHub student: no source/ anywhere
    alone.parent.mkdir(parents=True)
    shutil.copy(learner, alone)
    assert selfcheck.find_clone(alone, cwd=tmp_path) is None
    assert selfstudy_files.clone_source(alone) is None
    assert selfstudy_files.clone_source(learner) == (root / "source" / A / NB).resolve()
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert selfcheck.find_clone(learner, cwd=tmp_path) is None
    assert selfstudy_files.clone_source(learner) is None


def test_the_model_answer_and_rubric_come_from_source() -> None:
    question = selfstudy_files.read_question(REPO / "source" / A / NB, "q_mask_role")
    assert question is not None and question.points == 1
    assert question.model.startswith("**Model answer.**") and "Rubric" not in question.model
    assert question.rubric == "**Rubric (1 point).**"
    assert [p for p, _ in question.items] == [0.5, 0.5]
    assert question.items[0][1].startswith("0.5: in training, the next token")
    assert "BEGIN" not in question.model + "".join(t for _, t in question.items)
    # a rubric that is not a list of points is one item worth the question's points
    whole = selfstudy_files.parse_answer("q", 2.0, "Answer.\n\n**Rubric (2 points).** 0.5 per x.")
    assert whole.items == [(2.0, "0.5 per x.")]


def test_an_answer_is_an_attempt_only_once_written() -> None:
    assert not selfstudy_files.attempted("YOUR ANSWER HERE")
    assert not selfstudy_files.attempted("  \n")
    assert selfstudy_files.attempted("The model would copy the next token.")


def test_ticks_are_kept_beside_the_notebook(tmp_path: Path) -> None:
    notebook = tmp_path / "w" / A / NB
    notebook.parent.mkdir(parents=True)
    shutil.copy(REPO / "release" / A / NB, notebook)
    before = notebook.read_bytes()
    question = selfstudy_files.read_question(REPO / "source" / A / NB, "q_causal_or_masked")
    assert question is not None
    assert selfstudy_files.save_marks(notebook, question, [0, 2]) == 1.5
    assert selfstudy_files.read_marks(notebook)["q_causal_or_masked"] == {
        "ticked": [0, 2],
        "points": 1.5,
        "of": 2.0,
    }
    assert selfstudy_files.marks_path(notebook).parent == notebook.parent
    assert notebook.read_bytes() == before  # never in the notebook


def test_progress_reads_the_learners_copy_and_says_what_next(tmp_path: Path) -> None:
    root = clone(tmp_path)
    first = progress.progress(root)
    assert "A a_masks: exercises 0/4 passed" in first
    assert "written questions 0/7 attempted, 0 self-marked" in first
    assert "Next: A: run every test" in first
    path = answer(root, {"mask_solution": ONLY_THREE, "q_mask_role": "It would copy."})
    record = {"mask": {"visible": True, "hidden": False, "message": "mask(5) is wrong"}}
    record |= {n: {"visible": True, "hidden": True} for n in ("padding", "pe", "rotary")}
    nb = nbformat.read(path, as_version=4)
    selfcheck.record(path, nb, record)
    question = selfstudy_files.read_question(root / "source" / A / NB, "q_mask_role")
    assert question is not None
    selfstudy_files.save_marks(path, question, [0, 1])
    files = snapshot(root)
    text = progress.progress(root)
    assert snapshot(root) == files  # read only
    assert "exercises 3/4 passed (visible and hidden tests)" in text
    assert "mask fails its hidden tests: mask(5) is wrong" in text
    assert "written questions 1/7 attempted, 1 self-marked" in text
    assert "1 self-marked 1 of 1" in text
    assert "Next: A, exercise mask: it fails its hidden tests" in text
    nb.cells[
        [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells].index("padding_solution")
    ].source += "\n# changed"
    nbformat.write(nb, path)
    assert "(answers changed since the last check)" in progress.progress(root)


def test_course_progress_is_a_sub_command(tmp_path: Path) -> None:
    root = clone(tmp_path)
    done = subprocess.run(
        [*COURSE, "--root", str(root), "progress"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "A a_masks: exercises 0/4 passed" in done.stdout
    shutil.rmtree(root / "work")
    done = subprocess.run(
        [*COURSE, "--root", str(root), "progress"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "`make lab` makes your copy" in done.stderr


def test_the_student_parts_check_is_the_one_a_names(tmp_path: Path) -> None:
    """Every notebook's text names `course check NOTEBOOK`, the one spelling: the student part
    installs `course` with `check` (the clone's `course` has the same, with the hidden tests);
    it runs the visible tests and names every written answer still empty."""
    for notebook in sorted((REPO / "release").glob("*/*.ipynb")):
        text = notebook.read_text()
        assert f"`course check {notebook.name}`" in text, notebook
        assert "python -m course.check" not in text and "course-check" not in text, notebook
    scripts = tomllib.loads((REPO / "student" / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"course": "course.cli:main"}
    shutil.copy(REPO / "release" / A / NB, tmp_path / NB)
    done = subprocess.run(
        [sys.executable, "-m", "course.cli", "check", NB],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FAIL] test_mask_visible\n      not implemented yet" in done.stdout
    assert "Visible tests: 0 of 4 passed." in done.stdout
    assert "Hidden tests: 4 cells, run when your work is graded" in done.stdout
    assert "Written answers: 0 of 7 written, graded by the instructor. Still empty: " in done.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "course.cli", "check", "nothing.ipynb"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "no readable notebook at" in missing.stderr


def _run_in_kernel(folder: Path, cells: list[str], env: dict[str, str]) -> str:
    """Run ``cells`` in a fresh kernel in ``folder`` (as a notebook there would); what they show:
    their outputs and those of their widgets (nbclient keeps an output widget's in its state)."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(folder)}}).execute(
        env={**os.environ, **env}
    )
    return json.dumps([cell.outputs for cell in nb.cells]) + json.dumps(nb.metadata)


COMPARE = 'from course.selfstudy import compare\nbox = compare("q_mask_role")\nprint(box is None)'
CLICK = "box.children[0].click()"
ANSWER = (
    "import json, pathlib\n"
    "path = pathlib.Path('masks_and_positions.ipynb')\n"
    "nb = json.loads(path.read_text())\n"
    "for cell in nb['cells']:\n"
    "    if cell['metadata'].get('nbgrader', {}).get('grade_id') == 'q_mask_role':\n"
    "        cell['source'] = 'Without the mask it sees the next token and copies it.'\n"
    "path.write_text(json.dumps(nb))"
)


@pytest.mark.slow  # four kernels in a clone: minutes on 2 cores
def test_compare_shows_the_model_answer_after_an_attempt_only(tmp_path: Path) -> None:
    root = clone(tmp_path)
    folder = root / "work" / A
    first = _run_in_kernel(folder, [COMPARE, CLICK], {})
    assert "False" in first and "graded by the instructor" not in first
    assert "Nothing to compare yet" in first and "Model answer" not in first
    after = _run_in_kernel(folder, [COMPARE, ANSWER, CLICK], {})
    assert "**Model answer.** The model is trained to predict" in after
    assert "Rubric (1 point)" in after and "Tick each point your answer makes" in after
    # the same notebook in a graded kernel, and where there is no source/ (a hub's student)
    graded = _run_in_kernel(folder, [ANSWER, COMPARE], {"NBGRADER_EXECUTION": "autograde"})
    home = tmp_path / "hub-home" / A
    shutil.copytree(folder, home)
    alone = _run_in_kernel(home, [COMPARE], {})
    for text in (graded, alone):
        assert "Written answers are graded by the instructor." in text and "True" in text
        assert "Model answer" not in text


def test_the_check_button_and_progress_say_nothing_outside_a_clone(tmp_path: Path) -> None:
    home = tmp_path / "hub-home" / A
    home.mkdir(parents=True)
    shutil.copy(REPO / "release" / A / NB, home / NB)
    cells = [
        "from course.selfstudy import check_button, progress\n"
        'print(check_button("test_mask_visible"))',
        "print(progress())",
    ]
    shown = _run_in_kernel(home, cells, {})
    assert "The hidden tests run when your work is graded." in shown
    assert "graded by the instructor" in shown and shown.count("None") >= 2
