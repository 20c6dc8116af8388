"""The repository's own promises: pins in step, licence, the README's make targets, CI."""

from __future__ import annotations

import re
import subprocess
import tomllib

import yaml

from tests.conftest import REPO


def pins_from_pyproject() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(re.match(r"([A-Za-z0-9_.-]+)(?:\[[a-z,]+\])?==(\S+)", d).groups() for d in deps)


def pins_from_environment() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = dict(
        re.match(r"([A-Za-z0-9_.-]+)(?:\[[a-z,]+\])?==(\S+)", d).groups() for d in pip if "==" in d
    )
    return pins


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert all("==" in d for d in deps), deps
    assert pins_from_pyproject()["torch"] == "2.13.0"


def test_environment_yml_has_the_same_pins() -> None:
    assert pins_from_environment() == pins_from_pyproject()


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
    for folder in (REPO / "course/data").iterdir():
        if folder.is_dir() and not folder.name.startswith("__"):
            assert (folder / "SOURCE.md").is_file(), folder
            assert folder.name in readme, f"README lacks the attribution of {folder.name}"


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


def test_make_clean_keeps_the_autograded_readme(tmp_path) -> None:
    """``make clean`` removes what grading wrote in ``autograded/`` and keeps its README."""
    (tmp_path / "autograded" / "s" / "a").mkdir(parents=True)
    (tmp_path / "autograded" / "README.md").write_text("kept")
    (tmp_path / "autograded" / "s" / "a" / "n.ipynb").write_text("{}")
    (tmp_path / "Makefile").write_text((REPO / "Makefile").read_text())
    subprocess.run(["make", "-s", "clean"], cwd=tmp_path, check=True, capture_output=True)
    assert sorted(p.name for p in (tmp_path / "autograded").iterdir()) == ["README.md"]
