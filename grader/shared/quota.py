"""The disk quota of a submission: what its folder may hold after grading (``c.Limits.disk_mb``).

A submission's kernel may write in its own folder (the sandbox lets it, and each file is held to
``c.Limits.file_size_mb`` by an rlimit), so a notebook that writes six files of 400 MB would leave
2.4 GB in ``autograded/STUDENT/ASSIGNMENT`` after grading, and a Dask worker would send them back.
So, after grading and before anything is copied into the course or returned by a worker, the largest
files are removed until the folder fits the quota (:func:`enforce`); the graded notebooks themselves
are always kept, and so are the points. The report line says what was removed (status "over quota").
The coordinator applies the same rule to what a worker returns (:func:`over_quota`), so a worker
running other limits cannot fill the course folder either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

MB = 2**20
MAX_FILES = 1000  # files a folder may hold after grading (a million empty files fill no bytes)
STATUS = "over quota"


def over_quota(sizes: Mapping[str, int], quota_mb: int, keep: Iterable[str] = ()) -> list[str]:
    """The files to remove (relative paths, largest first) so that the rest of ``sizes`` (path
    -> bytes) holds at most ``quota_mb`` MB in at most :data:`MAX_FILES` files; the paths in
    ``keep`` are never removed (empty when the files fit, or when ``quota_mb`` is 0: no quota)."""
    total, count = sum(sizes.values()), len(sizes)
    if quota_mb <= 0 or (total <= quota_mb * MB and count <= MAX_FILES):
        return []
    kept = set(keep)
    removed = []
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        if total <= quota_mb * MB and count <= MAX_FILES:
            break
        if name not in kept:
            removed.append(name)
            total, count = total - sizes[name], count - 1
    return removed


def sizes_of(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (symbolic links counted as nothing), by relative path."""
    sizes = {}
    for path in folder.rglob("*"):
        if not path.is_symlink() and path.is_file():
            sizes[path.relative_to(folder).as_posix()] = path.stat().st_size
    return sizes


def enforce(folder: Path, quota_mb: int, keep: Iterable[str] = ()) -> str:
    """Remove the largest files of ``folder`` (but ``keep``) until it fits ``quota_mb`` MB.

    Returns the report's detail: what was removed and why ("" when the folder fits)."""
    sizes = sizes_of(folder)
    removed = over_quota(sizes, quota_mb, keep)
    for name in removed:
        try:
            os.unlink(folder / name)
        except OSError:
            pass
    return detail(sizes, removed, quota_mb)


def detail(sizes: Mapping[str, int], removed: list[str], quota_mb: int) -> str:
    """The report's words for files removed over the quota ("" when none was)."""
    if not removed:
        return ""
    total = sum(sizes.values())
    listed = ", ".join(f"{name} ({sizes[name] / MB:.0f} MB)" for name in removed[:5])
    more = f" and {len(removed) - 5} more" if len(removed) > 5 else ""
    return (
        f"the folder held {total / MB:.0f} MB in {len(sizes)} files after grading, over the disk "
        f"quota of {quota_mb} MB and {MAX_FILES} files (c.Limits.disk_mb): {len(removed)} files "
        f"removed, largest first: {listed}{more}; the "
        "points are kept (ask the student not to write large files in the notebook's folder)"
    )
