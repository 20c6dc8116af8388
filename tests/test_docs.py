"""The README is a front page and the reference lives in docs/: every link resolves, and
the front page stays short."""

from __future__ import annotations

import re

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_the_readme_is_a_front_page_linking_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    linked = set(re.findall(r"\(docs/([a-z_-]+\.md)\)", readme))
    assert linked == {p.name for p in (REPO / "docs").glob("*.md")}
