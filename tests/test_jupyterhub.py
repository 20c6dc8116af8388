"""Smoke test of deploy/jupyterhub/: a class on a real JupyterHub, with real system users.

JupyterHub starts on a free localhost port (with configurable-http-proxy), using the
deployment's own jupyterhub_config.py; an instructor and two students are new unprivileged
users. The students' servers run from a student environment made by the deployment's
student_env.sh (the student wheel, no grader, judge or source notebook). The students fetch and
submit assignment A through their single-user servers' nbgrader endpoints; the instructor
releases, collects, autogrades (sandboxed kernels, as that user), writes and returns feedback;
the students fetch their feedback. Then a student looks for answers in every file and git
object it can read in the deployment and its environment (tests/answer_walk.py, as that user).
Needs root (it creates users), useradd and configurable-http-proxy (`make setup` installs it).
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import pytest
import requests

from grader.coordinator import pipeline
from grader.coordinator.submission import fill, reference_code
from grader.shared import tampering
from grader.shared.notebooks import read_notebook
from tests import student_install
from tests.conftest import REPO, make_course_copy

pytestmark = [pytest.mark.slow, pytest.mark.deep]  # the hub and a student venv: minutes

COURSE, ASSIGNMENT, NOTEBOOK = "transformers", "a_masks", "masks_and_positions.ipynb"
DEPLOY = REPO / "deploy" / "jupyterhub"
VENV = Path(sys.prefix)
REFERENCE_POINTS = 13  # autograded points of A's reference solution


def _need(condition: object, message: str) -> None:
    """Fail (never skip) with one line saying what to do."""
    if not condition:
        pytest.fail(f"JupyterHub smoke test: {message}", pytrace=False)


def _closed_folders() -> list[Path]:
    """The folders the hub's users must pass through but cannot (no search bit for others):
    often the home of the user who built .venv (pyenv's Python under /root, mode 0700)."""
    python = [VENV, Path(sys.base_prefix), Path(os.path.realpath(sys.executable))]
    needed = [REPO, DEPLOY, *python, Path(tempfile.gettempdir())]
    closed = {
        folder
        for path in needed
        for folder in [path, *path.parents]
        if folder.is_dir() and not folder.stat().st_mode & 0o001
    }
    return sorted(closed)


@contextlib.contextmanager
def _searchable(folders: list[Path]) -> Iterator[None]:
    """Let other users pass through ``folders`` (o+x: enter, not list) while the test runs;
    their modes are restored afterwards. A real deployment installs the course where every
    user can run it (deploy/jupyterhub/README.md)."""
    modes = {folder: folder.stat().st_mode & 0o7777 for folder in folders}
    try:
        for folder, mode in modes.items():
            folder.chmod(mode | 0o001)
        yield
    finally:
        for folder, mode in modes.items():
            folder.chmod(mode)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Site:
    """The temporary class: folders, users, and the running hub."""

    tmp: Path
    instructor: str
    students: list[str]
    exchange: Path
    port: int
    token: str
    student_venv: Path
    hub: subprocess.Popen | None = None
    log: Path | None = None
    user_tokens: dict[str, str] = field(default_factory=dict)

    def home(self, user: str) -> Path:
        return self.tmp / "home" / user

    @property
    def course(self) -> Path:
        return self.home(self.instructor) / "transformers"

    def env(self, user: str) -> dict[str, str]:
        """The environment of a user's commands, as in a terminal of their JupyterLab."""
        venv = VENV if user == self.instructor else self.student_venv
        found = {
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home(user)),
            "USER": user,
            "LOGNAME": user,
            "LANG": "C.UTF-8",
            "COURSE_EXCHANGE": str(self.exchange),
        }
        if user == self.instructor:
            found["JUPYTER_CONFIG_PATH"] = str(DEPLOY)
        return found

    def run_as(self, user: str, *args: str, cwd: Path | None = None, errors: bool = False) -> str:
        """Run a command as ``user``; fail the test with its output if it fails. Returns its
        standard output (and its error output after it, with ``errors``)."""
        done = subprocess.run(
            args,
            cwd=cwd or self.home(user),
            env=self.env(user),
            user=user,
            group=user,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (
            f"`{' '.join(args)}` as {user} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout + (done.stderr if errors else "")

    def hub_api(self, method: str, path: str, **kwargs: object) -> requests.Response:
        """A request to the Hub REST API with the admin service's token."""
        headers = {"Authorization": f"token {self.token}"}
        url = f"http://127.0.0.1:{self.port}/hub/api/{path}"
        return requests.request(method, url, headers=headers, timeout=30, **kwargs)

    def server(self, user: str, method: str, path: str, **data: str) -> dict:
        """A request to the user's single-user server (nbgrader's endpoints), with their token."""
        url = f"http://127.0.0.1:{self.port}/user/{user}/{path}"
        headers = {"Authorization": f"token {self.user_tokens[user]}"}
        if method == "GET":
            response = requests.get(url, headers=headers, params=data, timeout=120)
        else:
            response = requests.post(url, headers=headers, data=data, timeout=120)
        assert response.status_code == 200, f"{method} {path} for {user}: {response.text[:500]}"
        return response.json()

    def hub_log(self) -> str:
        return self.log.read_text()[-4000:] if self.log and self.log.exists() else ""


def _launch_hub(site: Site) -> None:
    """Start JupyterHub with the deployment's own config (:func:`_wait_for_hub` waits)."""
    state = site.tmp / "hub"
    proxy = shutil.which("configurable-http-proxy")
    env = {
        "PATH": f"{VENV / 'bin'}:{Path(proxy).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "COURSE_HUB_PORT": str(site.port),
        "COURSE_HUB_API_PORT": str(_free_port()),
        "COURSE_HUB_PROXY_API_PORT": str(_free_port()),
        "COURSE_HUB_STATE": str(state),
        "COURSE_HUB_ADMIN_TOKEN": site.token,
        "COURSE_VENV": str(VENV),
        "COURSE_STUDENT_VENV": str(site.student_venv),
        "COURSE_EXCHANGE": str(site.exchange),
        "COURSE_INSTRUCTOR": site.instructor,
        "COURSE_STUDENTS": ",".join(site.students),
    }
    state.mkdir(mode=0o700)
    site.log = site.tmp / "jupyterhub.log"
    with site.log.open("w") as log:
        site.hub = subprocess.Popen(
            [str(VENV / "bin" / "jupyterhub"), "-f", str(DEPLOY / "jupyterhub_config.py")],
            cwd=state,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _wait_for_hub(site: Site) -> None:
    """Wait until the Hub API answers; fail with the hub's log if it does not."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert site.hub.poll() is None, f"JupyterHub exited:\n{site.hub_log()}"
        try:
            if site.hub_api("GET", "").status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"JupyterHub did not answer in 60 s:\n{site.hub_log()}")


def _request_servers(site: Site, users: list[str]) -> None:
    """Ask the Hub API to start each user's server (:func:`_wait_for_servers` waits)."""
    for user in users:
        response = site.hub_api("POST", f"users/{user}/server")
        assert response.status_code in (201, 202), f"{user}: {response.text}"


def _wait_for_servers(site: Site, users: list[str]) -> None:
    """Wait until each user's server is ready; give each user a token for it."""
    deadline = time.monotonic() + 120
    waiting = set(users)
    while waiting and time.monotonic() < deadline:
        for user in list(waiting):
            server = site.hub_api("GET", f"users/{user}").json()["servers"].get("", {})
            if server.get("ready"):
                waiting.discard(user)
        time.sleep(0.5)
    assert not waiting, f"servers not ready in 120 s: {waiting}\n{site.hub_log()}"
    for user in users:
        scopes = [f"access:servers!user={user}"]
        response = site.hub_api(
            "POST", f"users/{user}/tokens", json={"scopes": scopes, "expires_in": 900}
        )
        assert response.status_code == 201, response.text
        site.user_tokens[user] = response.json()["token"]


def _stop(site: Site, users: list[str]) -> None:
    """Stop the hub, the proxy, every server and every process of the test's users."""
    procs = []
    if site.hub is not None and site.hub.poll() is None:
        hub = psutil.Process(site.hub.pid)
        procs = [hub, *hub.children(recursive=True)]
        site.hub.terminate()  # the hub stops the servers and the proxy it started
    pid_file = site.tmp / "hub" / "jupyterhub-proxy.pid"  # a proxy that outlived a crashed hub
    if pid_file.is_file() and psutil.pid_exists(pid := int(pid_file.read_text() or 0)):
        procs.append(psutil.Process(pid))
    uids = {pwd.getpwnam(user).pw_uid for user in users}
    procs += [p for p in psutil.process_iter(["uids"]) if p.info["uids"].real in uids]
    _gone, alive = psutil.wait_procs(procs, timeout=15)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)


@pytest.fixture
def site() -> Iterator[Site]:
    """Three new system users, a shared exchange, the instructor's course; removed after."""
    _need(os.geteuid() == 0, "run it as root (it creates system users), e.g. `sudo make test`")
    for tool in ("useradd", "userdel"):
        _need(shutil.which(tool), f"{tool} is missing: install the passwd package")
    _need(
        shutil.which("configurable-http-proxy"),
        "configurable-http-proxy is missing: run `make setup`",
    )
    _need((VENV / "bin" / "jupyterhub-singleuser").exists(), "run `make setup` (no jupyterhub)")
    suffix = secrets.token_hex(3)
    users = [f"hub{suffix}i", f"hub{suffix}s1", f"hub{suffix}s2"]
    tmp = Path(tempfile.mkdtemp(prefix="course-hub-"))
    tmp.chmod(0o755)
    site = Site(
        tmp=tmp,
        instructor=users[0],
        students=users[1:],
        exchange=tmp / "exchange",
        port=_free_port(),
        token=secrets.token_hex(32),
        student_venv=tmp / "student-env",
    )
    created = []
    opened = contextlib.ExitStack()
    try:
        opened.enter_context(_searchable(_closed_folders()))
        (tmp / "home").mkdir(mode=0o755)
        site.exchange.mkdir()
        site.exchange.chmod(0o1777)  # everyone writes, nobody removes another's files
        for user in users:
            subprocess.run(
                ["useradd", "--create-home", "--home-dir", str(site.home(user)),
                 "--shell", "/bin/bash", "--user-group", user],
                check=True, capture_output=True,
            )  # fmt: skip
            created.append(user)
        for user in users:  # the solutions are in the instructor's, students' own work in theirs
            site.home(user).chmod(0o700)
        _make_student_env(site)
        make_course_copy(site.course, with_release=True)
        shutil.chown(site.course, site.instructor, site.instructor)
        for path in site.course.rglob("*"):
            shutil.chown(path, site.instructor, site.instructor)
        yield site
    finally:
        _stop(site, created)
        for user in created:
            subprocess.run(["userdel", "--remove", user], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        opened.close()


def _make_student_env(site: Site) -> None:
    """The students' environment, as deploy/jupyterhub/README.md makes it (a few minutes)."""
    wheel = student_install.build_wheel(site.tmp / "wheel")
    done = subprocess.run(
        ["bash", str(DEPLOY / "student_env.sh"), str(site.student_venv), str(wheel),
         str(Path(sys.base_prefix) / "bin" / "python3")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"student_env.sh failed:\n{done.stdout}\n{done.stderr[-3000:]}"
    shutil.rmtree(site.tmp / "wheel")


def _student_finds_no_answer(site: Site, student: str) -> None:
    """As ``student``: nothing of the instructor's side is importable or on the way of the
    student's server, and no readable file or git object of the deployment (the site's
    folders, the student environment, the Python it runs on) holds a hidden test, a solution
    or a line of the judge."""
    python = str(site.student_venv / "bin" / "python")
    code = (
        "import importlib.util as u, json, sys; print(json.dumps([sys.path, "
        "[m for m in ('grader', 'judge', 'course') if u.find_spec(m)]]))"
    )
    path, importable = json.loads(site.run_as(student, python, "-I", "-c", code))
    assert importable == ["course"], importable
    assert not [p for p in path if p.startswith(str(REPO))], path
    uid = pwd.getpwnam(student).pw_uid
    servers = [p for p in psutil.process_iter(["uids", "cmdline", "environ"]) if
               p.info["uids"].real == uid and "jupyterhub-singleuser" in " ".join(
                   p.info["cmdline"] or [])]  # fmt: skip
    assert servers, f"no server of {student} running"
    for server in servers:
        told = " ".join(server.info["cmdline"]) + " ".join((server.info["environ"] or {}).values())
        assert str(site.student_venv) in told and str(REPO) not in told, told

    walk = Path(tempfile.mkdtemp(prefix="course-walk-"))  # outside what the student walks
    try:
        (walk / "secrets.json").write_text(json.dumps(student_install.secret_lines()))
        shutil.copy(REPO / "tests" / "answer_walk.py", walk)
        for owned in [walk, *walk.iterdir()]:
            shutil.chown(owned, student, student)
        roots = [str(site.tmp), *{p for p in path if p and Path(p).is_dir()}]
        site.run_as(student, python, "-I", "answer_walk.py", "secrets.json", "report.json",
                    *roots, cwd=walk)  # fmt: skip
        report = json.loads((walk / "report.json").read_text())
    finally:
        shutil.rmtree(walk, ignore_errors=True)
    assert report["files"] > 1000, report  # the student environment was read
    assert not report["found"], "a student reads answers:\n" + "\n".join(report["found"][:20])


def _hidden_lines(source: Path) -> set[str]:
    """Code lines of the hidden tests that no visible cell nor course module shows (a failed
    check's message may be shown: string literals are left out)."""
    hidden, visible = tampering.split_hidden(read_notebook(source))
    public = "\n".join(line.strip() for line in visible)
    for module in (REPO / "course").rglob("*.py"):  # public: tracebacks show them
        public += "\n".join(line.strip() for line in module.read_text().splitlines())
    lines = {line.strip() for line in hidden}
    return {
        line
        for line in lines
        if len(line) > 20 and line not in public and not re.match(r"f?[\"']", line)
    }


def test_class_on_jupyterhub(site: Site) -> None:
    instructor, (good, blank) = site.instructor, site.students
    course = site.course

    # The instructor releases A to the exchange while the servers start.
    _launch_hub(site)
    _wait_for_hub(site)
    _request_servers(site, [instructor, good, blank])
    site.run_as(instructor, "course", "release", ASSIGNMENT, "--clone-only", cwd=course)
    site.run_as(instructor, "nbgrader", "release_assignment", ASSIGNMENT, cwd=course)
    assert (site.exchange / COURSE / "outbound" / ASSIGNMENT / NOTEBOOK).is_file()
    _wait_for_servers(site, [instructor, good, blank])

    # The instructor's JupyterLab opens on the course folder.
    listing = site.server(instructor, "GET", "api/contents")
    assert "source" in {item["name"] for item in listing["content"]}

    for student in (good, blank):
        listed = site.server(student, "GET", "assignments", course_id=COURSE)
        assert listed["success"], listed
        released = [a for a in listed["value"] if a["assignment_id"] == ASSIGNMENT]
        assert released and released[0]["status"] == "released", listed
        site.server(
            student, "POST", "assignments/fetch", course_id=COURSE, assignment_id=ASSIGNMENT
        )
        assert (site.home(student) / ASSIGNMENT / NOTEBOOK).is_file()

    # The good student writes the reference solution into their fetched notebook.
    notebook = read_notebook(site.home(good) / ASSIGNMENT / NOTEBOOK)
    fill(notebook, reference_code(read_notebook(course / "source" / ASSIGNMENT / NOTEBOOK)))
    solved = site.tmp / "solved.ipynb"
    nbformat.write(notebook, str(solved))
    solved.chmod(0o644)
    site.run_as(good, "cp", str(solved), str(site.home(good) / ASSIGNMENT / NOTEBOOK))
    solved.unlink()

    inbound = site.exchange / COURSE / "inbound"
    for student in (good, blank):
        done = site.server(
            student, "POST", "assignments/submit", course_id=COURSE, assignment_id=ASSIGNMENT
        )
        assert done["success"], done
        assert list(inbound.glob(f"{student}+{ASSIGNMENT}+*")), f"no submission of {student}"

    # The instructor collects, autogrades (sandboxed, as that user, with warm workers: an
    # ordinary user's zygote can set up the kernels' sandboxes too) and returns feedback.
    site.run_as(instructor, "nbgrader", "collect", ASSIGNMENT, cwd=course)
    for student in (good, blank):
        assert (course / "submitted" / student / ASSIGNMENT / NOTEBOOK).is_file()
    said = site.run_as(
        instructor, "course", "autograde", ASSIGNMENT, "--jobs", "2", cwd=course, errors=True
    )
    assert "started afresh" not in said, said  # the warm workers did start
    site.run_as(instructor, "course", "feedback", ASSIGNMENT, cwd=course)
    for student in (good, blank):
        assert (course / "feedback" / student / ASSIGNMENT / "masks_and_positions.html").is_file()
    site.run_as(instructor, "nbgrader", "release_feedback", ASSIGNMENT, cwd=course)

    scores = {row.student: row.auto_score for row in pipeline.grade_rows(course)}
    assert scores == {good: REFERENCE_POINTS, blank: 0}, scores

    hidden = _hidden_lines(course / "source" / ASSIGNMENT / NOTEBOOK)
    assert hidden
    for student in (good, blank):
        site.server(
            student, "POST", "assignments/fetch_feedback", course_id=COURSE,
            assignment_id=ASSIGNMENT,
        )  # fmt: skip
        pages = list((site.home(student) / ASSIGNMENT / "feedback").glob("*/*.html"))
        assert [p.name for p in pages] == ["masks_and_positions.html"], pages
        if student == blank:
            page = pages[0].read_text()
            text = html.unescape(re.sub(r"<[^>]+>", "", page))
            assert "HIDDEN TESTS" not in text
            shown = [line for line in hidden if line in text]
            assert not shown, f"{student}'s feedback shows hidden test code: {shown[:3]}"

    # The students' environment runs the notebooks' imports, and a student reads no answer.
    site.run_as(
        blank, str(site.student_venv / "bin" / "python"), "-c", "import course.a_masks.checks"
    )
    _student_finds_no_answer(site, blank)
