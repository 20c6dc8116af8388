"""A student of a graded class, from the student's side: a release notebook from the LMS and the
public copy of the course, nothing else (docs/term.md §2-§5).

1. The instructor: a ``git clone`` of this repository's HEAD, ``course address
   file://localhost/PUBLIC``, ``course release a_masks``, ``course publish PUBLIC a_masks``; the
   public folder becomes a git repository of one commit, the address students install from.
2. The student: a fresh virtual environment (``venv``, pip not upgraded) with only ``pip install
   jupyterlab``, under the instructor's pins (``PIP_CONSTRAINT=constraints.txt``) and this
   machine's pip configuration (torch from local disk).
3. A folder holding the release notebook (the file the LMS hands out), that venv's ``jupyter
   lab`` on it, the notebook open in Chromium; its first cell installs the student part from the
   published address (a real pip), and the setup cell imports the course.
4. A typical wrong answer to the first exercise (the transposed mask of
   ``demo/a_masks/mask_transposed.yaml``) shows its named mistake in the first lines of the test
   cell's output on screen; the reference answer shows ``OK``.
5. The notebook saved (Ctrl+S), the student's check run as the student page says, in its last
   cell and in a terminal: the first exercise passes, the others are not implemented yet, and
   every written answer is named as still empty.
6. File > Download gives the saved notebook, and the instructor's ``course collect`` reads it
   from a Canvas download into ``submitted/``.

The notebook's last cell, run in the browser, checks the saved notebook as the terminal's check
does. Screenshots on failure go to ``tmp_path``. Deep and slow: a fresh venv and two real pip
installs (torch included), a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
import yaml
from labui import NOTEBOOK, REPO, LabServer, grade_index, menu, open_notebook
from playwright.sync_api import Locator, Page, expect

from tests.jupyter_servers import LAB_SETTINGS, lab_address, lab_home, serving

A, NB = "a_masks", "masks_and_positions.ipynb"
INSTRUCTOR_BIN = Path(sys.executable).parent  # the worktree's .venv/bin: `course`, `nbgrader`
MISTAKE = yaml.safe_load((REPO / "demo" / A / "mask_transposed.yaml").read_text())
# What course/a_masks/checks.py (_diagnose_mask_pattern) says of that mask, in its first words.
MISTAKE_WORDS = "generate_square_subsequent_mask(3) is transposed"
STUDENT = {"id": "s001", "first_name": "Ada", "last_name": "Lovelace", "lms_user_id": "4242"}
CANVAS_FILE = "lovelaceada_4242_9001_{}"  # Canvas's NAME_USERID_ATTACHMENTID_FILE (lms_archives)
# The install cell's COURSE_TORCH_INDEX: PyTorch's CPU index is not reachable from here, and the
# local index (file:///opt/pypi/simple) lacks torch's dependencies at the instructor's pins
# (filelock 4.3.1: "ResolutionImpossible"), so PyPI stands for it, as in tests/test_pip_install.py;
# the pinned torch is this machine's CPU wheel (find-links, 2.13.0+cpu), as in `make setup`.
TORCH_INDEX = "https://pypi.org/simple"
INSTALL_TIMEOUT = 1_200_000  # ms: the first cell's pip, torch included, on a loaded machine
CELL_TIMEOUT = 180_000  # ms: any other cell


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    """Run ``command``; its stdout, or a failure that shows what it printed."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"`{' '.join(command)}` in {cwd} exited {done.returncode}:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def git(*args: str, cwd: Path = REPO) -> str:
    author = ["-c", "user.name=Instructor", "-c", "user.email=instructor@uni.example"]
    return run(["git", *author, *args], cwd, dict(os.environ)).strip()


def instructor_env() -> dict[str, str]:
    """The instructor's shell after `source .venv/bin/activate` (docs/term.md): .venv/bin first."""
    env = {k: v for k, v in os.environ.items() if k not in {"COURSE_DB", "NBGRADER_EXECUTION"}}
    env["PATH"] = os.pathsep.join([str(INSTRUCTOR_BIN), env.get("PATH", "")])
    return env


