"""Write the map of every module into docs/layout.md, one short line each, from the modules.

    python tools/module_map.py          # rewrite the section "Every module" of docs/layout.md
    python tools/module_map.py --check  # exit 1 if the section is not what the code says
    python tools/module_map.py --help   # this text

Each line is a module's path and the first clause of its docstring, so the map changes with
the code: `tests/test_layout.py` fails when a module is added, removed or re-described and the
map was not written again. A module without a docstring is refused (it would have no line).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from generated_page import write_or_check  # tools/, as when the script runs

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "docs" / "layout.md"
PACKAGES = ("course", "judge", "grader")  # the three programs, in the order the page gives them
BEGIN = "<!-- module map: written by tools/module_map.py, do not edit by hand -->"
END = "<!-- end of module map -->"


def modules(root: Path = REPO) -> list[Path]:
    """Every Python module of the three programs, package by package, data files left out."""
    found = []
    for package in PACKAGES:
        found += sorted(
            (p for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts),
            key=lambda p: (p.parent.relative_to(root).parts, p.name != "__init__.py", p.name),
        )
    return found


def summary(path: Path) -> str:
    """The first sentence of the module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        raise SystemExit(f"{path.relative_to(REPO)} has no docstring: write one, then map again")
    first = " ".join(doc.split("\n\n")[0].split())
    cut = first.find(". ")
    return first if cut < 0 else first[: cut + 1]


def short(sentence: str) -> str:
    """The sentence up to its first colon, parenthesis or semicolon (and, when that is still
    over ten words, its first comma): what the module is, without how."""
    text = re.split(r": | \(|; | — ", sentence)[0].rstrip(".")
    if len(text.split()) > 10:
        text = text.split(", ")[0]
    return text.replace("``", "`")


def section(root: Path = REPO) -> str:
    """The map as markdown, between its markers: one line a module."""
    rows = [f"- `{p.relative_to(root).as_posix()}`: {short(summary(p))}" for p in modules(root)]
    return "\n".join([BEGIN, *rows, END])


def rewritten(text: str, root: Path = REPO) -> str:
    """``text`` (docs/layout.md) with its map replaced by today's (added at the end if none)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + section(root) + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n## Every module\n\n" + section(root) + "\n"


def main(argv: list[str]) -> int:
    """Rewrite the map, or with --check say whether it is current; --help prints the usage."""
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    unknown = [a for a in argv if a != "--check"]
    if unknown:
        print(f"module_map.py: unknown argument {unknown[0]}; see --help", file=sys.stderr)
        return 2
    return write_or_check(
        LAYOUT,
        rewritten(LAYOUT.read_text()),
        "--check" in argv,
        "docs/layout.md's module map is stale: run python tools/module_map.py",
        f"wrote the map of {len(modules())} modules into {LAYOUT.relative_to(REPO)}",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
