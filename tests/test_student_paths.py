"""Nothing a student lacks: every path of this repository that a notebook or a check names is
one the student part installs, or the provenance of a file it ships.

A student has the release notebooks and the student part (``student/pyproject.toml``: the
``course`` package with its package data), not the repository's ``docs/``, ``tools/``,
``benchmarks/`` or records. So the text of every source and release notebook (markdown, and the
code cells' comments and strings), and every message string of ``course/`` (its docstrings are
for contributors and are left out), may name a path of the repository only if that path is in
the student part, or if it is listed in :data:`PROVENANCE` with what it made. A path is a word
whose first part is a top-level folder of the repository (``docs/speed.md``,
``tools/stages/``); other slashes (``D/H``, ``mingpt/model.py`` of another repository) are not.
Fast: reads files, runs nothing.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import re
import tokenize
import tomllib
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO

# Paths outside the student part that a text may name, each with why: the instructor's script
# that made a checkpoint the student part ships (the checkpoint says so itself).
PROVENANCE = {
    "tools/pretrain_review_lm.py": "made course/e_pretraining/review_lm.pt, which E loads",
    "tools/pretrain_birth_places.py": "made course/g_birth_places/wiki_char_lm.pt, which G loads",
}

TOP_LEVEL = sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(map(re.escape, TOP_LEVEL)) + r")/[\w./*-]*[\w/*])")
NOTEBOOKS = sorted((REPO / "source").glob("*/*.ipynb")) + sorted(
    (REPO / "release").glob("*/*.ipynb")
)


def package_data() -> list[str]:
    """The package-data patterns of the student part, relative to the repository."""
    config = tomllib.loads((REPO / "student" / "pyproject.toml").read_text())
    tool = config["tool"]["setuptools"]
    return [f"course/{pattern}" for pattern in tool["package-data"]["course"]]


def shipped(path: str) -> bool:
    """Whether ``path`` (a file or a folder, relative to the repository) is in the student
    part: a module or folder of the ``course`` package, or a file its package data takes."""
    if not path.startswith("course/"):
        return False
    target = REPO / path.rstrip("/")
    if "*" in path:
        return any(shipped(str(p.relative_to(REPO))) for p in REPO.glob(path))
    if target.is_dir():
        return "__pycache__" not in target.parts
    if not target.is_file():
        return False
    if target.suffix == ".py":
        return True
    patterns = package_data()
    return any(fnmatch.fnmatch(path, p.replace("**/", "*")) for p in patterns)


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names, a trailing full stop or comma left out."""
    return [m.group(1).rstrip(".,") for m in PATH.finditer(text)]


def code_text(source: str) -> str:
    """A code cell's comments and string literals (its magics and shell lines left out)."""
    kept = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )
    parts = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(kept + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return source  # not Python: read all of it
    for token in tokens:
        if token.type == tokenize.COMMENT:
            parts.append(token.string)
        elif token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            parts.append(token.string)
    return "\n".join(parts)


def notebook_texts() -> list[tuple[str, str]]:
    """(where, text) for every cell of every source and release notebook."""
    found = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            text = cell.source if cell.cell_type == "markdown" else code_text(cell.source)
            found.append((f"{path.relative_to(REPO)} c{index}", text))
    return found


def message_strings(module: Path) -> list[str]:
    """The string constants of a module of ``course/``, its docstrings left out."""
    tree = ast.parse(module.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]  # fmt: skip


def course_texts() -> list[tuple[str, str]]:
    """(where, text) for every message string of the ``course`` package."""
    return [
        (str(module.relative_to(REPO)), text)
        for module in sorted((REPO / "course").rglob("*.py"))
        for text in message_strings(module)
    ]


@pytest.mark.parametrize(
    "kind", ["notebooks", "course messages"], ids=["notebooks", "course_messages"]
)
def test_every_named_path_is_in_the_student_part_or_provenance(kind: str) -> None:
    texts = notebook_texts() if kind == "notebooks" else course_texts()
    lacking = [
        f"{where}: {path}"
        for where, text in texts
        for path in named_paths(text)
        if not shipped(path) and path not in PROVENANCE
    ]
    assert not lacking, "paths a student does not have (quote what is needed):\n" + "\n".join(
        lacking
    )


def test_the_provenance_scripts_exist_and_the_finder_sees_a_path() -> None:
    for script in PROVENANCE:
        assert (REPO / script).is_file(), script
    assert named_paths("see docs/speed.md, and `tools/stages/`.") == [
        "docs/speed.md",
        "tools/stages/",
    ]
    assert named_paths("D/H and mingpt/model.py and x/y") == []
    assert shipped("course/g_birth_places/wiki_char_lm.pt")
    assert shipped("course/data/cs224n_a5/")
    assert shipped("course/e_pretraining/similarity.py")
    assert not shipped("course/nonexistent.py")
    assert not shipped("docs/experiments.md")
