"""Where the students install the course from: the one address a term sets, and what release does
with it.

The address is one line of ``nbgrader_config.py``, written by ``course address``::

    c.Course.student_install = "https://github.com/you/transformers-course"

It is either a git repository whose ``student/`` folder pip builds (the public copy of the
course, without ``source/``), or the URL of the student wheel (``make student-wheel``, uploaded
where the students can download it), or ``clone``: the notebooks are used where the course is
installed (a clone with ``make setup``, a JupyterHub image), and their first cell never installs.
``course address`` takes each form a student's pip installs from and writes it in one form
(:func:`normalise`: https, ``file://localhost/PATH``, a GitHub ssh address as its https form).

``course release`` refuses while the address is unset (:func:`require`), then writes it into the
first cell of every release notebook (:func:`address_release`) and, for a GitHub repository, the
"Open in Colab" links of ``release/colab.md``. The cell itself is ``tools/colab.py``'s, the one the
real install test saw work; only its package line changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

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


FORMS = (
    "the forms it takes: a git repository's https address (https://github.com/you/course, or "
    "git+https://...), a GitHub ssh address (git@github.com:you/course.git, written as its https "
    "form), a local git repository (file://localhost/PATH, git+file://localhost/PATH or "
    "file:///PATH), the https URL of the student wheel "
    "(https://.../transformers_course-0.1.0-py3-none-any.whl), or 'clone'"
)
GITHUB_SSH = re.compile(
    r"(?:git@github\.com:|(?:git\+)?ssh://(?:git@)?github\.com(?::22)?/)"
    r"([\w.-]+)/([\w.-]+?)(?:\.git)?/?"
)
UNSAFE = re.compile(r"[\s\"'#\\]")  # what would break the install line or the cell's string


def normalise(address: str) -> tuple[str, str]:
    """``address`` in the one form the install line takes, and a note on what was rewritten ('' if
    nothing); a :class:`CourseError` naming the forms when pip cannot install from it.

    The install line adds ``git+`` to a repository's address, so a given ``git+`` is dropped. A
    local repository is written ``file://localhost/PATH``: the pip of a fresh Python 3.11 venv
    (23.2, packaging 21.3) refuses ``git+file:///PATH`` ("It looks like a path"). A GitHub ssh
    address becomes its https form, since a student's pip has no ssh key; other ssh hosts are
    refused for the same reason.
    """
    address = address.strip()
    if address == CLONE:
        return address, ""
    notes = []
    if UNSAFE.search(address):
        raise CourseError(f"{address!r} is not an address the students can install from "
                          f"(a space, a quote, '#' or a backslash in it); {FORMS}")  # fmt: skip
    ssh = GITHUB_SSH.fullmatch(address)
    if ssh:
        public = f"https://github.com/{ssh.group(1)}/{ssh.group(2)}"
        notes.append(
            f"{address} is an ssh address, which students' pip cannot use (their machines have "
            f"no ssh key for it), so its public https form {public} is written"
        )
        address = public
    elif re.match(r"(git\+)?ssh://|[\w.-]+@[\w.-]+:", address):
        raise CourseError(f"{address!r} is an ssh address: students' pip cannot use ssh keys, so "
                          f"give the repository's public https address; {FORMS}")  # fmt: skip
    if address.startswith("git+"):
        address = address[len("git+") :]
        notes.append("git+ dropped (the install line adds it)")
    if address.startswith("file:///"):
        address = "file://localhost/" + address[len("file:///") :]
        notes.append("file:/// written as file://localhost/ (a fresh venv's pip 23.2 refuses a "
                     "file address without a host)")  # fmt: skip
    if not re.fullmatch(r"(https://[^/]+|file://localhost)/\S+", address):
        raise CourseError(f"{address!r} is not an address the students can install from; {FORMS}")
    if PLACEHOLDER in address:
        raise CourseError(f"{address} is the course's placeholder: give your own repository")
    if not is_wheel(address) and re.fullmatch(r"https://github\.com/[^/]+/[^/]+/.+", address):
        raise CourseError(f"{address} is a page of a GitHub repository, not its address "
                          f"(https://github.com/OWNER/NAME); {FORMS}")  # fmt: skip
    return address, "; ".join(notes)


def check_address(address: str) -> str:
    """``address`` when it is already in the form the install line takes; else a
    :class:`CourseError` (one that :func:`normalise` would rewrite says what ``course address``
    writes)."""
    written, note = normalise(address)
    if note:
        raise CourseError(f"{address!r}: {note}; run `course address {address}` to write it")
    return written


def is_wheel(address: str) -> bool:
    """Whether ``address`` is a wheel's URL (not a git repository)."""
    return urlsplit(address).path.endswith(".whl")


def install_line(address: str) -> str:
    """What pip installs from ``address``: the wheel itself, or the repository's student/."""
    if is_wheel(address):
        return f"{DISTRIBUTION} @ {address}"
    return f"{DISTRIBUTION} @ git+{address}#subdirectory=student"


def set_address(root: Path, address: str) -> str:
    """Write ``address`` into nbgrader_config.py (its one ``c.Course.student_install`` line,
    added when missing); return what to tell the user."""
    address, note = normalise(address)
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
    said = (
        f"students will install {install_line(address)!r}; run `course release` again (then "
        "`course publish DIR` for a public repository)"
    )
    return f"{note}.\n{said}" if note else said


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
    changed = address_notebooks(root / "release" / assignment, address)
    write_colab_page(root, address)
    return changed


def address_notebooks(folder: Path, address: str) -> list[Path]:
    """Write ``address`` into the package line of the first cell of each notebook in ``folder``
    (nothing for ``clone``); return the notebooks changed. ``course release`` applies it to the
    scratch release it compares with (:func:`grader.term.midterm.changes`) too."""
    changed = []
    if address == CLONE:
        return changed
    for path in sorted(folder.glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        first = notebook["cells"][0] if notebook["cells"] else {}
        source = "".join(first.get("source", []))
        new = PACKAGE_LINE.sub(lambda m: f"{m.group(1)}{json.dumps(install_line(address))}",
                               source, count=1)  # fmt: skip
        if new != source:
            first["source"] = new.splitlines(keepends=True)
            text = json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False)
            path.write_text(text + "\n")
            changed.append(path)
    return changed


def first_cell(path: Path) -> str:
    """The source of a notebook's first cell ('' when it has none)."""
    cells = json.loads(path.read_text()).get("cells", [])
    return "".join(cells[0].get("source", [])) if cells else ""


def colab_url(address: str, release_path: str) -> str | None:
    """Colab's address of a release notebook of a public GitHub repository (None otherwise)."""
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(\.git)?/?", address)
    if not match:
        return None
    return f"https://colab.research.google.com/github/{match.group(1)}/blob/main/{release_path}"


def write_colab_page(root: Path, address: str) -> Path | None:
    """``release/colab.md``: an "Open in Colab" link per release notebook that installs from
    ``address`` (released with it), for a GitHub address (branch main of the public copy); removed
    for any other address."""
    page = root / "release" / COLAB_PAGE
    notebooks = sorted((root / "release").glob("*/*.ipynb"))
    if address != CLONE:
        notebooks = [p for p in notebooks if install_line(address) in first_cell(p)]
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
