"""The fast tier of the demo class: each student's code fed straight into the test cells.

The same expectations as ``test_demo_class.py`` (the set of test cells a student fails, and a word
each failure message must contain), but with no nbgrader, no kernel and no subprocess: the notebooks
are built by ``grader.coordinator.demo`` and their cells run in this process
(:mod:`tests.direct_run`), in grading mode. A typical mistake must be named by the checks that
target it, every correct style accepted, the reference pass everything and the blank release fail
every test cell because of its stubs alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.coordinator import demo
from grader.report import class_report
from tests.conftest import ASSIGNMENTS, REPO
from tests.direct_run import (
    TEST,
    Outcome,
    build_classes,
    like_a_kernel,
    run_student,
)

STUDENTS = [(a, s) for a in ASSIGNMENTS for s in demo.descriptions(REPO, a)]
STUB = "NotImplementedError"


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every demo student's notebooks of every assignment, built as ``course demo`` builds them."""
    return build_classes(tmp_path_factory.mktemp("direct"), REPO, ASSIGNMENTS)


def report(outcomes: list[Outcome]) -> str:
    """One line per test cell (passed, or its message) and per other cell that raised."""
    lines = []
    for o in outcomes:
        if o.kind == TEST:
            lines.append(f"{o.cell}: {'FAILED ' + o.message[:300] if o.message else 'passed'}")
        elif o.ename:
            lines.append(f"({o.kind} {o.cell} raised {o.ename}: {o.message[:300]})")
    return "\n".join(lines)


@pytest.mark.parametrize(("assignment", "student"), STUDENTS, ids=[f"{a}-{s}" for a, s in STUDENTS])
def test_checks_grade_the_student_as_described(
    submitted: Path, monkeypatch: pytest.MonkeyPatch, assignment: str, student: str
) -> None:
    monkeypatch.setenv("COURSE_FAST", "1")
    monkeypatch.chdir(submitted / student / assignment)  # a kernel's working folder
    namespaces: list[dict] = []
    outcomes = run_student(submitted, REPO, assignment, student, namespaces)
    tests = {o.cell: o for o in outcomes if o.kind == TEST}
    lost = {gid for gid, o in tests.items() if o.message}
    expect = demo.descriptions(REPO, assignment)[student].get("expect", {})
    where = f"{assignment}/{student}:\n{report(outcomes)}"
    assert tests, f"no test cell ran for {where}"

    if student == demo.REFERENCE:
        raised = [o.cell for o in outcomes if o.ename]
        assert not raised, f"the reference solutions raise in {raised}: {where}"
    if expect.get("full_marks"):
        assert not lost, f"should pass every test cell: {where}"
    elif expect.get("zero"):
        assert lost == set(tests), f"should fail every test cell: {where}"
        # every test cell raises the stubs' NotImplementedError; no other cell raises anything else
        other = [o.cell for o in outcomes if (o.kind == TEST or o.ename) and o.ename != STUB]
        assert not other, f"cells fail for another reason than the stubs ({other}): {where}"
    else:
        targeted = set(expect["fail"])
        assert lost == targeted, f"expected to fail exactly {sorted(targeted)}: {where}"
        word = expect["message"].lower()
        for gid in sorted(targeted):
            message = tests[gid].message.lower()
            assert word in message, f"{gid} should name '{word}': {message}\n{where}"

    # The trusted judge agrees with the notebook's own tests, cell by cell
    # (grader.shared.verification).
    if (REPO / "judge" / f"{assignment}.py").is_file():
        (namespace,) = namespaces
        verdicts, mistakes = judged(assignment, namespace, submitted / student / assignment)
        assert set(verdicts) == set(tests), f"the judge must cover every test cell: {where}"
        disagree = {gid: verdicts[gid] for gid in tests if bool(verdicts[gid]) != (gid in lost)}
        assert not disagree, f"the judge disagrees with the notebook on {disagree}: {where}"
        assert set(mistakes) == {gid for gid, v in verdicts.items() if v}, where
        if expect.get("fail") and not all(
            m["key"].startswith("raised:") for m in mistakes.values()
        ):
            # the class report counts it under a mistake named by its key
            assert_named(mistakes, expect["message"].lower(), where)
        elif expect.get("fail"):  # only errors observed (nothing to name): by what was raised
            assert all(m["message"].startswith("the code raised") for m in mistakes.values())


def assert_named(mistakes: dict[str, dict[str, str]], word: str, where: str) -> None:
    """A typical mistake is recorded by the judge under a named mistake's key (not a generic
    check's), whose message names it."""
    named = {gid: m for gid, m in mistakes.items() if not class_report.is_generic(m["key"])}
    assert any(word in m["message"].lower() for m in named.values()), (
        f"no named mistake with '{word}' among {mistakes}: {where}"
    )
    for gid, mistake in named.items():
        assert "+" in mistake["key"] and not any(ch.isspace() for ch in mistake["key"]), gid


def judged(
    assignment: str, namespace: dict, folder: Path
) -> tuple[dict[str, str | None], dict[str, dict[str, str]]]:
    """The judge's verdicts on what the kernel-side observation reads in ``namespace``, and
    the mistakes it recorded (key and message by failed cell)."""
    from course import verify
    from judge import core

    seed = 20261123
    path = folder / "observations.pt"
    with like_a_kernel():
        verify.observe(assignment, seed, str(path), namespace)
    return core.verdicts_and_mistakes(assignment, seed, core.load(str(path)))
