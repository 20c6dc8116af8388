"""How close independent correct answers and disguised copies come to the published solution.

    python benchmarks/published_solution.py [--assignment a_masks ...]

The course is open: ``source/`` (the solutions) is public. ``course report`` marks an exercise
where a submission's tokens lie in passages of the published solution at least
``similarity.PUBLISHED_SHARE``, on exercises whose solution has ``PUBLISHED_TOKENS`` tokens or
more. This measures both sides on every exercise of each assignment, from the repository alone
(nothing is graded):

- independent correct answers: each demo student who gets full marks in another style
  (``demo/*/alt_correct*.yaml``), on the exercises its description writes itself, and two more
  of A's long exercises written for this measurement (:data:`WRITTEN_HERE`, each checked equal
  to the reference's outputs);
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

from grader.coordinator.submission import fill, read_description, reference_code
from grader.report import class_report, similarity
from grader.shared.notebooks import read_notebook
from grader.shared.paths import assignments, load_config, release_notebooks

REPO = Path(__file__).resolve().parents[1]

PE_1 = """class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        rows = []
        for pos in range(max_len):
            row = []
            for i in range(0, d_model, 2):
                angle = pos / (10000 ** (i / d_model))
                row += [math.sin(angle), math.cos(angle)]
            rows.append(row[:d_model])
        self.register_buffer("pe", torch.tensor(rows, dtype=torch.float32))

    def forward(self, x):
        length = x.shape[1]
        return self.dropout(x + self.pe[:length])
"""
PE_2 = """class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        steps = torch.linspace(0, max_len - 1, max_len, dtype=torch.float64).view(-1, 1)
        rates = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        angle = (steps * rates).unsqueeze(-1)
        both = torch.cat([angle.sin(), angle.cos()], -1)
        self.register_buffer("pe", both.flatten(1).to(torch.float32))

    def forward(self, x):
        out = x + self.pe.narrow(0, 0, x.size(1))
        return self.dropout(out)
"""
ROT_1 = """def apply_rotary(x, base=10000.0):
    L, d = x.shape[-2:]
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    t = torch.einsum("m,i->mi", torch.arange(L, dtype=torch.float64), inv)
    c = torch.repeat_interleave(t.cos(), 2, dim=-1).to(x.dtype)
    s = torch.repeat_interleave(t.sin(), 2, dim=-1).to(x.dtype)
    swapped = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).reshape(x.shape)
    return x * c + swapped * s
"""
ROT_2 = """def apply_rotary(x, base=10000.0):
    seq, dim = x.shape[-2], x.shape[-1]
    result = torch.empty_like(x)
    for k in range(dim // 2):
        freq = base ** (-(2 * k) / dim)
        ang = torch.arange(seq, dtype=torch.float64) * freq
        co, si = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
        ev, od = x[..., 2 * k], x[..., 2 * k + 1]
        result[..., 2 * k] = ev * co - od * si
        result[..., 2 * k + 1] = ev * si + od * co
    return result
"""

WRITTEN_HERE = {
    "a_masks": [
        {"PositionalEncoding": PE_1, "apply_rotary": ROT_1},
        {"PositionalEncoding": PE_2, "apply_rotary": ROT_2},
    ]
}


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
        paths = sorted((root / "demo" / assignment).glob("alt_correct*.yaml"))
        written = [read_description(path)["code"] for path in paths]
        for code in written + WRITTEN_HERE.get(assignment, []):
            nb = read_notebook(root / "release" / assignment / f"{name}.ipynb")
            fill(nb, code)
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
            rows.append((f"{assignment}/{exercise.name}", length, shares, copy, more))
    return rows


def written_here_are_correct() -> bool:
    """Whether each of :data:`WRITTEN_HERE` gives the reference's outputs (A's, on random
    inputs; dropout off)."""
    import math

    import torch
    from torch import nn

    source = read_notebook(REPO / "source" / "a_masks" / "masks_and_positions.ipynb")
    reference: dict = {"torch": torch, "nn": nn, "math": math}
    for cell in ("pe_solution", "rotary_solution"):
        exec(reference_code(source)[cell], reference)  # noqa: S102 - the course's own code
    x, y = torch.randn(2, 7, 10), torch.randn(3, 5, 8)
    ok = True
    for variant in WRITTEN_HERE["a_masks"]:
        mine: dict = {"torch": torch, "nn": nn, "math": math}
        for code in variant.values():
            exec(code, mine)  # noqa: S102 - written above
        pe = mine["PositionalEncoding"](10, 0.0, 50).eval()
        want = reference["PositionalEncoding"](10, 0.0, 50).eval()
        ok &= torch.allclose(pe(x), want(x), atol=1e-5)
        ok &= torch.allclose(mine["apply_rotary"](y), reference["apply_rotary"](y), atol=1e-5)
    return bool(ok)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assignment", action="append", help="default: every assignment")
    args = parser.parse_args()
    share, least = similarity.PUBLISHED_SHARE, similarity.PUBLISHED_TOKENS
    print(f"marked: share >= {share:.0%} on exercises of >= {least} tokens")
    print(f"{'exercise':34} tokens  independent(max, n)  copy  copy+")
    counts = {"independent": [0, 0], "copy": [0, 0], "copy+": [0, 0]}
    for assignment in args.assignment or assignments(REPO):
        for exercise, length, shares, copy, more in measure(REPO, assignment):
            long = length >= least
            shown = f"{max(shares):6.0%} ({len(shares)})" if shares else "     -    "
            print(f"{exercise:34} {length:6}  {shown:>19}  {copy:4.0%}  {more:5.0%}"
                  + ("" if long else "  (short: never marked)"))  # fmt: skip
            if long:
                counts["independent"][0] += sum(v >= share for v in shares)
                counts["independent"][1] += len(shares)
                counts["copy"][0] += copy >= share
                counts["copy"][1] += 1
                counts["copy+"][0] += more >= share
                counts["copy+"][1] += 1
    for kind, (marked, total) in counts.items():
        unit = "answers on long exercises" if kind == "independent" else "long exercises"
        print(f"{kind}: marked {marked} of {total} {unit}")
    correct = written_here_are_correct()
    print(f"the answers written here give the reference's outputs: {correct}")
    ok = counts["independent"][0] == 0 and counts["copy"][0] == counts["copy"][1] and correct
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
