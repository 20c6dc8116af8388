"""Look for answers in everything this process can read (standard library only: the JupyterHub
test runs it as a student, with the student's own Python).

``python -I answer_walk.py SECRETS REPORT ROOT...``: SECRETS is a JSON list of code lines that
only the instructor's side holds (hidden tests, solutions, the judge). Every regular file this
process can read under each ROOT is read (binary files and files over :data:`LARGEST` bytes
aside); a file holds an answer when one of its lines, stripped, is a secret, as it is or as a
line of a notebook's JSON (``"    return x.view(b, l, h, d)\\n",``). (nbgrader's markers alone
say nothing: nbgrader's own package ships example notebooks with them.) Every git repository
found on the way
(a ``.git`` folder, or a bare one: ``HEAD`` beside ``objects/``) is read whole with ``git
cat-file --batch-all-objects --batch`` (history and unreachable objects included). REPORT gets
``{"files": number read, "objects": git objects read, "found": ["path: why", ...]}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

LARGEST = 16 * 2**20


def lines_of(text: str) -> set[str]:
    """Every line of ``text``, stripped, and, where a line is a JSON string (a notebook's source
    line, ``"code\\n",``), the code it holds, stripped."""
    found = set()
    for line in text.splitlines():
        line = line.strip()
        found.add(line)
        quoted = line.rstrip(",")
        if len(quoted) > 1 and quoted[0] == quoted[-1] == '"':
            with contextlib.suppress(ValueError):
                found.update(part.strip() for part in json.loads(quoted).splitlines())
    return found


def answers_in(text: str, secrets: set[str]) -> list[str]:
    """Why ``text`` holds an answer: the secret lines it shows (empty: none)."""
    return [f"line {line[:80]!r}" for line in sorted(lines_of(text) & secrets)]


def read_text(path: Path) -> str | None:
    """The file's text, or None when it cannot be read, is binary or too large."""
    try:
        if path.stat().st_size > LARGEST:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def git_objects(repository: Path) -> tuple[int, str]:
    """How many objects a repository holds, and all their contents as text ("" when it
    cannot be read)."""
    done = subprocess.run(
        ["git", f"--git-dir={repository}", "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
    )
    if done.returncode != 0:
        return 0, ""
    text = done.stdout.decode("utf-8", errors="replace")
    count = sum(1 for line in text.splitlines() if line.count(" ") == 2 and len(line) > 45)
    return count, text


def is_repository(folder: Path) -> bool:
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir()


def walk(roots: list[Path], secrets: set[str]) -> dict:
    """Every readable file and git repository under ``roots`` (links not followed)."""
    files, objects, found, seen = 0, 0, [], set()
    for root in roots:
        for folder, subfolders, names in os.walk(root, onerror=lambda error: None):
            here = Path(folder)
            if here in seen:
                continue
            seen.add(here)
            if is_repository(here):
                count, text = git_objects(here)
                objects += count
                found += [f"{here} (git objects): {w}" for w in answers_in(text, secrets)]
            for name in names:
                path = here / name
                if path.is_symlink() or not path.is_file():
                    continue
                text = read_text(path)
                if text is None:
                    continue
                files += 1
                found += [f"{path}: {w}" for w in answers_in(text, secrets)]
            subfolders[:] = [s for s in subfolders if not (here / s).is_symlink()]
    return {"files": files, "objects": objects, "found": sorted(set(found))}


def main(secrets_path: str, report_path: str, roots: list[str]) -> None:
    secrets = set(json.loads(Path(secrets_path).read_text()))
    report = walk([Path(r) for r in roots], secrets)
    Path(report_path).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
