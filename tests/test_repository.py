"""The repository's own promises: pins in step, licence, README commands, CI script."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.conftest import REPO


def pins_from_pyproject() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    return dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", d).groups() for d in deps)


def pins_from_environment() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", d).groups() for d in pip if "==" in d)
    return pins


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert all("==" in d for d in deps), deps
    assert pins_from_pyproject()["torch"] == "2.13.0"


def test_environment_yml_has_the_same_pins() -> None:
    assert pins_from_environment() == pins_from_pyproject()


def test_readme_opens_with_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make demo" in first_block and "make test" in first_block


def test_ci_runs_make_test() -> None:
    script = (REPO / ".ci/run").read_text()
    assert "make test" in script


def test_licence_and_data_attributions() -> None:
    assert (REPO / "LICENSE").is_file()
    readme = (REPO / "README.md").read_text()
    for folder in (REPO / "course/data").iterdir():
        if folder.is_dir() and not folder.name.startswith("__"):
            assert (folder / "SOURCE.md").is_file(), folder
            assert folder.name in readme, f"README lacks the attribution of {folder.name}"
