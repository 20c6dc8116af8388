"""JupyterHub configuration for a class of the course on one Linux machine.

Each user is a system user; the hub (run as root) starts each user's JupyterLab as that user
(LocalProcessSpawner): the instructor's from the course's virtual environment (the checkout,
with the grader, the judge and the source notebooks, readable by the instructor only), the
students' from the student environment (``student_env.sh``: the student wheel, JupyterLab and
nbgrader's Assignments tab, no answer). What differs from one site to another comes from
environment variables:

    COURSE_HUB_IP           address of the hub's public URL (default 127.0.0.1)
    COURSE_HUB_PORT         its port (default 8000)
    COURSE_HUB_STATE        folder of the hub's database, cookie secret and proxy pid
                            (default /srv/jupyterhub; root-only)
    COURSE_VENV             the course's virtual environment (default: .venv of this repository)
    COURSE_STUDENT_VENV     the students' environment, made by student_env.sh (required when
                            there are students)
    COURSE_EXCHANGE         nbgrader's shared exchange folder (default /srv/nbgrader/exchange)
    COURSE_INSTRUCTOR       the instructor's user name (default instructor)
    COURSE_STUDENTS         the students' user names, comma-separated
    COURSE_DIR              the instructor's course folder (default ~instructor/transformers)
    COURSE_HUB_ADMIN_TOKEN  if set, an API token for a "course-admin" service that may manage
                            users and servers (used by tests/test_jupyterhub.py; keep it secret)
    COURSE_HUB_API_PORT, COURSE_HUB_PROXY_API_PORT
                            the hub's and the proxy's internal ports (default 8081, 8001)
"""

import os
from pathlib import Path

from jupyterhub.spawner import Spawner

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

HERE = Path(__file__).resolve().parent
env = os.environ.get
venv = Path(env("COURSE_VENV", str(HERE.parents[1] / ".venv")))
state = Path(env("COURSE_HUB_STATE", "/srv/jupyterhub"))
instructor = env("COURSE_INSTRUCTOR", "instructor")
students = {name.strip() for name in env("COURSE_STUDENTS", "").split(",") if name.strip()}
exchange = env("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
student_venv = Path(env("COURSE_STUDENT_VENV", "/nonexistent"))
if students and not (student_venv / "bin" / "jupyterhub-singleuser").is_file():
    raise SystemExit(
        f"COURSE_STUDENT_VENV={env('COURSE_STUDENT_VENV', '')!r} is not a student environment: "
        "make one with deploy/jupyterhub/student_env.sh (students never run the instructor's)"
    )

# Network: everything on localhost unless COURSE_HUB_IP says otherwise (put TLS in front then).
c.JupyterHub.ip = env("COURSE_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("COURSE_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('COURSE_HUB_PROXY_API_PORT', '8001')}"
c.Spawner.ip = "127.0.0.1"

# The hub's own files, all in one folder only root can read.
state.mkdir(mode=0o700, parents=True, exist_ok=True)
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")

# Who may log in (PAM: their system passwords). The instructor is not a hub admin: an admin
# could open the students' servers, that is run code as them.
c.Authenticator.allowed_users = {instructor} | students

# Single-user servers: JupyterLab from the course's venv, as the user, in the user's home.
c.Spawner.cmd = [str(venv / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90
c.Spawner.environment = {
    "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    # nbgrader_config.py of this folder: the course id and the shared exchange, for everyone.
    "JUPYTER_CONFIG_PATH": str(HERE),
    "COURSE_EXCHANGE": exchange,
}


def per_user(spawner: Spawner) -> None:
    """The instructor's server opens on the course folder (formgrader reads its
    nbgrader_config.py there); students' servers run from the student environment, where
    nbgrader_config.py is in etc/jupyter, without formgrader."""
    if spawner.user.name == instructor:
        spawner.notebook_dir = env("COURSE_DIR", "~/transformers")
    else:
        spawner.cmd = [str(student_venv / "bin" / "jupyterhub-singleuser")]
        spawner.environment = {
            "PATH": f"{student_venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "COURSE_EXCHANGE": exchange,
        }
        spawner.args = [
            *spawner.args,
            "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=False",
        ]


c.Spawner.pre_spawn_hook = per_user

# An API token for scripts (the smoke test): manage users, start servers, issue user tokens.
if env("COURSE_HUB_ADMIN_TOKEN"):
    c.JupyterHub.services = [{"name": "course-admin", "api_token": env("COURSE_HUB_ADMIN_TOKEN")}]
    c.JupyterHub.load_roles = [
        {
            "name": "course-admin",
            "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users"],
            "services": ["course-admin"],
        }
    ]
