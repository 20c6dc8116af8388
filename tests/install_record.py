"""The notebooks' install cell run for real, and the record of that run.

    python -m tests.install_record            # run it; write tools/install_tested.json if it worked
    python -m tests.install_record --print    # run it; print the record, write nothing

:func:`install` clones this repository's current commit and runs the first cell of every
notebook (``colab.install_cell_source``, the public address replaced by
``file://localhost/CLONE@COMMIT``) in a fresh virtual environment, with the pip that ``venv``
puts there (not upgraded: older than Colab's), on ``#subdirectory=student`` of the clone, as
from GitHub. The cell runs twice: as nbgrader would (``NBGRADER_EXECUTION=autograde``), where it
must refuse and install nothing, then as a student's kernel would, where it installs, after
which the same process imports ``course``. Then A's visible tests run there on the reference
answers (``tests/student_install.py``). Torch comes from this machine's disk as in ``make
setup``: pip runs with the instructor's pins (``PIP_CONSTRAINT=constraints.txt``) and the
machine's own pip configuration (find-links, indexes).

:func:`problems` says what of it went wrong; :func:`record` is what it installed (from the
venv's metadata), from where, with which cell, and the visible tests' outcomes: what
``tools/colab.py`` holds the tree against (``colab.record_faults``). ``tests/test_pip_install.py``
(deep) runs it and writes its record in its own temporary folder; only this command writes the
tracked ``tools/install_tested.json``, and only when nothing went wrong.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from tests import student_install
from tests.direct_run import TEST
from tools import colab

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "a_masks"  # whose visible tests run in the installed course
CHECKPOINTS = ["course/e_pretraining/review_lm.pt", "course/g_birth_places/wiki_char_lm.pt"]
NOT_INSTALLED = ("grader", "judge", "tests", "tools", "nbgrader")
# PyTorch's CPU index is not reachable from here: PyPI stands for it, and the pinned torch is the
# CPU wheel of this machine's find-links (as in `make setup`; 2.13.0+cpu sorts above PyPI's
# 2.13.0), so the step is the same command with another index.
TORCH_INDEX = "https://pypi.org/simple"
CONSTRAINTS = REPO / "constraints.txt"  # the instructor's pins, as `make setup` passes them

# Run in the venv: what its metadata says is installed, and a hash of every RECORD file.
METADATA = """
import hashlib, importlib.metadata as m, json, platform, sys
found = sorted(m.distributions(), key=lambda d: d.metadata["Name"].lower())
digest = hashlib.sha256()
for d in found:
    digest.update((d.read_text("RECORD") or "(no RECORD)").encode())
course = m.distribution(sys.argv[1])
print(json.dumps({
    "installed": [f"{d.metadata['Name']}=={d.version}" for d in found],
    "installed_record_sha256": digest.hexdigest(),
    "files": [str(f) for f in course.files],
    "python": platform.python_version(),
    "pip": m.version("pip"),
}))
"""


def git(*args: str, cwd: Path = REPO) -> str:
    """git's output, stripped; a failure raises."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run_cell(
    python: Path, code: str, folder: Path, *args: str, **env: str
) -> subprocess.CompletedProcess:
    """``code`` run by ``python`` in isolated mode from ``folder``, as a kernel would run it,
    with this environment but ``NBGRADER_EXECUTION`` and with ``env`` added."""
    environment = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    environment.update(env)
    command = [str(python), "-I", "-c", code, *args]
    return subprocess.run(
        command, cwd=folder, env=environment, capture_output=True, text=True, timeout=1200
    )


def importable(python: Path, module: str, folder: Path) -> bool:
    """Whether ``module`` can be imported by ``python`` from ``folder``."""
    code = f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"
    return run_cell(python, code, folder).stdout.strip() == "True"


def looked_in(output: str, what: str) -> list[str]:
    """The addresses pip said it looked in (``what``: ``indexes`` or ``links``), in order."""
    found: list[str] = []
    for line in output.splitlines():
        if line.startswith(f"Looking in {what}: "):
            for address in line.split(": ", 1)[1].split(", "):
                if address not in found:
                    found.append(address)
    return found


