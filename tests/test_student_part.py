"""The student part (``make student-wheel``): what its wheel holds, and that it works alone.

- Every file of the wheel is read: no hidden test or solution marker, no notebook, nothing of
  ``grader/``, ``judge/``, ``source/`` or ``tools/`` (by path or by content), and no function
  that is a function of the judge, a solution or a hidden test's reference, even with its names
  changed (:func:`shape`: the same code up to a consistent renaming).
- Installed alone into a fresh virtual environment (torch 2.13.0 from local disk, the other
  requirements at the instructor's pins), it runs every assignment's visible tests on the
  reference answers, and nothing of the instructor's side is importable there (slow: a few
  minutes, mostly pip). The lower bounds: ``make student-lower-bounds``.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import student_install
from tests.conftest import REPO
from tests.direct_run import TEST

MARKERS = [b"BEGIN HIDDEN TESTS", b"END HIDDEN TESTS", b"BEGIN SOLUTION", b"END SOLUTION"]
INSTRUCTOR = ("grader", "judge", "source", "tools", "release", "demo", "tests", "deploy")
# A function this small (in AST nodes, once anonymised) says nothing about where it came from.
SMALLEST = 20


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return student_install.build_wheel(tmp_path_factory.mktemp("wheel"))


def wheel_files(wheel: Path) -> dict[str, bytes]:
    """Every file of the wheel, by name, with the members of the zip files it holds (the
    checkpoints) as ``NAME!MEMBER``."""
    found = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            data = found[name] = archive.read(name)
            if zipfile.is_zipfile(io.BytesIO(data)):
                with zipfile.ZipFile(io.BytesIO(data)) as inner:
                    for member in inner.namelist():
                        found[f"{name}!{member}"] = inner.read(member)
    return found


class _Anonymise(ast.NodeTransformer):
    """Names, arguments, docstrings and annotations out: what is left is the code's shape."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def rename(self, name: str) -> str:
        return self.names.setdefault(name, f"n{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id=self.rename(node.id), ctx=ast.Load())

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.arg(arg=self.rename(node.arg))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        node = ast.FunctionDef(
            name="f", args=node.args, body=body, decorator_list=[], returns=None, type_params=[]
        )
        return self.generic_visit(node)


def shape(function: ast.FunctionDef) -> str | None:
    """The function's code with every name renamed by order of appearance; None when it is too
    small to tell anything."""
    anonymous = _Anonymise().visit(ast.parse(ast.unparse(function)).body[0])
    if sum(1 for _ in ast.walk(anonymous)) < SMALLEST:
        return None
    return ast.dump(anonymous, annotate_fields=False, include_attributes=False)


def functions(code: str) -> Iterator[ast.FunctionDef]:
    """Every function defined in ``code``, nested ones and methods included."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def notebook_functions(path: Path) -> Iterator[ast.FunctionDef]:
    """The answers of a source notebook: every function its solution cells define, and the
    references its test cells define (``_reference_...``; the tests' other helpers build the
    named mistakes, which the visible checks of ``course/`` build too)."""
    for cell in json.loads(path.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code" or not (meta.get("solution") or meta.get("grade")):
            continue
        lines = "".join(cell["source"]).split("\n")
        code = "\n".join("" if line.lstrip()[:1] in "%!" else line for line in lines)
        for function in functions(code):
            if meta.get("solution") or "reference" in function.name:
                yield function


def references() -> dict[str, str]:
    """shape -> where: every function of the judge, and the answers of every source notebook
    (:func:`notebook_functions`)."""
    found = {}
    for path in sorted((REPO / "judge").glob("*.py")):
        for function in functions(path.read_text()):
            if key := shape(function):
                found[key] = f"judge/{path.name}: {function.name}"
    for path in sorted(REPO.glob("source/*/*.ipynb")):
        for function in notebook_functions(path):
            if key := shape(function):
                found[key] = f"{path.relative_to(REPO)}: {function.name}"
    return found


def test_the_shape_of_a_function_ignores_its_names() -> None:
    """The scan's own check: B's split_heads, renamed and re-documented, has its shape; a
    different computation has another."""
    answer = (
        "def split_heads(x, nhead):\n    batch, length, width = x.shape\n"
        "    return x.view(batch, length, nhead, width // nhead).transpose(1, 2)\n"
    )
    renamed = (
        "def split(t: torch.Tensor, h: int) -> torch.Tensor:\n    '''(B, T, D) -> ...'''\n"
        "    b, n, d = t.shape\n    return t.view(b, n, h, d // h).transpose(1, 2)\n"
    )
    other = renamed.replace("transpose(1, 2)", "transpose(1, 3)")
    (first,), (second,), (third,) = (list(functions(c)) for c in (answer, renamed, other))
    assert shape(first) is not None
    assert shape(first) == shape(second) != shape(third)


def test_the_wheel_holds_the_notebook_side_only(wheel: Path) -> None:
    files = wheel_files(wheel)
    tops = {name.split("/")[0] for name in files}
    assert tops == {"course", "transformers_course-0.1.0.dist-info"}, tops
    parts = {part for name in files for part in name.split("/")[:-1]}
    assert not parts & set(INSTRUCTOR), parts & set(INSTRUCTOR)
    assert not [n for n in files if n.endswith(".ipynb")], "a notebook in the wheel"
    assert "course/e_pretraining/review_lm.pt" in files
    assert "course/g_birth_places/wiki_char_lm.pt" in files
    assert "course/data/tinyshakespeare/input.txt" in files


def test_no_file_of_the_wheel_holds_a_hidden_test_or_a_solution(wheel: Path) -> None:
    files = wheel_files(wheel)
    marked = [f"{name}: {m.decode()}" for name, data in files.items() for m in MARKERS if m in data]
    assert not marked, marked
    instructor = {
        hashlib.sha256(p.read_bytes()).hexdigest(): str(p.relative_to(REPO))
        for folder in INSTRUCTOR
        for p in (REPO / folder).rglob("*")
        if p.is_file() and p.stat().st_size > 64 and "__pycache__" not in p.parts
    }
    copies = [
        f"{name} is {instructor[digest]}"
        for name, data in files.items()
        if (digest := hashlib.sha256(data).hexdigest()) in instructor
    ]
    assert not copies, copies


def test_no_function_of_the_wheel_is_a_reference_or_an_answer(wheel: Path) -> None:
    known = references()
    assert len(known) > 100, "the references were not found"
    leaks = []
    for name, data in wheel_files(wheel).items():
        if not name.endswith(".py"):
            continue
        for function in functions(data.decode()):
            if (key := shape(function)) in known:
                leaks.append(f"{name}: {function.name} is {known[key]}")
    assert not leaks, "answers in the student wheel:\n" + "\n".join(leaks)


@pytest.mark.deep
@pytest.mark.slow  # a fresh virtual environment: about 3 minutes, mostly pip
@pytest.mark.parametrize("requirements", ["instructor's pins", "lowest but torch"])
def test_the_student_part_alone_passes_every_visible_test(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, requirements: str
) -> None:
    """With the instructor's exact pins, and with the lowest version that student/pyproject.toml
    admits of each requirement but torch (student/lower-bounds.txt; torch stays at the pin, see
    ``student_install.lower_bounds_but_torch``)."""
    folder = tmp_path_factory.mktemp("student")
    constraints = (
        student_install.CONSTRAINTS
        if requirements == "instructor's pins"
        else student_install.lower_bounds_but_torch(folder)
    )
    python = student_install.fresh_environment(folder / "venv", wheel, constraints)
    for module in ("grader", "judge", "nbgrader", "dask", "psycopg2", "jupyterhub", "tests"):
        code = f"import importlib.util as u; print(u.find_spec({module!r}))"
        found = subprocess.run(
            [str(python), "-I", "-c", code],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        )
        assert found.stdout.strip() == "None", f"{module} importable: {found.stdout}"
    report = student_install.run_visible_tests(python, folder / "run")
    assert report["course"].startswith(str(folder / "venv")), report["course"]
    tests = [c for c in report["cells"] if c["kind"] == TEST]
    visible = sum(
        1
        for path in REPO.glob("release/*/*.ipynb")
        for cell in json.loads(path.read_text())["cells"]
        if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code"
    )
    assert len(tests) == visible > 50
    assert not student_install.failures(report), "\n".join(student_install.failures(report))


def walk_as_this_user(roots: list[Path], folder: Path) -> dict:
    """``tests/answer_walk.py`` over ``roots`` in a child process, as the hub test runs it."""
    (folder / "secrets.json").write_text(json.dumps(student_install.secret_lines(False)))
    walker = REPO / "tests" / "answer_walk.py"
    command = [sys.executable, "-I", str(walker), "secrets.json", "report.json"]
    subprocess.run([*command, *map(str, roots)], cwd=folder, check=True, timeout=300)
    return json.loads((folder / "report.json").read_text())


def test_the_walk_finds_answers_in_files_and_in_git_history(tmp_path: Path) -> None:
    """The hub test's own check: a source notebook committed then removed is found in the
    repository's objects, a copy of a judge module as a file; released notebooks and the
    course's modules are not answers."""
    site = tmp_path / "site"
    clone = site / "clone"
    clone.mkdir(parents=True)
    shutil.copy(REPO / "source/a_masks/masks_and_positions.ipynb", clone)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "source"], check=True)
    subprocess.run([*git, "rm", "-q", "masks_and_positions.ipynb"], check=True)
    subprocess.run([*git, "commit", "-qm", "removed"], check=True)
    shutil.copytree(REPO / "release", site / "release")
    shutil.copytree(REPO / "course", site / "course")
    (tmp_path / "out").mkdir()
    clean = walk_as_this_user([site], tmp_path / "out")
    assert clean["files"] > 50 and clean["objects"] >= 5
    assert [f for f in clean["found"] if "(git objects)" not in f] == []
    assert any(f.startswith(f"{clone / '.git'} (git objects): line") for f in clean["found"])
    shutil.rmtree(clone)
    shutil.copy(REPO / "judge/b_attention.py", site / "notes.txt")
    planted = walk_as_this_user([site], tmp_path / "out")
    where = f"{site / 'notes.txt'}: line"
    assert planted["found"] and all(f.startswith(where) for f in planted["found"])
