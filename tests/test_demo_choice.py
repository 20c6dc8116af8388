"""Which demo students ``course demo`` grades: a representative class, or all with ``--all``."""

from __future__ import annotations

import pytest

from grader.command.cli import parser
from grader.coordinator import demo
from tests.conftest import ASSIGNMENTS, REPO


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_representative_class(assignment: str) -> None:
    described = demo.descriptions(REPO, assignment)
    chosen = demo.representative(REPO, assignment)
    expect = {s: described[s].get("expect", {}) for s in chosen}
    assert {demo.REFERENCE, demo.BLANK} <= set(chosen)
    styles = [s for s in chosen if expect[s].get("full_marks") and s != demo.REFERENCE]
    assert len(styles) == 1, chosen
    mistakes = [s for s in chosen if expect[s].get("fail")]
    assert len(mistakes) == demo.MISTAKES, chosen
    # each mistake shown fails a test cell that the ones before it do not
    covered: set[str] = set()
    for student in mistakes:
        assert set(expect[student]["fail"]) - covered, student
        covered |= set(expect[student]["fail"])
    assert len(chosen) < len(described)


def test_demo_grades_all_students_with_all() -> None:
    assert parser().parse_args(["demo", "--all"]).all
    assert not parser().parse_args(["demo"]).all
