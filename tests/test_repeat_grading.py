"""benchmarks/repeat_grading.py: the class of references it grades, and the points it expects
(no grading here: `python benchmarks/repeat_grading.py` is the run)."""

from __future__ import annotations

import importlib.util

import yaml

from grader.coordinator import release
from tests.conftest import REPO

spec = importlib.util.spec_from_file_location(
    "repeat_grading", REPO / "benchmarks" / "repeat_grading.py"
)
repeat_grading = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repeat_grading)


def test_the_class_is_the_reference_under_many_names(tmp_path) -> None:
    names = repeat_grading.class_of_references(tmp_path, "h_own_gpt", 3)
    assert names == ["reference_000", "reference_001", "reference_002"]
    for name in names:
        student = yaml.safe_load((tmp_path / "demo" / "h_own_gpt" / f"{name}.yaml").read_text())
        assert student["expect"] == {"full_marks": True} and "code" not in student
    assert (tmp_path / "source" / "h_own_gpt" / "own_gpt.ipynb").is_file()


def test_the_expected_points_are_the_autograded_points() -> None:
    for assignment in ("a_masks", "h_own_gpt"):
        (path,) = (REPO / "source" / assignment).glob("*.ipynb")
        auto = repeat_grading.autograded_points(path)
        assert f"{auto:g} autograded" in release.worth(REPO, assignment)
