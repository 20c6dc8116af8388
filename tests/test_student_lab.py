"""The student's lab is the student's: `make lab` serves JupyterLab on work/ without nbgrader's
instructor tools, `course lab` keeps them, and `.venv/bin/course` works unactivated."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from jupyter_core.paths import jupyter_config_path, jupyter_path
from jupyter_server.extension.config import ExtensionConfigManager
from jupyterlab_server.config import get_federated_extensions

from grader.coordinator import lab
from tests.conftest import REPO, make_course_copy
from tests.jupyter_servers import lab_address, lab_home, serving
from tools import student_lab

BIN = Path(sys.executable).parent  # .venv/bin
BARE_PATH = "/usr/bin:/bin"  # a shell where the venv was never activated
# nbgrader's handlers (0.9): formgrader, its API, assignment_list, course_list
NBGRADER_PAGES = ["/formgrader", "/formgrader/api/assignments", "/assignments", "/formgraders"]
NBGRADER_LAB = "@jupyter/nbgrader"  # its lab extension: the menu, Formgrader, Validate, ...


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 302 is an answer of its own (formgrader's page redirects)


OPENER = urllib.request.build_opener(NoRedirect)


def get(url: str, token: str) -> tuple[int, str]:
    """The status and body of a GET of ``url`` with the server's token."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with OPENER.open(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def page_config(html: str) -> dict:
    """The page config JSON a JupyterLab (or Notebook) page carries."""
    found = re.search(
        r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, html[:2000]
    return json.loads(found.group(1))


def isolated_env(home: Path, path: str = BARE_PATH) -> dict[str, str]:
    """This process's environment with Jupyter's user folders in ``home`` and a bare PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV"))}
    env.pop("COURSE_DB", None)
    env.update({"PATH": path, **lab_home(home)})
    return env


def test_the_student_config_turns_off_every_nbgrader_extension_of_this_environment() -> None:
    """Whatever nbgrader enables here (server extensions, its lab extension), the student's
    configuration folder turns off: a newer nbgrader with one more extension fails this test."""
    env_paths = jupyter_config_path()
    instructor = ExtensionConfigManager(read_config_path=env_paths).get_jpserver_extensions()
    nbgrader = {name for name, on in instructor.items() if on and name.startswith("nbgrader")}
    assert "nbgrader.server_extensions.formgrader" in nbgrader
    student = ExtensionConfigManager(
        read_config_path=[str(student_lab.CONFIG), *env_paths]
    ).get_jpserver_extensions()
    assert {name for name, on in student.items() if on and "nbgrader" in name} == set()
    assert {name for name in student if name not in nbgrader and student[name]} == {
        name for name, on in instructor.items() if on and name not in nbgrader
    }, "the student's lab keeps every other server extension"
    labs = get_federated_extensions(jupyter_path("labextensions"))
    assert [name for name in labs if "nbgrader" in name] == [NBGRADER_LAB]
    config = json.loads((student_lab.CONFIG / "labconfig" / "page_config.json").read_text())
    assert config["disabledExtensions"] == {NBGRADER_LAB: True}


def test_the_student_lab_command_line_and_environment(tmp_path: Path) -> None:
    argv = student_lab.command(tmp_path / "work", ["--x"])
    assert argv[:5] == [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        f"--ServerApp.root_dir={tmp_path}/work",
    ]
    assert argv[-1] == "--x"
    env = student_lab.environment({"JUPYTER_CONFIG_PATH": "/a", "PATH": "/b"})
    assert env["JUPYTER_CONFIG_PATH"] == os.pathsep.join([str(student_lab.CONFIG), "/a"])
    assert student_lab.environment({})["JUPYTER_CONFIG_PATH"] == str(student_lab.CONFIG)
    # `course lab` started from a terminal of the student's lab drops the student's folder
    both = os.pathsep.join([str(student_lab.CONFIG), "/a"])
    assert lab.instructor_config_path(both) == "/a"
    assert lab.instructor_config_path("/a") == "/a"
    assert lab.command(tmp_path, [])[4] == f"--ServerApp.root_dir={tmp_path}"  # nothing else off


@pytest.mark.slow
def test_the_student_lab_serves_no_nbgrader_and_course_lab_does(tmp_path: Path) -> None:
    """Both servers for real, from a shell where the venv was never activated: the student's (as
    `make lab` starts it, tools/student_lab.py) and the instructor's `course lab` started from a
    terminal of the student's lab (the student's configuration folder in its environment)."""
    work = tmp_path / "work" / "a_masks"
    work.mkdir(parents=True)
    shutil.copy(next((REPO / "release" / "a_masks").glob("*.ipynb")), work)
    env = student_lab.environment(isolated_env(tmp_path / "home"))
    port, token, options = lab_address()
    log = tmp_path / "student.log"
    with serving(
        student_lab.command(tmp_path / "work", options), tmp_path, env, log, port, token
    ) as url:
        for page in ["/lab", "/tree"]:  # JupyterLab and Notebook 7 (its Assignments tab)
            status, html = get(f"{url}{page}", token)
            assert status == 200, page
            assert NBGRADER_LAB in page_config(html)["disabledExtensions"], page
            assert NBGRADER_LAB in page_config(html)["lockedExtensions"], page
        for page in NBGRADER_PAGES:
            assert get(f"{url}{page}", token)[0] == 404, page
        status, notebook = get(f"{url}/api/contents/a_masks", token)
        assert status == 200 and len(json.loads(notebook)["content"]) == 1
    assert "nbgrader.server_extensions" not in log.read_text(), log.read_text()

    course = make_course_copy(tmp_path / "course")
    port, token, options = lab_address()
    log = tmp_path / "instructor.log"
    command = [str(BIN / "course"), "lab", "--", *options]
    with serving(command, course, env, log, port, token) as url:
        status, html = get(f"{url}/lab", token)
        assert status == 200 and NBGRADER_LAB not in page_config(html)["disabledExtensions"]
        assert get(f"{url}/formgrader", token)[0] in (200, 302)
        status, body = get(f"{url}/formgrader/api/assignments", token)  # runs alembic by name
        assert status == 200, body[:2000]
    assert "nbgrader.server_extensions.formgrader | extension was successfully loaded" in (
        log.read_text()
    )


def test_course_works_from_the_venv_without_activating_it(tmp_path: Path) -> None:
    """`.venv/bin/course` in a shell whose PATH has no venv: nbgrader's gradebook runs `alembic`
    by name (the release opens it), which failed with a raw FileNotFoundError."""
    env = isolated_env(tmp_path / "home")
    done = subprocess.run([str(BIN / "course"), "--help"], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "autograde" in done.stdout, done.stderr
    root = make_course_copy(tmp_path / "course")
    done = subprocess.run(
        [str(BIN / "course"), "release", "a_masks", "--clone-only"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"released {root / 'release' / 'a_masks'}" in done.stdout
    assert (root / "release" / "a_masks").is_dir()
