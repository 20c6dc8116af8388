"""How long ``course report`` takes on a large class: N generated submissions of assignment A.

    .venv/bin/python benchmarks/class_report_speed.py [--students 500] [--root DIR]

The class is generated, not graded (grading 500 submissions takes an hour on 2 cores): a course
folder with A's release, a gradebook holding every student's points (nbgrader's own tables),
``grading_report.csv``, the records of grading (:mod:`grader.shared.records`: time, verdicts,
mistake keys) and a submitted notebook per student. Each student's solution cells are drawn from the
demo class's ways of writing each function (the reference and every demo student's code, so correct
ones and typical mistakes), with the names the student chose renamed, comments and lines of their
own added; some leave an exercise blank. :data:`PAIRS` pairs of students copied from each other (the
same code of their own, renamed and commented differently). Then ``course report a_masks`` runs in a
process of its own, and the time it took is printed.

``make_class`` is also the synthetic class of ``tests/test_class_report.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.api import Grade, Gradebook, Student, SubmittedAssignment, SubmittedNotebook

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.coordinator import demo, submission  # noqa: E402
from grader.shared import records, report  # noqa: E402
from grader.shared.paths import db_url, use_this_python  # noqa: E402

ASSIGNMENT, NOTEBOOK = "a_masks", "masks_and_positions"
PAIRS = 5  # pairs of students who copied from each other
# A mistake key and message per failing demo student, as the judge records them (the keys
# the real checks give are checked by tests/test_checks_direct.py; these stand for them).
HELPERS = [  # a student's own lines (checks, notes) beside a solution
    "probe = torch.arange(4).float().mean()",
    "seen = {k: v for k, v in enumerate('abc')}",
    "width = int(probe.item()) * 3 + 1",
    "trace = [w ** 2 for w in range(width)]",
    "last = trace[-1] if trace else None",
    "grid = torch.eye(3)[torch.tensor([2, 0, 1])]",
    "score = float(grid.trace()) / max(1, len(seen))",
    "words = ' '.join(str(t) for t in trace[:3])",
    "mask_check = torch.triu(torch.ones(2, 2), 1).bool().any()",
    "summary = (score, last, words, mask_check)",
    "again = [x for x in range(10) if x % 3 == 1]",
    "ratio = len(again) / (1 + len(trace))",
    "scratch = torch.zeros(1)",
    "checked = bool(torch.isfinite(scratch).all())",
    "steps = [i * 2 for i in range(3)]",
    "total = sum(steps) + len(steps)",
    "label = 'done' if checked else 'again'",
    "note = {'steps': steps, 'total': total}",
    "extra = torch.ones(2, 2).sum(dim=0)",
    "pairs = list(zip(steps, steps[1:]))",
    "flag = total > 3 and len(pairs) > 1",
    "kept = [p for p in pairs if p[0] < p[1]]",
    "value = max(total, len(kept)) - min(steps)",
    "shape = tuple(extra.shape) + (len(note),)",
]


def _ways(root: Path) -> dict[str, list[tuple[str, str, dict]]]:
    """Per solution cell: (demo student, code, expectation) of each way the demo class writes it."""
    source = nbformat.read(REPO / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    reference = submission.reference_code(source)
    release = nbformat.read(root / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    cells = submission.solution_cells(release)
    ways: dict[str, list[tuple[str, str, dict]]] = {}
    for gid, code in reference.items():
        if cells.get(gid) is not None and cells[gid].cell_type == "code":
            ways.setdefault(gid, []).append(("reference", code, {}))
    for student, described in sorted(demo.descriptions(REPO, ASSIGNMENT).items()):
        if student.startswith("copied_pair"):
            continue
        for name, code in (described.get("code") or {}).items():
            gid = submission.grade_id(cells[name]) if name in cells else ""
            if gid in ways:
                ways[gid].append((student, code, described.get("expect", {})))
    return ways


def _pick(options: list[tuple[str, str, dict]], rng: random.Random) -> tuple[str, str, dict]:
    """A way of writing a solution cell: a correct one (of the reference and the other correct
    styles) seven times in ten, else a typical mistake."""
    wrong = [o for o in options if o[2].get("fail")]
    right = [o for o in options if not o[2].get("fail")]
    return rng.choice(right if rng.random() < 0.7 or not wrong else wrong)


def _renamed(code: str, rng: random.Random) -> str:
    """``code`` with its local names renamed and a comment of its own (what students vary)."""
    names = sorted(set(re.findall(r"^\s+([a-z_][a-z0-9_]*) =", code, flags=re.M)))
    for name in names:
        if rng.random() < 0.6:
            code = re.sub(rf"\b{name}\b", f"{name}_{rng.randint(1, 99)}", code)
    lines = code.splitlines()
    lines.insert(1, f"    # step {rng.randint(1, 9)}: {rng.choice(['ok', 'check', 'see notes'])}")
    return "\n".join(lines)


def _own(rng: random.Random, count: int) -> str:
    return "\n".join(rng.sample(HELPERS, count))


def _individual(code: str, rng: random.Random) -> str:
    """``code`` as one student writes it: a line of their own (a check, a temporary, its
    operators drawn at random) after every second statement, and a helper line or two at the
    end. Two students who drew the same way share only short runs of it."""
    lines, out = code.splitlines(), []
    for number, line in enumerate(lines):
        out.append(line)
        after = lines[number + 1] if number + 1 < len(lines) else ""
        indent = line[: len(line) - len(line.lstrip())]
        closed = line.count("(") == line.count(")") and line.count("[") == line.count("]")
        simple = line.strip() and not line.rstrip().endswith((":", ",", "(", "[", "\\"))
        same_block = after.startswith(indent) and not after[len(indent) :].startswith(" ")
        if number % 2 and simple and closed and same_block and indent:
            ops = " ".join(
                f"{rng.choice('+-*/%')} {rng.choice(['a', 'b', '1', '2.0'])}" for _ in range(3)
            )
            out.append(f"{indent}t{number} = 1 {ops}")
    return "\n".join(out) + "\n" + _own(rng, rng.choice([1, 2]))


def make_class(root: Path, students: int, pairs: int = PAIRS, seed: int = 0) -> dict:
    """Generate the class in the course folder ``root``; return what was planted: the pairs
    of copiers, and by demo student whose mistake a student made, those students."""
    rng = random.Random(seed)
    use_this_python()  # nbgrader runs alembic by name
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    for folder in ("source", "release"):
        shutil.copytree(REPO / folder / ASSIGNMENT, root / folder / ASSIGNMENT, dirs_exist_ok=True)
    ways = _ways(root)
    names = [f"s{n:04d}" for n in range(students)]
    copiers = [(names[2 * k], names[2 * k + 1]) for k in range(pairs)]
    planted: dict = {"pairs": copiers, "mistakes": {}}
    release = nbformat.read(root / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    gradebook = _Gradebook(root, release)
    chosen: dict[str, tuple[dict, dict[str, str]]] = {}  # student -> picks, code written
    partner = {b: a for a, b in copiers}
    for student in names:
        if student in partner:  # copied: the same code, renamed and commented otherwise
            picks, written = chosen[partner[student]]
        else:
            picks = {gid: _pick(options, rng) for gid, options in ways.items()}
            written = {gid: _individual(code, rng) for gid, (_, code, _) in picks.items()}
        chosen[student] = (picks, written)
        code = {gid: _renamed(text, rng) for gid, text in written.items()}
        copier = student in partner or student in {a for a, _ in copiers}
        blank = {gid for gid in code if not copier and rng.random() < 0.03}
        _write_submission(root, student, release, {g: c for g, c in code.items() if g not in blank})
        failing = {cell for _, _, e in picks.values() for cell in e.get("fail", [])}
        for who, _, expect in picks.values():
            if expect.get("fail"):
                planted["mistakes"].setdefault(who, set()).add(student)
        gradebook.add(student, failing, blank, rng)
        _record(root, student, picks, rng)
    gradebook.close()
    return planted


def _write_submission(root: Path, student: str, release: object, code: dict[str, str]) -> None:
    nb = nbformat.from_dict(json.loads(nbformat.writes(release)))
    for cell in nb.cells:
        gid = submission.grade_id(cell)
        if gid in code:
            cell.source = code[gid]
    folder = root / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


def _record(root: Path, student: str, picks: dict, rng: random.Random) -> None:
    verdicts, mistakes = {}, {}
    for who, _, expect in picks.values():
        for cell in expect.get("fail", []):
            message = f"{who}: the mistake {expect.get('message', '')} ({rng.randint(2, 9)})"
            verdicts[cell] = message
            mistakes[cell] = {"key": f"synthetic:{who}", "message": message}
    record = {
        "seconds": round(rng.uniform(4, 20), 2),
        "notebooks": {NOTEBOOK: {"verdicts": verdicts, "mistakes": mistakes, "refused": ""}},
    }
    records.write(root, ASSIGNMENT, student, record)


class _Gradebook:
    """nbgrader's gradebook of the generated class, filled table by table."""

    def __init__(self, root: Path, release: object) -> None:
        self.root = root
        self.gb = Gradebook(db_url(root))
        self.gb.update_or_create_assignment(ASSIGNMENT)
        self.gb.update_or_create_notebook(NOTEBOOK, ASSIGNMENT)
        self.cells = []
        for cell in release.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                kind = cell.cell_type
                self.gb.update_or_create_grade_cell(
                    meta["grade_id"], NOTEBOOK, ASSIGNMENT, max_score=meta["points"], cell_type=kind
                )
                self.cells.append((meta["grade_id"], float(meta["points"]), kind))
            if meta.get("solution"):
                self.gb.update_or_create_solution_cell(meta["grade_id"], NOTEBOOK, ASSIGNMENT)
        self.assignment = self.gb.find_assignment(ASSIGNMENT)
        self.notebook = self.gb.find_notebook(NOTEBOOK, ASSIGNMENT)
        self.grade_cells = list(self.notebook.grade_cells)
        self.events: list[report.Event] = []

    def add(self, student: str, failing: set[str], blank: set[str], rng: random.Random) -> None:
        """One student's submission and grades, as nbgrader's tables hold them (rows added
        directly: nbgrader's ``add_submission`` takes half a second a student)."""
        with self.gb.db.no_autoflush:
            self._add(student, failing, blank, rng)

    def _add(self, student: str, failing: set[str], blank: set[str], rng: random.Random) -> None:
        sub = SubmittedAssignment(assignment=self.assignment, student=Student(id=student))
        self.gb.db.add(sub)
        row = SubmittedNotebook(assignment=sub, notebook=self.notebook)
        self.gb.db.add(row)
        exercises = {gid.removesuffix("_solution") for gid in blank}
        for cell in self.grade_cells:
            grade = Grade(cell=cell, notebook=row, needs_manual_grade=False)
            self.gb.db.add(grade)
            if cell.cell_type == "markdown":
                done = rng.random() < 0.4  # graded by hand so far
                grade.manual_score = float(rng.randint(0, int(cell.max_score))) if done else None
                grade.needs_manual_grade = not done
            else:
                lost = cell.name in failing or cell.name.split("_")[1] in exercises
                grade.auto_score = 0.0 if lost else cell.max_score
        points = sum(g.auto_score or g.manual_score or 0.0 for g in row.grades)
        most = sum(c.max_score for c in self.grade_cells)
        status = "timed out" if student.endswith("7") else "graded"
        detail = "the cell test_rotary_hidden ran past its time limit" if status != "graded" else ""
        self.events.append(
            report.Event(ASSIGNMENT, student, NOTEBOOK, status, points, most, detail)
        )

    def close(self) -> None:
        self.gb.db.commit()
        report.update(self.root, self.events)
        self.gb.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--root", type=Path, help="the course folder (default: a scratch one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="class-report-") as scratch:
        root = args.root or Path(scratch) / "course"
        start = time.monotonic()
        planted = make_class(root, args.students)
        print(f"generated {args.students} submissions in {time.monotonic() - start:.1f} s")
        start = time.monotonic()
        command = [str(Path(sys.executable).with_name("course")), "--root", str(root), "report"]
        subprocess.run([*command, ASSIGNMENT], check=True)
        took = time.monotonic() - start
        page = (root / f"class-report-{ASSIGNMENT}.html").read_text()
        listed = re.findall(
            r'<tr class="pair"><td>\d+</td><td><a href="#pair-\d+">([^<\s]+) and ([^<\s]+)<', page
        )
        ranks = sorted(listed.index(pair) + 1 for pair in planted["pairs"] if pair in listed)
        print(f"course report {ASSIGNMENT} on {args.students} submissions: {took:.1f} s "
              f"({len(planted['pairs'])} copied pairs planted; listed at ranks {ranks} of "
              f"{len(listed)} pairs)")  # fmt: skip


if __name__ == "__main__":
    main()
