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

Only a cell that has been seen to work is written. ``tests/test_pip_install.py`` (deep) clones
the repository's current commit, runs this very cell (the repository replaced by
``file://CLONE@COMMIT``) in a fresh virtual environment, where the cell runs a real pip, then
imports the course and runs A's visible tests; then, and only then, it records the cell it ran
in :data:`TESTED` (the install line's template and the cell's SHA-256, the repository left as
``{repository}``). This tool refuses (exit 1, saying what to run) to write a cell that differs
from that record: a change to the install line or to the cell's code must first pass the real
install. The record says which form worked, not that a given address is reachable: no network
is needed to write the notebooks.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
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


RECORD_NOTE = (
    "Written by tests/test_pip_install.py after a real pip install with this cell worked; "
    "tools/colab.py writes no other cell."
)


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


def cell_record() -> dict[str, str]:
    """What :data:`TESTED` holds once the deep test has seen this cell work: the install line's
    template and the SHA-256 of the cell with the repository left as ``{repository}``."""
    cell = install_cell_source("{repository}")
    return {"install_line": INSTALL_LINE, "cell_sha256": hashlib.sha256(cell.encode()).hexdigest()}


def untested() -> str:
    """Why the cell may not be written ("" when the deep test has recorded it as working)."""
    try:
        recorded = json.loads(TESTED.read_text())
    except (OSError, ValueError):
        recorded = {}
    if {k: recorded.get(k) for k in cell_record()} == cell_record():
        return ""
    return (
        f"the install cell (line {INSTALL_LINE!r}) has not been seen to work: "
        f"{TESTED.relative_to(REPO)} records another. Run the real install, "
        "`.venv/bin/python -m pytest -n 0 -m deep tests/test_pip_install.py`, which records "
        "the cell when it worked; commit the record, then run this tool again"
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

The address is set in one place, `REPOSITORY` in `tools/colab.py`: `python tools/colab.py`
rewrites the notebooks' first cells and this page, and `course release` carries the cells to
`release/`. It writes only a cell that `tests/test_pip_install.py` (`make test-deep`) has seen
install the course from a clone (`tools/install_tested.json`).
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
