"""The notebooks themselves: clean, consistent, in step with source/, and runnable."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from grader.coordinator import pipeline
from grader.shared.notebooks import read_notebook
from tests.conftest import ASSIGNMENTS, REPO, make_course_copy

SOURCES = sorted(REPO.glob("source/*/*.ipynb"))
RELEASES = sorted(REPO.glob("release/*/*.ipynb"))


def test_there_are_assignments() -> None:
    assert "a_masks" in ASSIGNMENTS
    assert len(SOURCES) == len(RELEASES) >= len(ASSIGNMENTS)


@pytest.mark.parametrize("path", SOURCES + RELEASES, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_without_outputs(path: Path) -> None:
    nb = read_notebook(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"outputs in {path}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_graded_cells_are_well_formed(path: Path) -> None:
    ids = []
    for cell in read_notebook(path).cells:
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        ids.append(meta["grade_id"])
        if meta.get("grade"):
            assert meta.get("points", 0) > 0, f"{meta['grade_id']} has no points"
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in cell.source, f"{meta['grade_id']}: no solution region"
    assert len(ids) == len(set(ids)), f"duplicate grade_ids in {path}"
    hidden = [i for i in ids if "hidden" in i]
    assert hidden, f"{path} has no hidden test cells"


def test_release_is_generated_from_source(tmp_path: Path) -> None:
    root = make_course_copy(tmp_path / "course")
    for assignment in ASSIGNMENTS:
        pipeline.release(root, assignment)
        for fresh in sorted((root / "release" / assignment).glob("*.ipynb")):
            committed = REPO / "release" / assignment / fresh.name
            assert committed.exists(), f"{committed} is missing: run `make release`"
            a, b = read_notebook(fresh), read_notebook(committed)
            assert [(c.cell_type, c.source, c.metadata) for c in a.cells] == [
                (c.cell_type, c.source, c.metadata) for c in b.cells
            ], f"{committed} is out of date with source/: run `make release` and commit"


def test_release_matches_source_stub_for_stub() -> None:
    for release_path in RELEASES:
        nb = nbformat.read(str(release_path), as_version=4)
        text = "\n".join(c.source for c in nb.cells)
        assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
        assert "Model answer" not in text and "Rubric" not in text, f"{release_path}: answers leak"
