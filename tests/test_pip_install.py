"""The notebooks' install line, for real: the first cell of every notebook (``tools/colab.py``)
run in a fresh virtual environment, where it runs pip on a ``git clone`` of this repository.

No stand-in for pip: the repository's current commit is cloned, the cell is the notebooks' own
(``colab.install_cell_source``) with the public address replaced by
``file://localhost/CLONE@COMMIT``, pip is the one that ``venv`` puts in a fresh environment (not
upgraded: older than Colab's), and what pip builds is ``#subdirectory=student`` of the clone,
as it would be from GitHub.
Torch comes from this machine's disk as in ``make setup``: pip runs with the instructor's pins
(``PIP_CONSTRAINT=constraints.txt``, the file that ``make setup`` passes with ``-c``) and the
machine's own pip configuration (find-links, indexes). The cell is run twice: as nbgrader
would (``NBGRADER_EXECUTION=autograde``), where it must refuse and install nothing, then as a
student's kernel would, where it installs, after which the same process imports ``course``.
Then A's visible tests run there on the reference answers (``tests/student_install.py``).

When all of it worked the test records the cell in ``tools/install_tested.json``: the only
cell that ``tools/colab.py`` agrees to write. Deep: a fresh virtual environment, a few minutes
(mostly pip).
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

from tests import student_install
from tests.conftest import REPO
from tests.direct_run import TEST
from tools import colab

CHECKPOINTS = ["course/e_pretraining/review_lm.pt", "course/g_birth_places/wiki_char_lm.pt"]


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run_cell(python: Path, code: str, folder: Path, **env: str) -> subprocess.CompletedProcess:
    """``code`` run by ``python`` in isolated mode from ``folder``, as a kernel would run it,
    with this environment but ``NBGRADER_EXECUTION`` and with ``env`` added."""
    environment = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    environment.update(env)
    command = [str(python), "-I", "-c", code]
    return subprocess.run(
        command, cwd=folder, env=environment, capture_output=True, text=True, timeout=1200
    )


def installed_files(python: Path, folder: Path) -> list[str]:
    """Every file that the installed distribution brought (its RECORD), relative to
    site-packages."""
    code = (
        "from importlib.metadata import distribution as d\n"
        f"print('\\n'.join(str(f) for f in d({colab.DISTRIBUTION!r}).files))"
    )
    return run_cell(python, code, folder).stdout.split()


def distributions(python: Path, folder: Path) -> list[str]:
    """The names of the distributions installed in ``python``'s environment."""
    code = "from importlib.metadata import distributions as d; print(*(x.name for x in d()))"
    return run_cell(python, code, folder).stdout.lower().split()


def importable(python: Path, module: str, folder: Path) -> bool:
    code = f"import importlib.util as u; print(u.find_spec({module!r}) is not None)"
    return run_cell(python, code, folder).stdout.strip() == "True"


@pytest.mark.deep
@pytest.mark.slow  # a fresh virtual environment and a real pip install: a few minutes
def test_the_notebooks_first_cell_installs_the_student_part_from_a_git_clone(
    tmp_path: Path,
) -> None:
    commit = git("rev-parse", "HEAD")
    clone = tmp_path / "clone"
    git("clone", "--quiet", str(REPO), str(clone))
    git("checkout", "--quiet", commit, cwd=clone)
    # file://localhost/PATH, not file:///PATH: the pip that a fresh venv of Python 3.11.7 has
    # (23.2.1, packaging 21.3) refuses a URL without a host; a public https address has one.
    cell = colab.install_cell_source(f"file://localhost{clone}@{commit}")
    assert f"git+file://localhost{clone}@{commit}#subdirectory=student" in cell
    python = tmp_path / "venv" / "bin" / "python"
    venv.create(python.parents[1], with_pip=True)
    scratch = tmp_path / "kernel"
    scratch.mkdir()

    grading = run_cell(python, cell, scratch, NBGRADER_EXECUTION="autograde")
    assert grading.returncode != 0 and colab.GRADING_ERROR in grading.stderr, grading.stderr
    assert not importable(python, "course", scratch), "the cell installed while grading"

    pins = {"PIP_CONSTRAINT": str(REPO / "constraints.txt"), "PIP_NO_CACHE_DIR": "1"}
    # PyTorch's CPU index is not reachable from here: PyPI stands for it, and the pinned torch
    # is the CPU wheel of this machine's find-links (as in `make setup`; 2.13.0+cpu sorts above
    # PyPI's 2.13.0), so the step is the same command with another index.
    pins["COURSE_TORCH_INDEX"] = "https://pypi.org/simple"
    code = cell + "\nimport course\nprint(course.__file__)\n"  # the next cell, same kernel
    student = run_cell(python, code, scratch, **pins)
    assert student.returncode == 0, f"the install cell failed:\n{student.stderr[-4000:]}"
    shown = student.stdout.splitlines()
    assert shown[-1].startswith(str(tmp_path / "venv")), student.stdout[-2000:]
    # pip's own lines, as they came: first torch from the CPU index, then the course
    torch_step = f"-m pip install torch --index-url {pins['COURSE_TORCH_INDEX']}"
    assert shown[0].endswith(torch_step), shown[:3]
    course_step = [i for i, line in enumerate(shown) if "#subdirectory=student" in line]
    assert course_step and "Successfully installed" in "\n".join(shown[: course_step[0]])
    assert any(line.startswith("Successfully installed") for line in shown[course_step[0] :])
    names = distributions(python, scratch)
    assert "torch" in names and not [n for n in names if n.startswith("nvidia")], names

    files = installed_files(python, scratch)
    scripts = {name for name in files if name.startswith("../")}  # the console script's path
    assert {name.rsplit("/", 1)[-1] for name in scripts} == {"course"}, scripts
    tops = {name.split("/")[0] for name in files if name not in scripts}
    assert tops == {"course", "transformers_course-0.1.0.dist-info"}, tops
    tracked = git("ls-files", "course/data", cwd=clone).split("\n")
    missing = set(tracked + CHECKPOINTS) - set(files)
    assert not missing, f"not installed: {sorted(missing)}"
    for module in ("grader", "judge", "tests", "tools", "nbgrader"):
        assert not importable(python, module, scratch), f"{module} came with the install"

    report = student_install.run_visible_tests(python, tmp_path / "run", ["a_masks"])
    assert report["course"].startswith(str(tmp_path / "venv")), report["course"]
    tests = [c for c in report["cells"] if c["kind"] == TEST]
    visible = [
        c
        for path in REPO.glob("release/a_masks/*.ipynb")
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")
    ]
    assert len(tests) == len(visible) > 0
    assert not student_install.failures(report), "\n".join(student_install.failures(report))

    record = {**colab.cell_record(), "note": colab.RECORD_NOTE}
    colab.TESTED.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