def install(folder: Path) -> dict:
    """Clone this repository's current commit into ``folder``, run the install cell from it in
    a fresh venv there, as grading and as a student, then A's visible tests; return what was
    seen (what :func:`problems` judges and :func:`record` keeps)."""
    commit = git("rev-parse", "HEAD")
    clone = folder / "clone"
    git("clone", "--quiet", str(REPO), str(clone))
    git("checkout", "--quiet", commit, cwd=clone)
    # file://localhost/PATH, not file:///PATH: the pip that a fresh venv of Python 3.11.7 has
    # (23.2.1, packaging 21.3) refuses a URL without a host; a public https address has one.
    repository = f"file://localhost{clone}@{commit}"
    cell = colab.install_cell_source(repository)
    python = folder / "venv" / "bin" / "python"
    venv.create(python.parents[1], with_pip=True)
    scratch = folder / "kernel"
    scratch.mkdir()

    grading = run_cell(python, cell, scratch, NBGRADER_EXECUTION="autograde")
    installed_while_grading = importable(python, "course", scratch)
    pins = {"PIP_CONSTRAINT": str(CONSTRAINTS), "PIP_NO_CACHE_DIR": "1"}
    pins["COURSE_TORCH_INDEX"] = TORCH_INDEX
    code = cell + "\nimport course\nprint(course.__file__)\n"  # the next cell, same kernel
    student = run_cell(python, code, scratch, **pins)
    seen = {
        "commit": commit,
        "clone": str(clone),
        "venv": str(python.parents[1]),
        "repository": repository,
        "cell": cell,
        "grading": {"returncode": grading.returncode, "stderr": grading.stderr[-4000:]},
        "installed_while_grading": installed_while_grading,
        "student": {"returncode": student.returncode, "stdout": student.stdout},
        "student_stderr": student.stderr[-4000:],
        "student_sha256": colab.student_sha256(clone),
        "version": colab.student_version(clone),
        "tracked_data": git("ls-files", "course/data", cwd=clone).split("\n"),
    }
    if student.returncode != 0:
        return seen  # nothing installed to look at: problems() says why
    metadata = run_cell(python, METADATA, scratch, colab.DISTRIBUTION)
    if metadata.returncode != 0:
        raise RuntimeError(f"the venv's metadata could not be read:\n{metadata.stderr[-3000:]}")
    seen.update(json.loads(metadata.stdout))
    seen["importable"] = {m: importable(python, m, scratch) for m in NOT_INSTALLED}
    report = student_install.run_visible_tests(python, folder / "run", [ASSIGNMENT])
    seen["course_imported_from"] = report["course"]
    seen["test_cells"] = [c for c in report["cells"] if c["kind"] == TEST]
    seen["failures"] = student_install.failures(report)
    seen["visible_cells"] = len(visible_test_cells(clone))
    return seen


def visible_test_cells(root: Path) -> list[dict]:
    """The graded test cells of :data:`ASSIGNMENT`'s released notebooks in ``root``."""
    return [
        cell
        for path in sorted(root.glob(f"release/{ASSIGNMENT}/*.ipynb"))
        for cell in json.loads(path.read_text())["cells"]
        if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("grade")
    ]


