"""The notebooks' first and last cells (the install, the check) and the "Open in Colab" links.

    python tools/colab.py            # write the first cell of every source notebook, docs/colab.md
    python tools/colab.py --check    # exit 1 (saying what) when either is out of date

The course's public repository is named ONCE, by ``REPOSITORY`` below: set it (or the environment
variable ``COURSE_REPOSITORY`` while running this tool) when the course is published, run this
tool, then ``course release`` so that release/ gets the new first cells.

Every notebook of ``source/`` starts with a plain code cell that installs the student part of the
course (the ``transformers-course`` distribution) when ``course`` cannot be imported: on Colab or
in a fresh Python. In a prepared environment (``make setup``, a JupyterHub image, nbgrader's
grading) the package is there and the cell does nothing. The data and the checkpoints come with
that install (they are package data of ``course``). The cell is plain Python, pip run by the
kernel's own interpreter as ``%pip`` would: no magic line that the course's tools (the tampering
scan, the direct runs) would have to strip.

On Linux without an NVIDIA GPU (no ``nvidia-smi``, no ``/proc/driver/nvidia``) and without torch,
the cell first installs PyTorch's CPU build from PyTorch's own CPU index (:data:`CPU_INDEX`, as
pytorch.org's selector gives it; ``COURSE_TORCH_INDEX`` names another, a mirror): PyPI's Linux
torch is the CUDA build, about 5 GB with its NVIDIA libraries. macOS's and Windows' wheels on
PyPI are CPU builds already; Colab has torch. pip runs without ``-q`` and its lines are printed as
they come, so the student sees what is downloaded and how big it is.

Every notebook ends with the check cell (:func:`check_cell_source`): ``course check`` on the
saved notebook, from inside it (``course.check.check_this_notebook``), a no-op while grading.

The cell never installs while grading: where nbgrader runs it (``NBGRADER_EXECUTION`` set) and
``course`` cannot be imported, the grader's environment is broken, so the cell raises
:data:`GRADING_ERROR` instead of trying pip (a sandboxed kernel has no network either: it would
fail every test, silently).

What is installed is the ``student/`` folder of the repository (``#subdirectory=student``): pip
clones the whole repository and builds ``student/pyproject.toml`` in that clone, which takes
``course/`` from the folder beside it; the wheel holds ``course`` with its data and checkpoints,
nothing of ``grader/``, ``judge/`` or the answers.

Only a cell that has been seen to work is written. ``python -m tests.install_record``
(tests/install_record.py) clones the repository's current commit, runs this very cell (the
repository replaced by ``file://CLONE@COMMIT``) in a fresh virtual environment, where the cell
runs a real pip, then imports the course and runs A's visible tests; then, and only then, it
writes :data:`TESTED`: what the venv's metadata says was installed (every distribution's version,
a hash of their RECORD files), from where (pip's indexes and links, the commit, a hash of
``student/``), the cell's SHA-256 (the repository left as ``{repository}``), the visible tests and
their outcomes, Python's and pip's versions, the date. ``tests/test_pip_install.py`` (deep) runs
the same install and writes its record in its own temporary folder, never this one. This tool
refuses (exit 1, saying what to run) to write a cell while the record is not of this cell and of
this ``student/``: a change to the install cell or to the student part's build must first pass
the real install. The record says which form worked, not that a given address is reachable: no
network is needed to write the notebooks.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPOSITORY = os.environ.get("COURSE_REPOSITORY", "https://github.com/OWNER/REPO")
BRANCH = "main"
DISTRIBUTION = "transformers-course"
# The one form of the install line; {repository} is a git URL, with @REVISION where pinned.
INSTALL_LINE = DISTRIBUTION + " @ git+{repository}#subdirectory=student"
MARKER = "# Colab, or a Python without the course: install its student part"
CELL_ID = "colab-install"
CHECK_MARKER = "# Check the whole notebook as grading runs it"
CHECK_ID = "check-notebook"
DOCS = REPO / "docs" / "colab.md"
TESTED = REPO / "tools" / "install_tested.json"
GRADING_ERROR = "the grading kernel cannot import the course: nothing was installed"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # pytorch.org's selector: Linux, pip, CPU


RECORD_COMMAND = ".venv/bin/python -m tests.install_record"
RECORD_NOTE = (
    f"Written by `{RECORD_COMMAND}` after a real pip install of this cell worked and A's visible "
    "tests passed there (tests/install_record.py); tools/colab.py writes no other cell."
)
# What a record of the real install holds (tests/install_record.py writes it), with its type.
RECORD_FIELDS = {
    "note": str,
    "date": str,
    "commit": str,
    "student_sha256": str,
    "cell_sha256": str,
    "install_line": str,
    "python": str,
    "pip": str,
    "indexes": list,
    "links": list,
    "torch_index": str,
    "constraints": str,
    "installed": list,
    "installed_record_sha256": str,
    "visible_tests": dict,
}


class Untested(Exception):
    """The install cell differs from the one the real install test saw work."""


def install_line(repository: str = REPOSITORY) -> str:
    """What pip installs: the student part of the repository at ``repository``."""
    if not repository or any(c in repository for c in "#\"' \\\n"):
        raise ValueError(f"not a git repository's address: {repository!r}")
    return INSTALL_LINE.format(repository=repository)


def install_cell_source(repository: str = REPOSITORY) -> str:
    """The first cell of every notebook: install the student part unless it is importable,
    and never while grading. On Linux without an NVIDIA GPU, PyTorch's CPU build first, from
    PyTorch's CPU index (:data:`CPU_INDEX`, or ``COURSE_TORCH_INDEX``): PyPI's Linux torch is
    the CUDA build, with gigabytes of NVIDIA libraries. pip's lines are shown as they come."""
    return (
        f"{MARKER} (once). About 330 MB to\n"
        "# download, 1.5 GB on disk (with PyTorch's CPU build); pip's lines below show how far it\n"
        "# is. Nothing happens where the course is installed; grading never installs.\n"
        "import importlib.metadata, importlib.util, os, re, shutil, subprocess, sys\n"
        "\n"
        "\n"
        "def pip_install(*args):\n"
        '    command = [sys.executable, "-m", "pip", "install", *args]\n'
        '    version = re.match(r"(\\d+)\\.(\\d+)", importlib.metadata.version("pip")).groups()\n'
        "    if tuple(map(int, version)) >= (24, 1):  # pip counts a download's bytes\n"
        '        command += ["--progress-bar", "raw"]\n'
        '    print(" ".join(command), flush=True)\n'
        "    out = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)\n"
        "    pip, tenth = subprocess.Popen(command, **out), -1  # pip's lines, as they come\n"
        "    for shown in pip.stdout:\n"
        '        if shown.startswith("Progress "):  # "Progress DONE of TOTAL": a tenth a line\n'
        "            done, total = map(int, shown.split()[1::2])\n"
        "            if total > 1e7 and done * 10 // total > tenth:\n"
        "                tenth = done * 10 // total\n"
        '                print(f"  {done / 1e6:.0f} of {total / 1e6:.0f} MB", flush=True)\n'
        "            continue\n"
        "        tenth = -1\n"
        '        print(shown, end="", flush=True)\n'
        "    if pip.wait():\n"
        '        raise RuntimeError("pip failed: its last lines above say why")\n'
        "\n"
        "\n"
        'if importlib.util.find_spec("course") is None:\n'
        '    if os.environ.get("NBGRADER_EXECUTION"):\n'
        f'        raise RuntimeError("{GRADING_ERROR}")\n'
        f'    package = "{install_line(repository)}"\n'
        '    nvidia = shutil.which("nvidia-smi") or os.path.exists("/proc/driver/nvidia")\n'
        '    if sys.platform == "linux" and not nvidia and not importlib.util.find_spec("torch"):\n'
        "        # no NVIDIA GPU: PyTorch's CPU build (200 MB), not PyPI's CUDA build (5 GB)\n"
        f'        cpu = os.environ.get("COURSE_TORCH_INDEX", "{CPU_INDEX}")\n'
        '        pip_install("torch", "--index-url", cpu)\n'
        "    pip_install(package)\n"
        "    importlib.invalidate_caches()  # the new package importable in this kernel"
    )


