"""The student's JupyterLab on their own copy, ``work/``, without nbgrader's instructor tools.

    python tools/student_lab.py [JUPYTERLAB OPTIONS]   # what `make lab` runs

It makes the copy first (``tools/student_copy.py``: each file of release/ the copy lacks), then
replaces itself by JupyterLab on ``work/``. nbgrader installs itself for every JupyterLab of this
environment (``.venv/etc/jupyter/jupyter_server_config.d/nbgrader.json`` enables its four server
extensions; its lab extension ``@jupyter/nbgrader`` adds the Nbgrader menu, Formgrader, Create
Assignment, Validate and the Assignments tab). The student's lab turns all of that off for this
launch only, through one Jupyter configuration folder of its own, ``tools/student_jupyter/``,
put first on ``JUPYTER_CONFIG_PATH`` (which Jupyter reads before the user's and the
environment's folders):

- ``jupyter_server_config.d/student_lab.json``: nbgrader's server extensions off (``/formgrader``
  and nbgrader's other handlers answer 404);
- ``labconfig/page_config.json``: ``@jupyter/nbgrader`` in ``disabledExtensions`` (and locked,
  so the Extension Manager cannot turn it back on), for JupyterLab and Notebook's ``/tree``.

Nothing of the environment's configuration changes: the instructor's ``course lab`` (``make
formgrader``) keeps every tool, and drops this folder from ``JUPYTER_CONFIG_PATH`` when it is
started from a terminal of the student's lab (``grader/coordinator/lab.py``). ``jupyter server
extension list`` does not read ``JUPYTER_CONFIG_PATH`` and so still lists nbgrader's extensions as
enabled; the running server's log and answers are what counts (``tests/test_student_lab.py``).
The environment's ``bin/`` comes first on PATH, as for the ``course`` command, so a terminal of the
lab finds ``course`` and ``python`` of this environment without activating it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import student_copy  # tools/, as when this script runs

from grader.shared.paths import use_this_python

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "tools" / "student_jupyter"  # the student lab's own Jupyter configuration


def command(work: Path, jupyter_args: list[str]) -> list[str]:
    """The command line of the student's JupyterLab on ``work`` (extra ``jupyter_args`` last)."""
    argv = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={work}"]
    if os.geteuid() == 0:  # JupyterLab refuses root unless told (a container, a CI runner)
        argv.append("--allow-root")
    return argv + jupyter_args


def environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the student lab's configuration folder first on ``JUPYTER_CONFIG_PATH``."""
    paths = [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    return {**env, "JUPYTER_CONFIG_PATH": os.pathsep.join([str(CONFIG), *paths])}


def main(jupyter_args: list[str]) -> None:
    """Make the student's copy, then replace this process by their JupyterLab; never returns."""
    student_copy.main()
    use_this_python()
    work = REPO / student_copy.WORK
    argv = command(work, jupyter_args)
    sys.stdout.flush()  # what the copy printed, before the lab replaces this process
    os.execve(argv[0], argv, environment(dict(os.environ)))  # Ctrl-C and signals reach the lab


if __name__ == "__main__":
    main(sys.argv[1:])
