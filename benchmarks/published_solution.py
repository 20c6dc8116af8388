"""How close independent correct answers and disguised copies come to the published solution.

    python benchmarks/published_solution.py [--assignment a_masks ...]

The course is open: ``source/`` (the solutions) is public. ``course report`` marks an exercise
where a submission's tokens lie in passages of the published solution at least
``similarity.PUBLISHED_SHARE``, on exercises whose solution has ``PUBLISHED_TOKENS`` tokens or
more. This measures both sides on every exercise of each assignment, from the repository alone
(nothing is graded):

- independent correct answers: each demo student who gets full marks in another style
  (``demo/*/alt_correct*.yaml``), on the exercises its description writes itself;
- copies: the reference solution with every name the student chose renamed, its comments and
  docstrings rewritten and a comment line added (``copy``), and the same with a harmless
  statement slipped in after every third line (``copy+``).

Prints one line per exercise (tokens of its solution, then the largest share of an independent
answer and the smallest of each kind of copy) and the counts of marks; exits 1 when an
independent answer is marked or a ``copy`` on a long exercise is not.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from pathlib import Path

from grader.coordinator import class_report, similarity
from grader.coordinator.submission import fill, read_description, reference_code
from grader.shared.notebooks import read_notebook
from grader.shared.paths import assignments, load_config, release_notebooks

REPO = Path(__file__).resolve().parents[1]


def own_code(nb: object, stubs: dict[str, set[str]], change: object = None) -> dict[str, list]:
    """By solution cell, the tokens written in it (the stub's lines left out, as the report),
    after ``change`` (a function of the cell's code) where given."""
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        stub = stubs.get(meta.get("grade_id", ""))
        if stub is not None and cell.cell_type == "code":
            code = change(cell.source) if change else cell.source
            found[meta["grade_id"]] = similarity.own_tokens([(code, stub)])
    return found


def disguise(code: str, extra: bool, given: set[str]) -> str:
    """The code with each name the student chose renamed (not those the release gives:
    ``given``, the graded function, its arguments), comments rewritten, a comment line added;
    with ``extra``, a harmless statement after every third line."""
    out, after_dot = [], False
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        text = tok.string
        chosen = text not in similarity.KEPT_NAMES and text not in given
        if tok.type == tokenize.NAME and not after_dot and chosen:
            text = f"my_{text}"
        elif tok.type == tokenize.COMMENT:
            text = "# my own note"
        out.append(tok._replace(string=text))
        after_dot = tok.string == "."
    lines = tokenize.untokenize(out).splitlines()
    if extra:
        lines = [
            line + (f"\n{re.match(r' *', line).group(0)}_unused = {n}" if n % 3 == 2 else "")
            for n, line in enumerate(lines)
        ]
    return "# written by me\n" + "\n".join(lines)


def measure(root: Path, assignment: str) -> list[tuple[str, int, float, float, float]]:
    rows = []
    config = load_config(root)
    for name in release_notebooks(root, assignment):
        release = read_notebook(root / "release" / assignment / f"{name}.ipynb")
        source = read_notebook(root / "source" / assignment / f"{name}.ipynb")
        cells = [class_report._cell(c) for c in release.cells]
        stubs = {c["id"]: class_report._lines(c["source"]) for c in cells if c["solution"]}
        exercises = class_report.exercises_of(name, cells)
        filled = read_notebook(root / "release" / assignment / f"{name}.ipynb")
        fill(filled, reference_code(source, config))
        reference = own_code(filled, stubs)
        given = {w for stub in stubs.values() for line in stub for w in re.findall(r"\w+", line)}
        copies = {
            kind: own_code(filled, stubs, lambda code, e=extra, g=given: disguise(code, e, g))
            for kind, extra in (("copy", False), ("copy+", True))
        }
        variants = []
        for path in sorted((root / "demo" / assignment).glob("alt_correct*.yaml")):
            nb = read_notebook(root / "release" / assignment / f"{name}.ipynb")
            fill(nb, read_description(path)["code"])
            variants.append(own_code(nb, stubs))
        for exercise in exercises:
            solution = [t for c in exercise.solutions for t in reference.get(c, [])]
            if not solution:
                continue
            length = len(solution)
            independent = [[t for c in exercise.solutions for t in v.get(c, [])] for v in variants]
            shares = [similarity.published_share(v, solution) for v in independent if v]
            copy, more = (
                similarity.published_share(
                    [t for c in exercise.solutions for t in copies[kind].get(c, [])], solution
                )
                for kind in ("copy", "copy+")
            )
            rows.append((f"{assignment}/{exercise.name}", length, max(shares, default=-1),
                         copy, more, len(shares)))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", action="append", help="default: every assignment")
    args = parser.parse_args()
    share, least = similarity.PUBLISHED_SHARE, similarity.PUBLISHED_TOKENS
    print(f"marked: share >= {share:.0%} on exercises of >= {least} tokens")
    print(f"{'exercise':34} tokens  independent(max, n)  copy  copy+")
    counts = {"independent": [0, 0], "copy": [0, 0], "copy+": [0, 0]}
    for assignment in args.assignment or assignments(REPO):
        for exercise, length, best, copy, more, n in measure(REPO, assignment):
            long = length >= least
            shown = f"{best:6.0%} ({n})" if n else "     -    "
            print(f"{exercise:34} {length:6}  {shown:>19}  {copy:4.0%}  {more:5.0%}"
                  + ("" if long else "  (short: never marked)"))  # fmt: skip
            if long:
                counts["independent"][0] += n and best >= share
                counts["independent"][1] += n
                counts["copy"][0] += copy >= share
                counts["copy"][1] += 1
                counts["copy+"][0] += more >= share
                counts["copy+"][1] += 1
    for kind, (marked, total) in counts.items():
        unit = "exercises with an independent answer" if kind == "independent" else "exercises"
        print(f"{kind}: marked on {marked} of {total} long {unit}")
    ok = counts["independent"][0] == 0 and counts["copy"][0] == counts["copy"][1]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
