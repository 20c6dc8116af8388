"""The repository's own promises: pins in step, the student part's ranges, licence, the
README's make targets, CI."""

from __future__ import annotations

import re
import subprocess
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import REPO

PIN = re.compile(r"([A-Za-z0-9_.-]+)(?:\[[a-z,]+\])?==(\S+)")

# What Colab's runtime had when these ranges were set (googlecolab/backend-info, pip-freeze.txt,
# August 2026): the student part must install on it without replacing any of them.
COLAB = {
    "torch": "2.11.0",
    "ipykernel": "6.17.1",
    "ipywidgets": "7.7.1",
    "matplotlib": "3.10.0",
    "numpy": "2.1.3",
    "datasets": "4.0.0",
    "tokenizers": "0.22.2",
    "tqdm": "4.67.3",
}


def requirements(path: str) -> list[Requirement]:
    """Every requirement of a pyproject.toml: its dependencies and all its extras."""
    project = tomllib.loads((REPO / path).read_text())["project"]
    extras = project.get("optional-dependencies", {}).values()
    return [Requirement(d) for d in project["dependencies"] + [d for e in extras for d in e]]


def pins(path: str) -> dict[str, str]:
    """name -> version of every ``name==version`` line of a requirements or constraints file."""
    lines = (REPO / path).read_text().splitlines()
    return dict(PIN.match(line).groups() for line in lines if line and not line.startswith("#"))


def pins_from_environment() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return dict(PIN.match(d).groups() for d in pip if "==" in d)


def test_every_dependency_is_pinned_within_its_range() -> None:
    """constraints.txt pins every requirement of both parts, inside the range each declares."""
    pinned = pins("constraints.txt")
    for requirement in requirements("pyproject.toml") + requirements("student/pyproject.toml"):
        assert requirement.name in pinned, f"constraints.txt does not pin {requirement.name}"
        version = pinned[requirement.name]
        assert requirement.specifier.contains(version), f"{requirement} excludes {version}"
        for extra in requirement.extras:  # dask[distributed]: the extra's package pinned too
            assert extra in pinned, f"constraints.txt does not pin {extra} ({requirement})"
    assert pinned["torch"] == "2.13.0"


def test_environment_yml_has_the_same_pins() -> None:
    assert pins_from_environment() == pins("constraints.txt")


def test_the_student_part_requires_ranges_that_colab_satisfies() -> None:
    """No exact pin in the student part, every bound is a real range, and Colab's versions of
    torch, ipykernel and the rest are all inside them (a pip install keeps Colab's own)."""
    student = {r.name: r for r in requirements("student/pyproject.toml")}
    assert not any(s.operator == "==" for r in student.values() for s in r.specifier), student
    for name, version in COLAB.items():
        assert student[name].specifier.contains(version), f"{student[name]} excludes Colab's"
    instructor = {r.name for r in requirements("pyproject.toml")}
    assert set(student) <= instructor, "the instructor's environment runs the notebooks too"
    assert not {"nbgrader", "jupyterhub", "dask", "psycopg2-binary", "pytest"} & set(student)


def test_lower_bounds_file_holds_each_lower_bound() -> None:
    """student/lower-bounds.txt, installed by `make student-lower-bounds`, is the ``>=`` bound
    of every base requirement of the student part."""
    project = tomllib.loads((REPO / "student/pyproject.toml").read_text())["project"]
    lower = {}
    for requirement in map(Requirement, project["dependencies"]):
        bounds = [s.version for s in requirement.specifier if s.operator == ">="]
        assert len(bounds) == 1, f"{requirement} needs one lower bound"
        lower[requirement.name] = bounds[0]
    listed = pins("student/lower-bounds.txt")
    assert set(listed) == set(lower)
    for name, version in listed.items():
        assert Version(version) == Version(lower[name]), f"{name}: {version} vs {lower[name]}"


def readme_make_targets() -> set[str]:
    """Every `make TARGET` that the README's code blocks tell a user to run."""
    blocks = (REPO / "README.md").read_text().split("```")[1::2]
    return {m for block in blocks for m in re.findall(r"^make ([a-z-]+)", block, re.M)}


def test_every_make_target_the_readme_names_exists() -> None:
    targets = readme_make_targets()
    assert {"demo", "test", "test-fast", "lab"} <= targets, targets
    for target in targets:
        done = subprocess.run(
            ["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"make {target}: {done.stderr}"


def test_ci_runs_the_readme_test_command_and_fails_on_errors() -> None:
    script = (REPO / ".ci/run").read_text()
    assert re.search(r"^make test$", script, re.M), script
    assert "set -e" in script  # a failing step fails CI
    dry = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True)
    assert "pytest" in dry.stdout and '-m "not slow"' not in dry.stdout  # the whole suite


def test_licence_and_data_attributions() -> None:
    assert (REPO / "LICENSE").is_file()
    readme = (REPO / "README.md").read_text()
    credits = (REPO / "docs/data.md").read_text()  # linked from the README's data section
    for folder in (REPO / "course/data").iterdir():
        if folder.is_dir() and not folder.name.startswith("__"):
            assert (folder / "SOURCE.md").is_file(), folder
            assert folder.name in readme, f"README does not name {folder.name}"
            assert f"`{folder.name}/`" in credits, f"docs/data.md lacks {folder.name}'s credit"


def test_the_readme_lists_every_graded_name_with_its_points() -> None:
    """The repository's own account of what each assignment grades stays true."""
    import ast
    import json

    readme = (REPO / "docs/assignments.md").read_text()
    table = readme[readme.index("## What each assignment grades") :]
    table = table[: table.index("\n\n", table.index("| A |"))]
    rows = {
        line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")
    }
    for path in sorted(REPO.glob("source/*/*.ipynb")):
        letter = path.parent.name[0].upper()
        names, points = set(), 0
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade") and cell["cell_type"] == "code":
                points += meta.get("points", 0)
            if meta.get("solution") and cell["cell_type"] == "code":
                tree = ast.parse("".join(cell["source"]))
                names |= {
                    n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                }
        row = rows[letter]
        missing = [name for name in sorted(names) if f"`{name}(" not in row]
        assert not missing, f"docs/assignments.md's table misses {missing} of assignment {letter}"
        assert row.rstrip(" |").endswith(f"| {points}"), f"{letter}: {points} points"


def test_autograded_folder_ships_with_its_readme_only() -> None:
    """A fresh clone has ``autograded/`` (README.md, tracked); what grading writes is ignored."""
    tracked = subprocess.run(
        ["git", "ls-files", "autograded"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked == ["autograded/README.md"], tracked
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "autograded/README.md", "autograded/s/a/n.ipynb"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert ignored == ["autograded/s/a/n.ipynb"], ignored


def test_make_clean_removes_the_demo_and_never_the_term(tmp_path) -> None:
    """``make clean`` removes the demo's course folder and nothing a term wrote."""
    term = [
        tmp_path / "autograded" / "s" / "a" / "n.ipynb",
        tmp_path / "gradebook.db",
        tmp_path / "submitted" / "s" / "a" / "n.ipynb",
        tmp_path / "autograded" / "README.md",
    ]
    for path in [*term, tmp_path / "demo-course" / "gradebook.db"]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    (tmp_path / "Makefile").write_text((REPO / "Makefile").read_text())
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True)
    assert not (tmp_path / "demo-course").exists()
    assert all(path.is_file() for path in term)