def student_env(venv_dir: Path, home: Path, constraints: Path) -> dict[str, str]:
    """A student's shell: the student's venv first on PATH, nothing of the instructor's (no
    .venv/bin, no course variables); pip reaches this machine's packages (its configuration,
    the instructor's pins, PyTorch's CPU index replaced by :data:`TORCH_INDEX`); Jupyter's user
    folders in ``home``, the test servers' settings written there."""
    drop = {
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "COURSE_FAST",
        "COURSE_DB",
        "COURSE_DEVICE",
        "COURSE_FOLDER",
        "COURSE_REPOSITORY",
        "NBGRADER_EXECUTION",
    }
    env = {k: v for k, v in os.environ.items() if k not in drop}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != INSTRUCTOR_BIN]
    env.update(
        {
            "PATH": os.pathsep.join([str(venv_dir / "bin"), *path]),
            "PIP_CONSTRAINT": str(constraints),
            "PIP_NO_CACHE_DIR": "1",
            "COURSE_TORCH_INDEX": TORCH_INDEX,
            **lab_home(home, LAB_SETTINGS),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def instructor_course(tmp_path: Path) -> tuple[Path, Path]:
    """A clone of HEAD with A released for the public address, and the public copy written,
    committed once: (the clone, the public repository)."""
    commit = git("rev-parse", "HEAD")
    clone, public = tmp_path / "instructor", tmp_path / "public"
    git("clone", "--quiet", str(REPO), str(clone))
    git("checkout", "--quiet", commit, cwd=clone)
    env = instructor_env()
    course = str(INSTRUCTOR_BIN / "course")
    # file://localhost/PATH: the form a fresh venv's pip 23.2 takes (tests/test_pip_install.py).
    run([course, "address", f"file://localhost{public}"], clone, env)
    run([course, "release", A], clone, env)
    run([course, "publish", str(public), A], clone, env)  # what was handed out, nothing else
    assert sorted(p.name for p in (public / "release").glob("*/")) == [A]
    git("init", "--quiet", cwd=public)
    git("add", "--all", cwd=public)
    git("commit", "--quiet", "-m", "The course's public copy", cwd=public)
    first = "".join(json.loads((public / "release" / A / NB).read_text())["cells"][0]["source"])
    assert f"git+file://localhost{public}#subdirectory=student" in first, (
        f"the published notebook's first cell does not install from {public}:\n{first}"
    )
    roster = clone / "private" / "roster.csv"  # docs/term.md §3
    roster.parent.mkdir()
    roster.write_text(
        "id,first_name,last_name,email,lms_user_id\n"
        f"{STUDENT['id']},{STUDENT['first_name']},{STUDENT['last_name']},ada@uni.example,"
        f"{STUDENT['lms_user_id']}\n"
    )
    run([str(INSTRUCTOR_BIN / "nbgrader"), "db", "student", "import", str(roster)], clone, env)
    return clone, public


def student_venv(folder: Path, env: dict[str, str]) -> Path:
    """A fresh venv (pip as venv gives it) with only `pip install jupyterlab`; its folder."""
    venv.create(folder, with_pip=True)
    run([str(folder / "bin" / "python"), "-m", "pip", "install", "jupyterlab"], folder, env)
    return folder


@pytest.fixture
def student_lab(
    tmp_path: Path,
) -> Iterator[tuple[LabServer, Path, dict[str, str], Path]]:
    """The instructor's course, the student's venv and JupyterLab on the student's folder:
    (the server, the student's venv, the student's environment, the instructor's clone)."""
    clone, _public = instructor_course(tmp_path)
    constraints = clone / "constraints.txt"
    folder = tmp_path / "student"
    folder.mkdir()
    shutil.copy(clone / "release" / A / NB, folder / NB)  # what the LMS hands out
    home = tmp_path / "student-home"
    env = student_env(tmp_path / "student-venv", home, constraints)
    venv_dir = student_venv(tmp_path / "student-venv", env)
    port, token, options = lab_address()
    command = [
        str(venv_dir / "bin" / "jupyter"),
        "lab",
        "--no-browser",
        *options,
        f"--ServerApp.root_dir={folder}",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = home / "server.log"
    with serving(command, folder, env, log, port, token) as url:
        yield LabServer(url=url, token=token, root=folder, log=log), venv_dir, env, clone


def solution(grade_id: str) -> str:
    """The reference answer of a solution cell of the source notebook, markers taken out."""
    path = REPO / "source" / A / NB
    source = nbformat.read(path, as_version=4).cells[grade_index(path, grade_id)].source
    return "\n".join(line for line in source.splitlines() if "### " not in line)


def visible_tests(path: Path) -> list[str]:
    """The grade_ids of the test cells with code in a student's copy."""
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        code = [ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#")]
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and code:
            found.append(meta["grade_id"])
    return found


def output_text(cell: Locator) -> str:
    """What the cell's output area shows, as on screen (its rendered text)."""
    return "\n".join(cell.locator(".jp-OutputArea-output").all_inner_texts())


def run_cell(page: Page, cell: Locator, timeout: int = CELL_TIMEOUT) -> str:
    """Select ``cell`` in command mode, run it (Shift+Enter), wait for its new prompt number;
    return its output as shown."""
    prompt = cell.locator(".jp-InputPrompt")
    cell.scroll_into_view_if_needed()
    before = prompt.inner_text().strip()
    prompt.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        """([p, before]) => { const t = p.textContent.trim();
            return /\\[\\d+\\]/.test(t) && t !== before; }""",
        arg=[prompt.element_handle(), before],
        timeout=timeout,
        polling=500,
    )
    return output_text(cell)


def replace_code(page: Page, cell: Locator, code: str) -> None:
    """Put ``code`` in a code cell's editor as a student's paste would (no auto-indent, no
    closing brackets added)."""
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)
    expect(cell.locator(".cm-content")).to_contain_text(code.splitlines()[-1].strip())


def first_lines(text: str, count: int = 3) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][:count]


def check_blocks(report: str) -> dict[str, tuple[str, str]]:
    """The student's check's report, per test cell: grade_id -> (PASS or FAIL, what follows)."""
    blocks: dict[str, tuple[str, str]] = {}
    current = None
    for line in report.splitlines():
        found = re.match(r"\s*\[(PASS|FAIL)\]\s+(\w+)", line)
        if found:
            current = found.group(2)
            blocks[current] = (found.group(1), "")
        elif current and line.startswith("    "):
            blocks[current] = (blocks[current][0], blocks[current][1] + line.strip() + "\n")
        else:
            current = None
    return blocks


@pytest.mark.deep
@pytest.mark.slow  # a fresh venv, JupyterLab installed, the student part installed: minutes
def test_a_student_installs_answers_checks_and_hands_in(
    student_lab: tuple[LabServer, Path, dict[str, str], Path], page: Page, tmp_path: Path
) -> None:
    server, venv_dir, env, clone = student_lab
    path = server.root / NB
    cells = len(nbformat.read(path, as_version=4).cells)
    try:
        panel = open_notebook(page, server.lab_url(NB), cells)
        cell = panel.locator(".jp-Cell")

        # 3. The first cell installs the student part from the published address.
        shown = run_cell(page, cell.nth(0), timeout=INSTALL_TIMEOUT)
        print(f"The install cell shows:\n{shown}\n")
        assert not re.search(r"Traceback|Error:", shown), f"the install cell failed:\n{shown}"
        said = shown or "(nothing: its output area is empty)"
        assert "Successfully installed" in shown and "transformers-course" in shown, said
        torch_step = "install torch --index-url"  # no NVIDIA GPU here: the CPU build first
        assert torch_step in first_lines(shown, 1)[0], said
        setup = cell.nth(grade_index(path, "setup"))
        shown = run_cell(page, setup)
        assert not re.search(r"Error|Traceback", shown), f"the setup cell failed:\n{shown}"
        where = run(
            [str(venv_dir / "bin" / "python"), "-c", "import course; print(course.__file__)"],
            server.root,
            env,
        ).strip()
        assert where.startswith(str(venv_dir)), f"course came from {where}, not the venv"
        listed = run(
            [str(venv_dir / "bin" / "python"), "-m", "pip", "list", "--format=json"],
            server.root,
            env,
        )
        cuda = [p["name"] for p in json.loads(listed) if p["name"].lower().startswith("nvidia")]
        assert not cuda, f"a machine without an NVIDIA GPU got CUDA libraries: {cuda}"

        # 4. A typical wrong answer, then the right one.
        answer = cell.nth(grade_index(path, "mask_solution"))
        test = cell.nth(grade_index(path, "test_mask_visible"))
        replace_code(page, answer, MISTAKE["code"]["generate_square_subsequent_mask"].rstrip())
        run_cell(page, answer)
        shown = run_cell(page, test)
        print(f"The test cell, given the transposed mask, shows:\n{shown}\n")
        assert MISTAKE_WORDS in shown, f"the test cell does not name the mistake:\n{shown}"
        assert MISTAKE["expect"]["message"] in shown
        top = first_lines(shown)
        assert MISTAKE_WORDS in " ".join(top), (  # the message may wrap
            f"'{MISTAKE_WORDS}' is not in the first 3 lines of the test cell's output:\n{shown}"
        )
        replace_code(page, answer, solution("mask_solution"))
        run_cell(page, answer)
        shown = run_cell(page, test)
        assert re.match(r"\s*OK\b", shown), f"the reference answer does not show OK:\n{shown}"

        # 5. Saved, then checked in a terminal as the student page says.
        page.keyboard.press("Control+S")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0)
        saved = json.loads(path.read_text())
        kept = nbformat.read(path, as_version=4).cells[grade_index(path, "mask_solution")]
        assert kept.source == solution("mask_solution"), f"saved, the answer is:\n{kept.source}"
        shown = run_cell(page, cell.nth(cells - 1), timeout=600_000)  # the last cell: the check
        print(f"The notebook's last cell shows:\n{shown}\n")
        in_lab = check_blocks(shown)
        assert in_lab.get("test_mask_visible", ("", ""))[0] == "PASS", shown
        assert "Written answers: 0 of 7 written" in shown and "Still empty: Question 1" in shown
        command = [str(venv_dir / "bin" / "course"), "check", NB]  # the student page's
        done = subprocess.run(
            command, cwd=server.root, env=env, capture_output=True, text=True, timeout=900
        )
        report = done.stdout + done.stderr
        blocks = check_blocks(report)
        tests = visible_tests(path)
        assert blocks.get("test_mask_visible", ("", ""))[0] == "PASS", (
            f"`{' '.join(command)}` does not pass the first exercise:\n{report}"
        )
        for other in tests[1:]:
            verdict, message = blocks.get(other, ("", ""))
            assert verdict == "FAIL" and "not implemented" in message, (
                f"`{' '.join(command)}` does not say {other} is not implemented:\n{report}"
            )
        assert done.returncode == 1, f"the check exited {done.returncode}:\n{report}"
        assert check_blocks(report) == in_lab, "the last cell and the terminal disagree"

        # 6. Downloaded as the student would, handed in through Canvas, collected.
        with page.expect_download() as arrived:
            menu(page, "File", "Download")
        download = tmp_path / "downloads" / arrived.value.suggested_filename
        arrived.value.save_as(download)
        assert json.loads(download.read_text()) == saved, "the download is not the saved notebook"
        archive = tmp_path / "submissions.zip"
        with zipfile.ZipFile(archive, "w") as canvas:
            canvas.write(download, CANVAS_FILE.format(download.name))
        said = run(
            [str(INSTRUCTOR_BIN / "course"), "collect", A, str(archive), "--lms", "canvas"],
            clone,
            instructor_env(),
        )
        collected = clone / "submitted" / STUDENT["id"] / A / NB
        assert collected.exists(), f"nothing in {collected.parent}; collect said:\n{said}"
        assert json.loads(collected.read_text()) == saved, "the collected notebook differs"
    except BaseException:
        page.screenshot(path=tmp_path / "failure.png", full_page=True)
        raise
    assert page.locator(NOTEBOOK).count() == 1
