"""``course publish DIR``: the public copy of a graded class, the part students may see (``course
publish DIR ASSIGNMENT ...``: those assignments).

A graded class keeps the course in a private repository (the solutions and hidden tests of
``source/``, the gradebook's neighbours) and gives students one public address (docs/term.md).
This writes that public part into ``DIR``, a work tree of the public repository: ``course/`` (the
package the notebooks import), ``student/`` (what pip builds from the repository,
``#subdirectory=student``), the licence, the notebooks of the assignments handed out in
``release/`` (with ``release/colab.md``: "Open in Colab" links for a GitHub address) and
``README.md``, the student's page: a header written here (the course's name, the install line of
this address, the notebooks' links) above the body of ``student/GUIDE.md``. Nothing else is
copied: no ``source/``, ``grader/``, ``judge/``, ``demo/``, tests or personal data. ``DIR``'s own
files (``.git``) are kept.

What is handed out: the assignments named, or else every assignment released this term, that is
each one the gradebook holds with its notebooks (``course release`` records them there; the
repository's ``release/`` folder holds all eight, released or not, so it cannot say). Each
notebook's first cell must install from the configured address: one that still holds the
placeholder, or another address, is refused with the ``course release`` to run.

An assignment published earlier and not named now is kept when it is released this term and its
published notebooks install from this address (students have it: taking it away would break their
links mid-assignment; the output says it was kept); any other is removed (an earlier term's, or one
published by mistake), so that a student never sees work before it is given. Publishing with no
name rewrites ``release/`` to exactly the assignments released this term.

Every relative link of the Markdown files written (the README, ``release/colab.md``, those of
``course/`` and ``student/``) must resolve in the public copy, or nothing is written. The guide's
links are written relative to ``student/GUIDE.md`` (or to the copy's top); the README's copy
rewrites the former to the top.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

from nbgrader.api import Gradebook

from grader.shared.paths import CourseError, db_url, require_assignment
from grader.term import address as where

PACKAGES = ("course", "student")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
GUIDE = Path("student") / "GUIDE.md"
COLAB = f"release/{where.COLAB_PAGE}"
# A Markdown link's target: [text](target "title"), [id]: target, or an HTML href/src.
LINK = re.compile(
    r"\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)"
    r"|\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']",
    re.MULTILINE,
)


def released(root: Path) -> list[str]:
    """The assignments released this term: those the gradebook holds with their notebooks (a due
    date set before the release records the assignment alone)."""
    url = db_url(root)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        return []  # no release yet (and no empty gradebook made by asking)
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        return sorted(a.name for a in gb.assignments if a.notebooks)


def publish(root: Path, target: Path, address: str, names: list[str] | None = None) -> list[str]:
    """Write the public part of the course at ``root`` into ``target``, with the notebooks of the
    assignments ``names`` (default: all released this term) installing from ``address``; return
    what to tell the instructor, a line each."""
    target = target.resolve()
    if target == root or root in target.parents:
        raise CourseError(f"{target} is inside the course: give the public repository's folder")
    if (target / "source").exists() or (target / "nbgrader_config.py").exists():
        raise CourseError(f"{target} holds a course (source/ or nbgrader_config.py): not public")
    if not (root / GUIDE).is_file():
        raise CourseError(
            f"{GUIDE} is missing: the public README is the student's guide written "
            "there (`git merge upstream/main` brings it)"
        )
    term = released(root)
    chosen = sorted(set(names or term))
    if not chosen:
        raise CourseError("no assignment is released this term: `course release ASSIGNMENT` first")
    line = where.install_line(address)
    for name in chosen:
        require_assignment(root, name)
        _check_release(root, name, name in term, line)
    kept, removed = _earlier(target, chosen, term, line)
    notebooks = sorted(_notebooks(root, chosen) + _notebooks(target, kept))
    colab = _colab_page(address, notebooks)
    exists = _in_copy(root, target, chosen, kept)
    readme = _readme(root, address, line, notebooks, exists)
    broken = _links_lacking(root, chosen, {"README.md": readme, COLAB: colab}, exists)
    if broken:
        raise CourseError(
            "the public copy would link to files it lacks, so nothing was written: "
            + "; ".join(broken)
        )

    target.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        shutil.rmtree(target / name, ignore_errors=True)
        shutil.copytree(root / name, target / name, ignore=IGNORED)
    for old in (target / "release").glob("*") if (target / "release").is_dir() else []:
        if old.name not in kept:
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for name in chosen:
        shutil.copytree(root / "release" / name, target / "release" / name, ignore=IGNORED)
    (target / COLAB).write_text(colab)
    shutil.copy(root / "LICENSE", target / "LICENSE")
    (target / "README.md").write_text(readme)
    lines = [f"published {', '.join(chosen)} (course/, student/, release/, LICENSE, README.md)"]
    if kept:
        lines.append(
            f"kept as published before: {', '.join(kept)} (name it to publish its current release)"
        )
    if removed:
        lines.append(
            f"removed from {target / 'release'}: {', '.join(removed)} (not released "
            "this term, or installing from another address)"
        )
    return lines


def _check_release(root: Path, name: str, in_term: bool, line: str) -> None:
    """Refuse ``name`` unless it is released this term and each of its notebooks installs
    ``line``."""
    folder = root / "release" / name
    if not in_term:
        raise CourseError(
            f"{name} is not released this term (the gradebook has no release of it): "
            f"`course release {name}`, then publish"
        )
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        raise CourseError(f"{folder} has no notebook: `course release {name}`")
    for path in notebooks:
        cell = where.first_cell(path)
        if where.PLACEHOLDER in cell:
            raise CourseError(
                f"{path.relative_to(root)} still installs from the placeholder "
                f"{where.PLACEHOLDER}: `course release {name}` writes the address "
                "into it"
            )
        if line not in cell:
            raise CourseError(
                f"{path.relative_to(root)} does not install {line!r}, the "
                f"configured address's line: `course release {name}` (with "
                "--force where students have handed in) writes it"
            )


def _notebooks(base: Path, names: list[str]) -> list[str]:
    """The release notebooks of ``names`` under ``base``, as paths from it."""
    return [
        p.relative_to(base).as_posix()
        for name in names
        for p in sorted((base / "release" / name).glob("*.ipynb"))
    ]


def _in_copy(root: Path, target: Path, chosen: list[str], kept: list[str]) -> Callable:
    """Whether a path (from the top) will be in the public copy once written."""

    def exists(path: str) -> bool:
        top, _, rest = path.partition("/")
        assignment = rest.split("/")[0]
        if path in (".", "LICENSE", "README.md", "release", COLAB):
            return True
        if top in PACKAGES or (top == "release" and assignment in chosen):
            return (root / path).exists()
        return top == "release" and assignment in kept and (target / path).exists()

    return exists


def _links_lacking(
    root: Path, chosen: list[str], written: dict[str, str], exists: Callable[[str], bool]
) -> list[str]:
    """The relative links of the Markdown pages of the public copy (``written`` here, or copied:
    those of ``course/``, ``student/`` and the chosen release folders) that name a file the copy
    will lack, as 'PAGE: LINK'."""
    pages = dict(written)
    for folder in [*PACKAGES, *(f"release/{name}" for name in chosen)]:
        for page in sorted((root / folder).rglob("*.md")):
            pages[page.relative_to(root).as_posix()] = page.read_text()
    broken = []
    for name, text in pages.items():
        for match in LINK.finditer(text):
            link = next(g for g in match.groups() if g)
            if not _relative(link):
                continue
            path = posixpath.normpath(posixpath.join(posixpath.dirname(name), link.split("#")[0]))
            if path.startswith("..") or not exists(path):
                broken.append(f"{name}: {link}")
    return broken


def _earlier(target: Path, chosen: list[str], term: list[str], line: str) -> tuple[list, list]:
    """The assignments an earlier publish left in ``target``, not named now: those kept (released
    this term, installing ``line``) and those to remove."""
    kept, removed = [], []
    folder = target / "release"
    for old in sorted(p for p in folder.glob("*") if p.is_dir()) if folder.is_dir() else []:
        if old.name in chosen:
            continue
        notebooks = list(old.glob("*.ipynb"))
        good = notebooks and all(line in where.first_cell(p) for p in notebooks)
        (kept if old.name in term and good else removed).append(old.name)
    return kept, removed


def course_name(root: Path) -> str:
    """The course's name: the first heading of its README.md."""
    readme = root / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    heading = re.search(r"^# +(.+?)\s*$", text, re.MULTILINE)
    return heading.group(1) if heading else root.name


