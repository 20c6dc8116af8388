"""``course lab``: JupyterLab on the course folder, where formgrader finds the course.

Formgrader (Nbgrader menu > Formgrader) grades the written answers by hand, and its buttons
autograde and write feedback. It reads ``nbgrader_config.py`` of the folder JupyterLab runs in, so
the server must run at the course root: ``make lab`` (the students' JupyterLab on their own copy,
``work/``) is not that folder. ``make formgrader`` runs this command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grader.shared.paths import CONFIG_FILE, CourseError, use_this_python


def command(root: Path, jupyter_args: list[str]) -> list[str]:
    """The command line of JupyterLab on ``root`` (extra ``jupyter_args`` last, they win)."""
    argv = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:  # JupyterLab refuses root unless told (a container, a CI runner)
        argv.append("--allow-root")
    return argv + jupyter_args


def start(root: Path, jupyter_args: list[str]) -> None:
    """Replace this process by JupyterLab on the course ``root``; never returns.

    The server runs in ``root`` with this environment's programs first on PATH (nbgrader runs
    ``alembic`` and kernels by name), so formgrader, its Autograde and Generate Feedback buttons and
    plain ``nbgrader`` in its terminals all use the course's configuration.
    """
    if not (root / CONFIG_FILE).is_file():
        raise CourseError(f"{root} has no {CONFIG_FILE}: pass the course folder (--root PATH)")
    use_this_python()
    print(
        f"course lab: JupyterLab on {root}; formgrader: Nbgrader menu > Formgrader, or "
        "SERVER/formgrader (JupyterLab prints the server's address with its token below)",
        flush=True,
    )
    os.chdir(root)
    argv = command(root, jupyter_args)
    os.execv(argv[0], argv)  # the server is this process: Ctrl-C and signals reach it