def check_cell_source(notebook: str) -> str:
    """The last cell of every notebook: ``course check`` on the saved notebook (its file name as
    handed out, ``notebook``), from inside it. Nothing happens while grading."""
    return (
        f"{CHECK_MARKER}: save it (Ctrl+S), then run this cell. Each test\n"
        "# passes or says what is wrong; every written answer still empty is named. Nothing\n"
        "# happens while grading. The same in a terminal, in this folder:\n"
        f"#     course check {notebook}\n"
        "from course.check import check_this_notebook\n"
        "\n"
        f'check_this_notebook("{notebook}")'
    )


def cell_sha256() -> str:
    """The SHA-256 of the install cell with the repository left as ``{repository}``."""
    return hashlib.sha256(install_cell_source("{repository}").encode()).hexdigest()


def student_sha256(root: Path | None = None) -> str:
    """The SHA-256 of ``student/`` as pip builds it in ``root`` (a work tree, :data:`REPO` by
    default): every file of it that git tracks, by path and content."""
    root = root or REPO
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "student"], cwd=root, capture_output=True, text=True
    )
    if listed.returncode != 0 or not listed.stdout:
        raise ValueError(f"{root} has no student/ tracked by git: {listed.stderr.strip()}")
    digest = hashlib.sha256()
    for name in sorted(listed.stdout.strip("\0").split("\0")):
        path = root / name
        content = path.read_bytes() if path.is_file() else b"(missing)"
        digest.update(f"{name}\0{hashlib.sha256(content).hexdigest()}\n".encode())
    return digest.hexdigest()


