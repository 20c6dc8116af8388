"""Count the words of docs/ against its budget, page by page (as `wc -w` counts them).

    python tools/doc_words.py          # each page's words, then the total against the budget
    python tools/doc_words.py --help   # this text

docs/history.md, the records, is left out. The budget is 60% of the words docs/ held before it
was rewritten for its readers (24,230): 14,500. Exit 1 when the total is over it. Writes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BUDGET = 14_500
RECORDS = ("history.md",)


def words(root: Path = REPO) -> dict[str, int]:
    """Each page of docs/ but the records, and its words (whitespace-separated, as `wc -w`)."""
    pages = sorted(p for p in (root / "docs").glob("*.md") if p.name not in RECORDS)
    return {p.name: len(p.read_text(encoding="utf-8").split()) for p in pages}


def main(argv: list[str]) -> int:
    """Print the count; --help prints the usage."""
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if argv:
        print(f"doc_words.py: unknown argument {argv[0]}; see --help", file=sys.stderr)
        return 2
    counts = words()
    for name, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"{count:7,}  docs/{name}")
    total = sum(counts.values())
    verdict = "within" if total <= BUDGET else "OVER"
    print(f"{total:7,}  in all, {verdict} the budget of {BUDGET:,} (docs/history.md left out)")
    return 0 if total <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
