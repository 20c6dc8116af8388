"""Where the students install the course from: the one address a term sets, and what release does
with it.

The address is one line of ``nbgrader_config.py``, written by ``course address``::

    c.Course.student_install = "https://github.com/you/transformers-course"

It is either a git repository whose ``student/`` folder pip builds (the public copy of the
course, without ``source/``), or the URL of the student wheel (``make student-wheel``, uploaded
where the students can download it), or ``clone``: the notebooks are used where the course is
installed (a clone with ``make setup``, a JupyterHub image), and their first cell never installs.

``course release`` refuses while the address is unset (:func:`require`), then writes it into the
first cell of every release notebook (:func:`address_release`) and, for a GitHub repository, the
"Open in Colab" links of ``release/colab.md``. The cell itself is ``tools/colab.py``'s, the one the
real install test saw work; only its package line changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from grader.shared.paths import CONFIG_FILE, CourseError, load_config

CLONE = "clone"
DISTRIBUTION = "transformers-course"
SETTING = "c.Course.student_install"
PACKAGE_LINE = re.compile(r'^(\s*package = )"[^"\n]*"$', re.MULTILINE)
COLAB_PAGE = "colab.md"  # written into release/ for a GitHub address
PLACEHOLDER = "https://github.com/OWNER/REPO"  # tools/colab.py's, in the course's own notebooks


def configured(root: Path) -> str:
    """The course's address (``c.Course.student_install``): '' while unset."""
    value = load_config(root).get("Course", {}).get("student_install", "")
    return str(value).strip() if isinstance(value, str) else ""


def check_address(address: str) -> str:
    """``address`` when it is one the install cell can take; else a :class:`CourseError`."""
    if address == CLONE:
        return address
    if not re.fullmatch(r"(https?|file|ssh|git)://[^\s\"'#\\]+", address):
        raise CourseError(
            f"{address!r} is not an address the students can install from: give a git "
            "repository (https://github.com/you/course), the URL of the student wheel "
            "(https://.../transformers_course-0.1.0-py3-none-any.whl) or 'clone'"
        )
    if PLACEHOLDER in address:
        raise CourseError(f"{address} is the course's placeholder: give your own repository")
    return address


def install_line(address: str) -> str:
    """What pip installs from ``address``: the wheel itself, or the repository's student/."""
    if address.endswith(".whl"):
        return f"{DISTRIBUTION} @ {address}"
    return f"{DISTRIBUTION} @ git+{address}#subdirectory=student"


def set_address(root: Path, address: str) -> str:
    """Write ``address`` into nbgrader_config.py (its one ``c.Course.student_install`` line,
    added when missing); return what to tell the user."""
    address = check_address(address.strip())
    path = root / CONFIG_FILE
    text = path.read_text()
    line = f"{SETTING} = {json.dumps(address)}"
    pattern = re.compile(rf"^{re.escape(SETTING)}\s*=.*$", re.MULTILINE)
    if pattern.search(text):
        text = pattern.sub(lambda _: line, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n# Where students install the course from (docs/term.md).\n"
        text += line + "\n"
    path.write_text(text)
    if configured(root) != address:  # e.g. an environment variable the line reads
        raise CourseError(f"wrote {line} into {path}, but the configuration still reads "
                          f"{configured(root)!r}: look at that file's last lines")  # fmt: skip
    if address == CLONE:
        return "the notebooks are for a clone or a JupyterHub: their first cell never installs"
    return f"students will install {install_line(address)!r}; run `course release` again"


def require(root: Path, clone_only: bool = False) -> str:
    """The address a release writes; a :class:`CourseError` saying what to run while unset."""
    if clone_only:
        return CLONE
    address = configured(root)
    if not address or PLACEHOLDER in address:
        raise CourseError(
            "the students' install address is not set, so the notebooks' first cell would install "
            "from a placeholder. Run `course address https://github.com/you/course` (your public "
            "copy, or the URL of the student wheel; docs/term.md), or `course address clone` when "
            "the notebooks are used in a clone or on a JupyterHub only; or release once with "
            "`--clone-only`"
        )
    return check_address(address)


def address_release(root: Path, assignment: str, address: str) -> list[Path]:
    """Write ``address`` into the first cell of each release notebook of ``assignment`` (its package
    line; nothing changes for ``clone``) and, for a GitHub repository, release/colab.md's links.
    Return the notebooks changed."""
    changed = []
    if address != CLONE:
        for path in sorted((root / "release" / assignment).glob("*.ipynb")):
            notebook = json.loads(path.read_text())
            first = notebook["cells"][0] if notebook["cells"] else {}
            source = "".join(first.get("source", []))
            new = PACKAGE_LINE.sub(lambda m: f"{m.group(1)}{json.dumps(install_line(address))}",
                                   source, count=1)  # fmt: skip
            if new != source:
                first["source"] = new.splitlines(keepends=True)
                path.write_text(
                    json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
                )
                changed.append(path)
    write_colab_page(root, address)
    return changed


def colab_url(address: str, release_path: str) -> str | None:
    """Colab's address of a release notebook of a public GitHub repository (None otherwise)."""
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(\.git)?/?", address)
    if not match:
        return None
    return f"https://colab.research.google.com/github/{match.group(1)}/blob/main/{release_path}"


def write_colab_page(root: Path, address: str) -> Path | None:
    """``release/colab.md``: an "Open in Colab" link per release notebook, for a GitHub address
    (branch main of the public copy); removed for any other address."""
    page = root / "release" / COLAB_PAGE
    notebooks = sorted((root / "release").glob("*/*.ipynb"))
    links = [(p, colab_url(address, str(p.relative_to(root)))) for p in notebooks]
    if not notebooks or links[0][1] is None:
        page.unlink(missing_ok=True)
        return None
    rows = "\n".join(f"| {p.parent.name} | [{p.name}]({url}) |" for p, url in links)
    page.write_text(
        "# The notebooks on Colab\n\nEach link opens the notebook from branch main of "
        f"{address}; its first cell installs the course there.\n\n"
        f"| assignment | open in Colab |\n|---|---|\n{rows}\n"
    )
    return page