def student_version(root: Path | None = None) -> str:
    """The student distribution's version in ``root``'s ``student/pyproject.toml``."""
    with open((root or REPO) / "student" / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["project"]["version"]


def record_faults(record: object, root: Path | None = None) -> list[str]:
    """Why ``record`` is not the real install's record of this cell and of ``root``'s
    ``student/`` (none when it is): a field missing, another cell, another ``student/``, the
    course not among what was installed, no visible test or one that did not pass."""
    if not isinstance(record, dict):
        return ["it holds no record"]
    faults = [
        f"it has no {name!r} ({kind.__name__})"
        for name, kind in RECORD_FIELDS.items()
        if not isinstance(record.get(name), kind)
    ]
    if faults:
        return faults
    if record["install_line"] != INSTALL_LINE or record["cell_sha256"] != cell_sha256():
        faults.append(f"the install cell (line {INSTALL_LINE!r}) is not the one it installed with")
    commit = record["commit"][:12]
    if record["student_sha256"] != student_sha256(root):
        faults.append(f"student/ is not the one it installed (from commit {commit})")
    course = f"{DISTRIBUTION}=={student_version(root)}"
    if course not in record["installed"]:
        faults.append(f"{course} is not among what it installed")
    if not any(str(name).startswith("torch==") for name in record["installed"]):
        faults.append("torch is not among what it installed")
    outcomes = record["visible_tests"]
    failed = [name for name, outcome in outcomes.items() if outcome != "passed"]
    if not outcomes or failed:
        faults.append(
            f"the visible tests did not all pass there ({len(failed)} of {len(outcomes)})"
        )
    return faults


def untested(path: Path | None = None, root: Path | None = None) -> str:
    """Why the cell may not be written ("" when the record at ``path``, :data:`TESTED` by
    default, is the real install's record of this cell and of ``root``'s ``student/``)."""
    path = path or TESTED
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = None
    faults = record_faults(record, root)
    if not faults:
        return ""
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return (
        f"the install cell has not been seen to work as it is: {shown}, the real install's "
        f"record, says otherwise ({'; '.join(faults)}). Run the real install, `{RECORD_COMMAND}` "
        "(a fresh venv, pip on a clone of this commit, A's visible tests: 1 to 2 minutes), which "
        "writes the record only when all of it worked; commit the record, then run this tool again"
    )


def _as_lines(text: str) -> list[str]:
    """A cell's source as nbformat stores it: lines with their newlines."""
    return text.splitlines(keepends=True)


def _code_cell(cell_id: str, source: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {},
        "outputs": [],
        "source": _as_lines(source),
    }


def with_install_cell(notebook: dict, repository: str = REPOSITORY) -> dict:
    """``notebook`` whose first cell is the install cell (replaced if there, inserted if not)."""
    cell = _code_cell(CELL_ID, install_cell_source(repository))
    cells = notebook["cells"]
    if cells and "".join(cells[0]["source"]).startswith(MARKER):
        cell["id"] = cells[0].get("id", CELL_ID)
        cells[0] = cell
    else:
        cells.insert(0, cell)
    return notebook


def with_check_cell(notebook: dict, name: str) -> dict:
    """``notebook`` whose last cell is the check cell of the file ``name`` (replaced if there,
    appended if not)."""
    cell = _code_cell(CHECK_ID, check_cell_source(name))
    cells = notebook["cells"]
    if cells and "".join(cells[-1]["source"]).startswith(CHECK_MARKER):
        cell["id"] = cells[-1].get("id", CHECK_ID)
        cells[-1] = cell
    else:
        cells.append(cell)
    return notebook


def with_frame(notebook: dict, name: str, repository: str = REPOSITORY) -> dict:
    """``notebook`` with its first cell (the install) and its last (the check)."""
    return with_check_cell(with_install_cell(notebook, repository), name)


def notebooks(root: Path = REPO) -> list[Path]:
    """The instructor's notebooks, by assignment."""
    return sorted((root / "source").glob("*/*.ipynb"))


def colab_url(release_path: str, repository: str = REPOSITORY, branch: str = BRANCH) -> str:
    """Colab's address of a notebook of the repository on GitHub."""
    owner_repo = repository.removeprefix("https://github.com/").removesuffix(".git")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/{release_path}"


def docs_page(root: Path = REPO, repository: str = REPOSITORY) -> str:
    """docs/colab.md: the Open-in-Colab link of every assignment, and what the first cell does."""
    rows = []
    for path in notebooks(root):
        release = f"release/{path.parent.name}/{path.name}"
        badge = "https://colab.research.google.com/assets/colab-badge.svg"
        link = f"[![Open In Colab]({badge})]({colab_url(release, repository)})"
        rows.append(f"| {path.parent.name} | `{release}` | {link} |")
    return PAGE.format(
        branch=BRANCH,
        repository=repository,
        unpublished=UNPUBLISHED if "OWNER/REPO" in repository else "",
        line=install_line(repository),
        rows="\n".join(rows),
    )


UNPUBLISHED = """ The course has no public address yet (OWNER/REPO stands for it): whoever
publishes it sets `REPOSITORY` in `tools/colab.py` and runs `python tools/colab.py`, which
writes this page and every notebook's first cell again; until then these links open nothing."""

PAGE = """# The course on Colab

Each assignment opens in Google Colab from its link below: the student notebook of `release/`,
branch `{branch}` of {repository}.{unpublished}

Its first cell installs the student part of the course when `course` cannot be imported:

```
pip install "{line}"
```

that is the `course` package with its data and checkpoints, nothing of the grader or the
answers (on Linux without an NVIDIA GPU and without torch, PyTorch's CPU build first). Where the
course is installed the cell does nothing, and while grading it never installs. The notebooks
that train use Colab's GPU when the runtime has one (Runtime > Change runtime type). Save a copy
to your Drive (File > Save a copy in Drive) or download it before you close it. How to work, hand
in and read your feedback: [the student's guide](../student/GUIDE.md#2-a-colab-link).

| assignment | notebook | open |
|---|---|---|
{rows}

The address is `REPOSITORY` in `tools/colab.py`: `python tools/colab.py` rewrites the
notebooks' first cells and this page; `course release` carries them to `release/`. It writes
only a cell a real install has seen work (`python -m tests.install_record`).
"""


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def _write(path: Path, notebook: dict) -> None:
    """Write a notebook as nbformat does (one-space indent, a final newline)."""
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def stale(root: Path | None = None, repository: str | None = None) -> list[str]:
    """What ``python tools/colab.py`` would change: notebooks and docs/colab.md (by default
    those of :data:`REPO`, for :data:`REPOSITORY`)."""
    root, repository = root or REPO, repository or REPOSITORY
    out = []
    for path in notebooks(root):
        notebook = _read(path)
        if with_frame(json.loads(json.dumps(notebook)), path.name, repository) != notebook:
            out.append(str(path.relative_to(root)))
    docs = root / "docs" / "colab.md"
    if not docs.is_file() or docs.read_text() != docs_page(root, repository):
        out.append(str(docs.relative_to(root)))
    return out


def write(root: Path | None = None, repository: str | None = None) -> list[str]:
    """Bring the notebooks' first cells and docs/colab.md up to date; return what changed.
    Refuses (:class:`Untested`) when the cell is not the one the real install test recorded."""
    if reason := untested():
        raise Untested(reason)
    root, repository = root or REPO, repository or REPOSITORY
    changed = stale(root, repository)
    for path in notebooks(root):
        _write(path, with_frame(_read(path), path.name, repository))
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "colab.md").write_text(docs_page(root, repository))
    return changed


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python tools/colab.py [--check]", file=sys.stderr)
        return 2
    try:
        if argv == ["--check"]:
            if reason := untested():
                raise Untested(reason)
            out = stale()
            for path in out:
                print(f"{path} is out of date: run `python tools/colab.py`, then `course release`")
            return 1 if out else 0
        for path in write():
            print(f"updated {path}")
    except (Untested, ValueError) as error:
        print(f"tools/colab.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
