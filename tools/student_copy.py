"""The student's own copy of the notebooks, ``work/``: made once from release/, never overwritten.

    python tools/student_copy.py          # what `make lab` runs before it opens work/

``make release`` and ``make demo`` regenerate ``release/`` by force, so a student who worked there
would lose the work. ``make lab`` therefore opens ``work/`` (git-ignored): each file of
``release/`` is copied there only if the student's copy has no file of that name yet, so an
assignment released later appears and nothing the student wrote is replaced. No command of the
course writes to ``work/`` (``tests/test_student_copy.py`` runs a release and a demo and checks).
To start an assignment again from the release, delete or rename its notebook in ``work/`` and run
``make lab``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from grader.selfstudy import selfstudy_cells

REPO = Path(__file__).resolve().parents[1]
WORK = "work"


def make_copy(root: Path = REPO, work: str = WORK) -> list[Path]:
    """Copy every file of ``root/release`` that ``root/work`` lacks; return the files copied."""
    release, target = root / "release", root / work
    if not release.is_dir():
        raise SystemExit(f"no {release}: run `make release` first, then `make lab`")
    copied = []
    for path in sorted(release.rglob("*")):
        if not path.is_file() or ".ipynb_checkpoints" in path.parts:
            continue
        destination = target / path.relative_to(release)
        if destination.exists():
            continue  # the student's file: never replaced
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        if destination.suffix == ".ipynb" and (root / "source").is_dir():
            selfstudy_cells.add_cells(destination)  # compare, check, progress (a clone only)
        copied.append(destination)
    return copied


def main() -> int:
    copied = make_copy()
    for path in copied:
        print(f"new in your copy: {path.relative_to(REPO)}")
    print(f"your notebooks are in {WORK}/ (release/ is regenerated; {WORK}/ never is)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
