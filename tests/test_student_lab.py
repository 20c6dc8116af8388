"""The student's lab is the student's: `.venv/bin/course` works unactivated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import make_course_copy

BIN = Path(sys.executable).parent  # .venv/bin
BARE_PATH = "/usr/bin:/bin"  # a shell where the venv was never activated


def isolated_env(home: Path, path: str = BARE_PATH) -> dict[str, str]:
    """This process's environment with Jupyter's user folders in ``home`` and a bare PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV"))}
    env.pop("COURSE_DB", None)
    env.update(
        {
            "PATH": path,
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "IPYTHONDIR": str(home / "ipython"),
        }
    )
    return env


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
