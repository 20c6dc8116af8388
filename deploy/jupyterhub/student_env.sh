#!/usr/bin/env bash
# The environment the students' JupyterLab runs from on the hub: the student wheel (`make
# student-wheel`: the notebook side only, no grader, judge or source notebook), JupyterLab,
# JupyterHub's single-user server and nbgrader's Assignments tab; nbgrader_config.py of this
# folder copied into it. Nothing in it points into the instructor's checkout.
#
#   bash deploy/jupyterhub/student_env.sh TARGET WHEEL [PYTHON]
#
# TARGET: a new folder every user can read (e.g. /opt/transformers-student); WHEEL: the
# student wheel; PYTHON: the interpreter to build it from (default python3; every user must be
# able to run it: not a Python under /root).
set -euo pipefail
if [ $# -lt 2 ] || [ ! -f "$2" ]; then
    echo "usage: $0 TARGET WHEEL [PYTHON]  (WHEEL: dist/transformers_course-*.whl, make student-wheel)" >&2
    exit 2
fi
target=$1
wheel=$2
python=${3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

"$python" -m venv --clear "$target"
"$target/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$repo/constraints.txt" "$wheel" jupyterlab jupyterhub nbgrader
mkdir -p "$target/etc/jupyter"
cp "$here/nbgrader_config.py" "$target/etc/jupyter/nbgrader_config.py"
# Students never create or grade assignments: formgrader's and create-assignment's menus off.
for extension in formgrader create-assignment; do
    "$target/bin/jupyter" labextension disable --level=sys_prefix "@jupyter/nbgrader:$extension" \
        >/dev/null 2>&1
done
chmod -R a+rX,go-w "$target"
echo "student environment ready: $target"
