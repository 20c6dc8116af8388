"""Release, regrade and export, the term's commands of more than one step: a release that holds
back an assignment whose handed-in work it would change, a regrade that keeps the hand grades and
says whose points moved (docs/term.md), the grades exported for an LMS only once final. Each says
what it does through ``say`` (the command line passes ``print``) and returns the exit code; the
command line (:mod:`grader.command`) only parses and calls them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from grader.coordinator import pipeline
from grader.coordinator.release import worth
from grader.lms import export
from grader.shared.paths import CourseError, require_assignment
from grader.term import address as where
from grader.term import final, midterm


def release(
    root: Path, chosen: list[str], force: bool, clone_only: bool, say: Callable[[str], None] = print
) -> int:
    """Release each of ``chosen``; 1 when one with submissions would change and ``force`` is not
    given (nothing of it is written then), else 0."""
    for name in chosen:
        require_assignment(root, name)
    address = where.require(root, clone_only)
    held = 0
    for name in chosen:
        handed_in = midterm.has_submissions(root, name)
        lines = midterm.changes(root, name, address) if handed_in else []
        if lines and not force:
            say(f"{name}: {len(handed_in)} students have handed in; a release would change:")
            say("\n".join(f"  {line}" for line in lines))
            then = f"`course release {name} --force`, then `course regrade {name}`"
            say(f"  nothing released: {then} (docs/term.md, a fix in the middle of a term)")
            held += 1
            continue
        path = pipeline.release(root, name)
        where.address_release(root, name, address)
        say(f"{name} is worth {worth(root, name)}")
        if lines:
            midterm.log_release(root, name, lines)
            say(f"released {path}: {len(lines)} cells changed; now `course regrade {name}`")
        else:
            say(f"released {path}")
    return 1 if held else 0


def regrade(root: Path, assignment: str, jobs: int, say: Callable[[str], None] = print) -> int:
    """Grade every submission of ``assignment`` again, keeping the hand grades; 1 when one was
    not graded (its earlier points kept), else 0."""
    before = midterm.scores(root, assignment)
    if not before:
        raise CourseError(f"nothing of {assignment} is graded yet: `course autograde` it")
    by_hand = midterm.hand_graded(root, assignment)
    results = pipeline.autograde(root, assignment, jobs=jobs)
    failed = [g.student for g in results if not g.ok]
    kept = midterm.keep_hand_graded(root, assignment, by_hand)
    lines = midterm.moved(before, midterm.scores(root, assignment))
    say(f"regraded {len(results)} submissions of {assignment}; {kept} written answers "
        "graded by hand kept as graded, with their comments")  # fmt: skip
    say("\n".join(lines) if lines else "no student's points changed")
    if failed:
        say(f"NOT GRADED (their earlier points kept): {', '.join(failed)}")
    return 1 if failed else 0


def export_grades(
    root: Path,
    lms: str,
    out: Path,
    missing: str,
    chosen: list[str],
    gradebook: Path | None,
    allow_ungraded: bool,
    say: Callable[[str], None] = print,
) -> int:
    """``course grades --lms``: the grades of ``chosen`` (``NAME[=COLUMN]``; none: each one with a
    submission) written to ``out`` for ``lms``, only once final unless ``allow_ungraded``; 1 when
    a grade was not written, else 0."""
    names = [c.partition("=")[0].strip() for c in chosen]
    waiting = final.require_final(root, names, allow_ungraded, lms)
    written: set[tuple[str, str]] = set()
    path, left = export.export(root, lms, out, missing, chosen, gradebook, written)
    say(f"grades written to {path} for import into {lms.title()}")
    for line in final.exported_anyway(waiting, written):
        say(line)
    for line in left:
        say(f"  not written: {line}")
    return 1 if left else 0
