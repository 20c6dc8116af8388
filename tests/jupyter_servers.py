"""A JupyterLab server for a test: its user folders, its address, started and stopped.

Shared by the end-to-end fixtures (tests/e2e/) and tests/test_student_lab.py; no Playwright here.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 120  # seconds; a first JupyterLab start on a busy 2-core machine
# JupyterLab settings of a test server: no news pop-up, no update check, every cell rendered
# (no windowing: figures far below the fold exist in the DOM and can be counted).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def lab_home(home: Path, settings: dict[str, dict] | None = None) -> dict[str, str]:
    """The variables that put Jupyter's user folders in ``home``, ``settings`` written there."""
    for name, values in (settings or {}).items():
        path = home / "lab-settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return {
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
    }


def lab_address() -> tuple[int, str, list[str]]:
    """A free port on localhost, a fresh token, and the options that serve JupyterLab there
    (no browser opened, no check for updates)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(16)
    options = [
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        f"--IdentityProvider.token={token}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    return port, token, options


def _answers(url: str, token: str) -> bool:
    """Whether the server at ``url`` answers /api/status."""
    request = urllib.request.Request(
        f"{url}/api/status", headers={"Authorization": f"token {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def serving(
    command: list[str], cwd: Path, env: dict[str, str], log: Path, port: int, token: str
) -> Iterator[str]:
    """Run a JupyterLab ``command`` (its output to ``log``) until it answers /api/status; yield
    its base URL; then stop it and its process group (its kernels)."""
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(url, token):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(  # exit code None: still running, no answer in time
                    f"JupyterLab did not start (exit code {process.returncode}):\n{log.read_text()}"
                )
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass  # jupyter_server can hang at exit on an idle worker thread
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the server's group: stray kernels included
        except ProcessLookupError:
            pass
        process.wait(timeout=30)
