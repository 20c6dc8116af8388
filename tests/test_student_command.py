"""The student part's `course` command (course/cli.py): `course check` names every written answer
still empty, `course progress` says what is left, and the notebooks' last cell checks the saved
notebook from inside it (course.check.check_this_notebook), never while grading."""

from __future__ import annotations

import json
import re
import shutil
import sys
import types
from pathlib import Path

import IPython
import pytest

from course import check, cli
from tests.conftest import REPO

A, NB = "a_masks", "masks_and_positions.ipynb"


def test_the_report_names_every_written_answer_still_empty() -> None:
    outcomes = [
        check.Outcome("test_mask_visible", 1, "test"),
        check.Outcome("q_mask", 1, "written", empty=True, label="Question 1"),
        check.Outcome("q_order", 2, "written", label="Question 2"),
        check.Outcome("q_x", 2, "written", empty=True),
    ]
    text = check.format_outcomes(Path(NB), outcomes)
    assert "Visible tests: 1 of 1 passed." in text
    assert text.endswith(
        "Written answers: 1 of 3 written, graded by the instructor. Still empty: Question 1, q_x."
    )
    answered = check.format_outcomes(Path(NB), outcomes[:1] + [outcomes[2]])
    assert answered.endswith("Written answers: 1 of 1 written, graded by the instructor.")


def _fill(path: Path, exercise: str, answer: str) -> None:
    """Write the reference code of ``exercise`` and some words into ``answer``."""
    source = json.loads((REPO / "source" / A / NB).read_text())["cells"]
    reference = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in source
                 if "nbgrader" in c["metadata"]}  # fmt: skip
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id == exercise:
            cell["source"] = reference[exercise]
        elif grade_id == answer:
            cell["source"] = ["Because the future would leak into the prediction."]
    path.write_text(json.dumps(nb))


def test_progress_says_what_is_left_in_each_notebook(tmp_path: Path, capsys) -> None:
    (tmp_path / A).mkdir()
    shutil.copy(REPO / "release" / A / NB, tmp_path / A / NB)
    (tmp_path / "notes.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    assert cli.main(["progress", str(tmp_path)]) == 0
    before = capsys.readouterr().out
    assert f"{tmp_path / A / NB}:" in before and "notes.ipynb" not in before
    exercises, answers = cli.left_to_do(tmp_path / A / NB)
    assert exercises == [
        "generate_square_subsequent_mask",
        "make_padding_mask",
        "PositionalEncoding",
        "apply_rotary",
    ]
    assert answers == [f"Question {n}" for n in range(1, 8)]
    assert f"written answers still empty: {', '.join(answers)}" in before
    _fill(tmp_path / A / NB, "mask_solution", "q_mask_role")
    assert cli.left_to_do(tmp_path / A / NB) == (exercises[1:], answers[1:])
    assert cli.main(["progress", str(tmp_path / "nothing here")]) == 0
    assert "No notebook of the course in" in capsys.readouterr().out


@pytest.mark.parametrize("variable", ["NBGRADER_EXECUTION", "COURSE_CHECKING"])
def test_the_last_cell_does_nothing_while_grading_or_checking(
    monkeypatch, capsys, variable: str
) -> None:
    monkeypatch.setenv(variable, "1")
    monkeypatch.setattr(check, "check", lambda path: pytest.fail("checked while grading"))
    check.check_this_notebook(NB)
    assert capsys.readouterr().out == ""


class Shell:
    def __init__(self, names: dict) -> None:
        self.user_ns = names


def test_the_last_cell_finds_the_notebooks_saved_file(monkeypatch, tmp_path, capsys) -> None:
    for variable in ("NBGRADER_EXECUTION", "COURSE_CHECKING"):
        monkeypatch.delenv(variable, raising=False)
    checked: list[Path] = []
    monkeypatch.setattr(check, "check", lambda path: checked.append(path) or 0)
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "elsewhere" / "Copy of masks.ipynb"
    saved.parent.mkdir()
    saved.write_text("{}")
    # JupyterLab's session path, then VS Code's, then the handed-out name in the kernel's folder
    for names in ({"__session__": str(saved)}, {"__vsc_ipynb_file__": str(saved)}):
        monkeypatch.setattr(IPython, "get_ipython", lambda names=names: Shell(names))
        check.check_this_notebook(NB)
    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell({"__session__": "gone.ipynb"}))
    check.check_this_notebook(NB)
    assert "Cannot find this notebook's file here" in capsys.readouterr().out
    (tmp_path / NB).write_text("{}")
    check.check_this_notebook(NB)
    assert checked == [saved, saved, Path(NB)]
    # Colab: the notebook comes from the browser, into a file of its own name
    colab = types.ModuleType("google.colab")
    colab._message = types.SimpleNamespace(
        blocking_request=lambda kind, timeout_sec: {"ipynb": {"cells": [], "kind": kind}}
    )
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell({}))
    check.check_this_notebook(NB)
    assert checked[-1].name == NB and checked[-1] != Path(NB)
    assert json.loads(checked[-1].read_text()) == {"cells": [], "kind": "get_ipynb"}


def test_every_course_command_of_the_student_pages_is_one_the_student_part_has() -> None:
    """The student's pages (published with the public copy) name only what the student part's
    `course` takes."""
    found = []
    for page in ("GUIDE.md", "README.md"):
        text = (REPO / "student" / page).read_text()
        blocks = "\n".join(re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M))
        for line in re.findall(r"`([^`\n]+)`", text) + blocks.splitlines():
            words = line.split("#")[0].split()
            if len(words) > 1 and (words[0].endswith("bin/course") or words[0] == "course"):
                found.append(words[1:])
                cli.parser().parse_args(words[1:])  # exits (SystemExit) on a wrong command
    assert ["check", "NOTEBOOK.ipynb"] in found and ["progress"] in found, found
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["chek", "x.ipynb"])


def test_a_clones_copy_has_the_self_study_check_instead_of_the_releases() -> None:
    """In a clone, the learner's copy ends with the check button that runs the hidden tests too;
    the release's check cell (visible tests only) gives way to it."""
    import nbformat

    from grader.selfstudy import selfstudy_cells
    from tools import colab

    assert selfstudy_cells.CHECK_MARKER == colab.CHECK_MARKER
    release = nbformat.read(str(REPO / "release" / A / NB), as_version=4)
    assert release.cells[-1].source == colab.check_cell_source(NB)
    copy = selfstudy_cells.with_cells(release)
    assert not [c for c in copy.cells if c.source.startswith(colab.CHECK_MARKER)]
    assert "check_button" in copy.cells[-2].source and "progress" in copy.cells[-1].source
