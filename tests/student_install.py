"""The student part installed alone: build its wheel, put it in a fresh virtual environment, run
every assignment's visible tests there on the reference answers.

The plan of what runs is made here, on the instructor's side (it reads ``source/``): per
notebook, the code cells a student's copy holds (``release/``: given cells, visible tests),
with the source notebook's solutions in the solution cells, and the plain cells that a running
cell needs (:func:`tests.direct_run.cells_to_run`). The environment runs that plan with
``tests/visible_runner.py``, a standard-library script run in isolated mode from a scratch
folder, so that ``course`` can only come from the installed wheel.

``python -m tests.student_install [--lower-bounds]`` does it all and prints the figures (``make
student-lower-bounds`` installs student/lower-bounds.txt, torch 2.11 from PyPI included);
``tests/test_student_install.py`` does it with the instructor's pins (constraints.txt, torch
2.13.0 from local disk).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

from nbgrader.utils import is_grade, is_locked, is_solution

from grader.coordinator.submission import grade_id
from grader.shared.notebooks import read_notebook
from grader.shared.paths import assignments
from grader.shared.tampering import split_hidden
from tests.direct_run import GIVEN, PLAIN, SOLUTION, TEST, Cell, cells_to_run, python_source

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "tests" / "visible_runner.py"
CONSTRAINTS = REPO / "constraints.txt"
LOWER_BOUNDS = REPO / "student" / "lower-bounds.txt"


def build_wheel(folder: Path) -> Path:
    """Build the student wheel into ``folder`` from a copy of ``student/`` and ``course/``
    (nothing is written in the repository); return the wheel's path."""
    staging = folder / "staging"
    shutil.copytree(REPO / "student", staging / "student", symlinks=False)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "course", staging / "course", ignore=ignore)
    shutil.copy(REPO / "LICENSE", staging / "LICENSE")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run([*pip, "--wheel-dir", str(folder), str(staging / "student")], check=True)
    (wheel,) = folder.glob("transformers_course-*.whl")
    return wheel


def fresh_environment(folder: Path, wheel: Path, constraints: Path) -> Path:
    """A new virtual environment in ``folder`` with the wheel installed under ``constraints``;
    return its Python."""
    venv.create(folder, with_pip=True, clear=True)
    python = folder / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "-c", str(constraints), str(wheel)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {wheel.name}:\n{done.stderr[-3000:]}")
    return python


def lower_bounds_but_torch(folder: Path) -> Path:
    """A constraints file in ``folder``: the student part's lowest requirements
    (student/lower-bounds.txt) with torch at the instructor's pin, which pip takes from local
    disk (torch 2.11 from PyPI is a CUDA build of several GB; ``make student-lower-bounds``
    installs it)."""
    pinned = [line for line in CONSTRAINTS.read_text().splitlines() if line.startswith("torch==")]
    lines = [line for line in LOWER_BOUNDS.read_text().splitlines() if not line.startswith("torch")]
    path = folder / "lower-bounds-but-torch.txt"
    path.write_text("\n".join([*lines, *pinned]) + "\n")
    return path


def notebook_plan(source: Path, release: Path) -> list[dict]:
    """The cells that run in a student's copy of one notebook, with the reference solutions:
    given cells and visible tests from the release, solution cells from the source."""
    solutions = {grade_id(c): c.source for c in read_notebook(source).cells if is_solution(c)}
    cells = []
    for index, cell in enumerate(read_notebook(release).cells):
        if cell.cell_type != "code":
            continue
        name, code = grade_id(cell), cell.source
        if is_solution(cell):
            kind, code = SOLUTION, solutions[name]
        elif is_grade(cell):
            kind = TEST
        elif is_locked(cell):
            kind = GIVEN
        else:
            kind, name = PLAIN, f"cell {index}"
        cells.append(Cell(kind, name, python_source(code)))
    return [vars(c) for c in cells_to_run(cells)]


def plan(chosen: list[str] | None = None) -> dict[str, dict[str, list[dict]]]:
    """assignment -> notebook name -> its cells (:func:`notebook_plan`)."""
    found: dict[str, dict[str, list[dict]]] = {}
    for assignment in chosen or assignments(REPO):
        for path in sorted((REPO / "release" / assignment).glob("*.ipynb")):
            source = REPO / "source" / assignment / path.name
            found.setdefault(assignment, {})[path.name] = notebook_plan(source, path)
    return found


