"""What the scripts that write a page of docs/ share (cli_reference.py, module_map.py): write the
page, or with --check only say whether it is current. Not a command of its own."""

from __future__ import annotations

from pathlib import Path


def write_or_check(page: Path, new: str, check: bool, stale: str, wrote: str) -> int:
    """Write ``new`` into ``page`` and print ``wrote``; with ``check``, write nothing and print
    ``stale`` when ``page`` does not hold ``new``. The exit code: 1 when stale, else 0."""
    if check:
        if not page.exists() or page.read_text() != new:
            print(stale)
            return 1
        return 0
    page.write_text(new)
    print(wrote)
    return 0