def problems(seen: dict) -> list[str]:
    """What went wrong in the run that :func:`install` saw (none when the install worked)."""
    grading = seen["grading"]
    if grading["returncode"] == 0 or colab.GRADING_ERROR not in grading["stderr"]:
        return [f"the cell did not refuse while grading:\n{grading['stderr']}"]
    if seen["installed_while_grading"]:
        return ["the cell installed the course while grading"]
    if seen["student"]["returncode"] != 0:
        return [f"the install cell failed:\n{seen['student_stderr']}"]
    found = []
    shown = seen["student"]["stdout"].splitlines() or [""]
    if not shown[-1].startswith(seen["venv"]):
        found.append(f"course was not imported from the venv: {shown[-1]}")
    # pip's own lines, as they came: first torch from the CPU index, then the course
    if not shown[0].endswith(f"-m pip install torch --index-url {TORCH_INDEX}"):
        found.append(f"torch was not installed first from its index: {shown[:3]}")
    course_step = [i for i, line in enumerate(shown) if "#subdirectory=student" in line]
    if not course_step or "Successfully installed" not in "\n".join(shown[: course_step[0]]):
        found.append("pip did not install torch before the course")
    elif not any(line.startswith("Successfully installed") for line in shown[course_step[0] :]):
        found.append("pip did not install the course")
    names = [entry.split("==")[0].lower() for entry in seen["installed"]]
    if "torch" not in names or any(name.startswith("nvidia") for name in names):
        found.append(f"not PyTorch's CPU build alone: {names}")
    files = seen["files"]
    scripts = {name for name in files if name.startswith("../")}  # the console script's path
    if {name.rsplit("/", 1)[-1] for name in scripts} != {"course"}:
        found.append(f"the console scripts are not `course` alone: {sorted(scripts)}")
    tops = {name.split("/")[0] for name in files if name not in scripts}
    expected = {"course", f"transformers_course-{seen['version']}.dist-info"}
    if tops != expected:
        found.append(f"the distribution holds {sorted(tops)}, not {sorted(expected)}")
    missing = set(seen["tracked_data"] + CHECKPOINTS) - set(files)
    if missing:
        found.append(f"not installed: {sorted(missing)}")
    found += [f"{m} came with the install" for m, there in seen["importable"].items() if there]
    if not seen["course_imported_from"].startswith(seen["venv"]):
        found.append(f"the visible tests imported course from {seen['course_imported_from']}")
    if not len(seen["test_cells"]) == seen["visible_cells"] > 0:
        found.append(
            f"{len(seen['test_cells'])} test cells ran, of {seen['visible_cells']} visible ones"
        )
    return found + seen["failures"]


def record(seen: dict, date: datetime.datetime | None = None) -> dict:
    """The record of a run that worked (:func:`problems` found nothing), as
    ``tools/install_tested.json`` holds it (``colab.RECORD_FIELDS``)."""
    if faults := problems(seen):
        raise ValueError("the install did not work:\n" + "\n".join(faults))
    date = date or datetime.datetime.now(datetime.UTC)
    outcomes = {
        f"{c['assignment']}/{c['notebook']} {c['cell']}": "failed" if c["error"] else "passed"
        for c in seen["test_cells"]
    }
    return {
        "note": colab.RECORD_NOTE,
        "date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": seen["commit"],
        "student_sha256": seen["student_sha256"],
        "cell_sha256": colab.cell_sha256(),
        "install_line": colab.INSTALL_LINE,
        "python": seen["python"],
        "pip": seen["pip"],
        "indexes": looked_in(seen["student"]["stdout"], "indexes"),
        "links": looked_in(seen["student"]["stdout"], "links"),
        "torch_index": TORCH_INDEX,
        "constraints": CONSTRAINTS.name,
        "installed": seen["installed"],
        "installed_record_sha256": seen["installed_record_sha256"],
        "visible_tests": outcomes,
    }


def write(seen: dict, path: Path) -> dict:
    """Write the record of the run ``seen`` to ``path``; return it."""
    made = record(seen)
    path.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
    return made


def main(argv: list[str] | None = None) -> int:
    """Run the real install; write :data:`colab.TESTED` (or print the record) when it worked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the record, write nothing")
    args = parser.parse_args(argv)
    changed = git("status", "--porcelain", "--", "student", "course")
    if changed and not args.print:
        print(
            "tests/install_record.py: the install is of the last commit, and these differ from "
            f"it:\n{changed}\ncommit them first, or run with --print",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="install-record-") as folder:
        seen = install(Path(folder))
        if faults := problems(seen):
            print("the install did not work; nothing recorded:", *faults, sep="\n", file=sys.stderr)
            return 1
        if args.print:
            print(json.dumps(record(seen), indent=1, sort_keys=True))
            return 0
        made = write(seen, colab.TESTED)
    print(f"wrote {colab.TESTED.relative_to(REPO)}: {len(made['installed'])} distributions,")
    print(f"{len(made['visible_tests'])} visible test cells passed, commit {made['commit'][:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