def run_visible_tests(python: Path, folder: Path, chosen: list[str] | None = None) -> dict:
    """Run the plan with ``python`` from a scratch folder; return the runner's report:
    ``{"course": where course was imported from, "cells": [{assignment, notebook, cell,
    kind, error, warnings}]}``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(plan(chosen)))
    shutil.copy(RUNNER, folder / "visible_runner.py")
    done = subprocess.run(
        [str(python), "-I", "visible_runner.py", "plan.json", "report.json"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the runner failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads((folder / "report.json").read_text())


def failures(report: dict) -> list[str]:
    """One line per cell that raised (test cells and the others alike)."""
    return [
        f"{c['assignment']}/{c['notebook']} {c['kind']} {c['cell']}: {c['error']}"
        for c in report["cells"]
        if c["error"]
    ]


def _solution_lines(notebook: Path) -> list[str]:
    """The code lines between the solution markers of a source notebook's cells."""
    lines, inside = [], False
    for cell in read_notebook(notebook).cells:
        for line in cell.source.splitlines() if cell.cell_type == "code" else []:
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
            elif inside:
                lines.append(line)
    return lines


def library_lines(lines: set[str]) -> set[str]:
    """Those of ``lines`` that a module of the standard library or of this environment's
    installed packages holds (``if __name__ == "__main__":``): common code, not answers."""
    found: set[str] = set()
    paths = sysconfig.get_paths()
    for root in {paths["stdlib"], paths["purelib"], paths["platlib"]}:
        for module in Path(root).rglob("*.py"):
            with contextlib.suppress(OSError):
                text = module.read_text(errors="replace")
                found |= lines.intersection(line.strip() for line in text.splitlines())
    return found


def secret_lines(libraries: bool = True) -> list[str]:
    """Code lines that only the instructor's side holds, for ``tests/answer_walk.py``: every
    line of the hidden tests, the solutions and the judge that is long enough to be telling
    (over 24 characters, not an import, a comment or a string) and that no student-side file
    shows (a released notebook, a module of ``course/``, and with ``libraries`` a module of the
    standard library or an installed package: a few seconds more)."""
    secret, public = [], set()
    for notebook in sorted(REPO.glob("source/*/*.ipynb")):
        hidden, _visible = split_hidden(read_notebook(notebook))
        secret += hidden + _solution_lines(notebook)
    for module in sorted((REPO / "judge").glob("*.py")):
        secret += module.read_text().splitlines()
    for path in [*REPO.glob("release/*/*.ipynb"), *(REPO / "course").rglob("*.py")]:
        text = path.read_text()
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        public |= {line.strip() for line in text.splitlines()}
    telling = {line.strip() for line in secret if len(line.strip()) > 24}
    plain = ("import ", "from ", "#", '"', "'", 'f"', "f'", ")", "]")
    secret = {line for line in telling - public if not line.startswith(plain)}
    return sorted(secret - library_lines(secret) if libraries else secret)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lower-bounds", action="store_true", help="student/lower-bounds.txt")
    parser.add_argument("--folder", type=Path, default=REPO / "student" / "build" / "check")
    parser.add_argument("assignments", nargs="*", help="all when none is named")
    args = parser.parse_args()
    shutil.rmtree(args.folder, ignore_errors=True)
    args.folder.mkdir(parents=True)
    constraints = LOWER_BOUNDS if args.lower_bounds else CONSTRAINTS
    started = time.monotonic()
    wheel = build_wheel(args.folder / "wheel")
    python = fresh_environment(args.folder / "venv", wheel, constraints)
    installed = time.monotonic()
    print(f"{wheel.name} installed with {constraints.name}: {installed - started:.0f} s")
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True)
    lines = freeze.stdout.splitlines()
    print(" ".join(line for line in lines if line.split("==")[0].lower() in _NAMES))
    report = run_visible_tests(python, args.folder / "run", args.assignments or None)
    tests = [c for c in report["cells"] if c["kind"] == TEST]
    failed = failures(report)
    print(f"course imported from {report['course']}")
    print(f"{len(tests) - sum(bool(c['error']) for c in tests)}/{len(tests)} visible test cells")
    print(f"passed; {time.monotonic() - installed:.0f} s to run them")
    print("\n".join(failed) or "no cell raised")
    return 1 if failed else 0


_NAMES = {"torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "tqdm", "datasets"}
_NAMES |= {"tokenizers"}

if __name__ == "__main__":
    sys.exit(main())