def _colab_page(address: str, notebooks: list[str]) -> str:
    """``release/colab.md`` of the published notebooks: their "Open in Colab" links for a GitHub
    address; else the notebooks themselves, to upload to Colab (so that the page a guide links to
    is there whatever the address)."""
    links = [(p, where.colab_url(address, p)) for p in notebooks]
    if links and links[0][1]:
        rows = "\n".join(f"| {p.split('/')[1]} | [{p.split('/')[-1]}]({url}) |" for p, url in links)
        return (
            "# The notebooks on Colab\n\nEach link opens the notebook from branch main of "
            f"{address}; its first cell installs the course there.\n\n"
            f"| assignment | open in Colab |\n|---|---|\n{rows}\n"
        )
    rows = "\n".join(f"| {p.split('/')[1]} | [{p.split('/')[-1]}]({p[len('release/') :]}) |"
                     for p in notebooks)  # fmt: skip
    return (
        "# The notebooks on Colab\n\nThis copy is not on GitHub, so no link opens a notebook on "
        "Colab: download it here, then open it on Colab with File > Upload notebook; its first "
        f"cell installs the course there.\n\n| assignment | notebook |\n|---|---|\n{rows}\n"
    )


def _readme(
    root: Path, address: str, line: str, notebooks: list[str], exists: Callable[[str], bool]
) -> str:
    """The student's page: a header (name, install line, notebooks) and the guide's body, its
    first heading dropped, its links made relative to the copy's top and the placeholder's
    install line, where it gives one, this address's."""
    rows = []
    for path in notebooks:
        url = where.colab_url(address, path)
        colab = f" ([open in Colab]({url}))" if url else ""
        rows.append(f"- {path.split('/')[1]}: [{path.split('/')[-1]}]({path}){colab}")
    header = (
        f"# {course_name(root)}\n\n"
        "The notebooks handed out so far, each with its first cell installing the course where "
        "it is missing:\n\n" + "\n".join(rows) + "\n\n"
        "To install the course into your own Python by hand (a notebook's first cell does the "
        "same), on Linux without an NVIDIA GPU take PyTorch's CPU build first: PyPI's Linux "
        "torch is the CUDA build, about 5 GB.\n\n"
        "    pip install torch --index-url https://download.pytorch.org/whl/cpu  # Linux, no GPU\n"
        f'    pip install "{line}"\n\n'
        "Code: MIT. Course text: CC BY 4.0 ([LICENSE](LICENSE)).\n"
    )
    guide = (root / GUIDE).read_text().replace(where.install_line(where.PLACEHOLDER), line)
    guide = re.sub(r"\A\s*# .*\n", "", guide, count=1)
    guide = _relink(guide, lambda link: _from_student(link, exists))
    return header + "\n" + guide.lstrip("\n")


def _from_student(link: str, exists: Callable[[str], bool]) -> str:
    """A guide's relative ``link`` made relative to the copy's top: as written from ``student/``
    when it names a file of the copy from there, else as it is."""
    path, _, fragment = link.partition("#")
    moved = posixpath.normpath(posixpath.join("student", path))
    if path and not moved.startswith("..") and exists(moved):
        return moved + ("#" + fragment if fragment else "")
    return link


def _relative(link: str) -> bool:
    return bool(link) and not re.match(r"[a-zA-Z][\w+.-]*:|#|/", link)


def _relink(text: str, change: Callable[[str], str]) -> str:
    """``text`` with each relative link target passed through ``change``."""

    def one(match: re.Match) -> str:
        whole = match.group(0)
        for index in (1, 2, 3):
            link = match.group(index)
            if link and _relative(link):
                start, end = match.span(index)
                offset = match.start(0)
                return whole[: start - offset] + change(link) + whole[end - offset :]
        return whole

    return LINK.sub(one, text)
