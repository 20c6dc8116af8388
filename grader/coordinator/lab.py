"""``course lab``: JupyterLab on the course folder, where formgrader finds the course.

Formgrader (Nbgrader menu > Formgrader) grades the written answers by hand, and its buttons
autograde and write feedback. It reads ``nbgrader_config.py`` of the folder JupyterLab runs in, so
the server must run at the course root: ``make lab`` (the students' JupyterLab on their own copy,
``work/``, without nbgrader's tools: ``tools/student_lab.py``) is not that folder. ``make
formgrader`` runs this command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grader.shared.paths import CONFIG_FILE, CourseError, use_this_python

# The mark of the student lab's Jupyter configuration (tools/student_jupyter/, nbgrader off), which
# `make lab` puts on JUPYTER_CONFIG_PATH and a terminal of that lab inherits.
STUDENT_LAB_MARK = Path("jupyter_server_config.d") / "student_lab.json"


def command(root: Path, jupyter_args: list[str]) -> list[str]:
    """The command line of JupyterLab on ``root`` (extra ``jupyter_args`` last, they win)."""
    argv = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:  # JupyterLab refuses root unless told (a container, a CI runner)
        argv.append("--allow-root")
    return argv + jupyter_args


def instructor_config_path(config_path: str) -> str:
    """``JUPYTER_CONFIG_PATH`` without the student lab's folder: run from a terminal of the
    student's lab, ``course lab`` still has the Nbgrader menu and formgrader."""
    kept = [
        p for p in config_path.split(os.pathsep) if p and not (Path(p) / STUDENT_LAB_MARK).is_file()
    ]
    return os.pathsep.join(kept)


def start(root: Path, jupyter_args: list[str]) -> None:
    """Replace this process by JupyterLab on the course ``root``; never returns.

    The server runs in ``root`` with this environment's programs first on PATH (nbgrader runs
    ``alembic`` and kernels by name), so formgrader, its Autograde and Generate Feedback buttons and
    plain ``nbgrader`` in its terminals all use the course's configuration.
    """
    if not (root / CONFIG_FILE).is_file():
        raise CourseError(f"{root} has no {CONFIG_FILE}: pass the course folder (--root PATH)")
    use_this_python()
    if config_path := os.environ.get("JUPYTER_CONFIG_PATH"):
        os.environ["JUPYTER_CONFIG_PATH"] = instructor_config_path(config_path)
    print(
        f"course lab: JupyterLab on {root}; formgrader: Nbgrader menu > Formgrader, or "
        "SERVER/formgrader (JupyterLab prints the server's address with its token below)",
        flush=True,
    )
    os.chdir(root)
    argv = command(root, jupyter_args)
    os.execv(argv[0], argv)  # the server is this process: Ctrl-C and signals reach it
