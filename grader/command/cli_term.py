"""The ``course`` sub-commands of a term (docs/term.md): the students' install address, a release
that says what it changes, due dates, extensions and a regrade that says whose points moved.

course address [URL | clone]                 set (or show) where students install the course from
course release [ASSIGNMENT] [--force] [--clone-only]
course due ASSIGNMENT DATE [--timezone ZONE] the due date
course extension ASSIGNMENT STUDENT --hours N  more time for one student (0: none)
course regrade ASSIGNMENT [--jobs N]         grade every submission again; whose points moved
course publish DIR [ASSIGNMENT ...]          the public part (no solutions), released work only
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grader.shared.paths import CourseError, assignments


def add_parsers(sub: argparse._SubParsersAction, jobs_default: int) -> None:
    """The term's sub-commands (release's own parser included)."""
    p = sub.add_parser(
        "address", help="set (or show) where students install the course from (docs/term.md)"
    )
    p.add_argument(
        "address",
        nargs="?",
        help="a git repository's https (or GitHub ssh) address, file://localhost/PATH, the "
        "student wheel's URL, or 'clone' (docs/term.md); none: show it",
    )

    p = sub.add_parser("release", help="generate release/ from source/")
    p.add_argument("assignment", nargs="?", help="one assignment (default: all)")
    p.add_argument(
        "--force",
        action="store_true",
        help="release an assignment that has submissions, after reading what changes",
    )
    p.add_argument(
        "--clone-only",
        action="store_true",
        help="notebooks for a clone or a JupyterHub only: no install address needed",
    )

    p = sub.add_parser(
        "publish",
        help="write what students may see (the released notebooks, course/, student/, a README "
        "from student/GUIDE.md) into the public repository's work tree (docs/term.md)",
    )
    p.add_argument("folder", type=Path, help="the public repository's folder")
    p.add_argument(
        "assignments",
        nargs="*",
        metavar="ASSIGNMENT",
        help="the assignments (default: those released this term)",
    )

    p = sub.add_parser("due", help="set an assignment's due date")
    p.add_argument("assignment")
    p.add_argument("date", help="e.g. '2026-10-05 17:00' (or with an offset, '...+02:00')")
    p.add_argument("--timezone", metavar="ZONE", help="DATE's zone (default: this machine's)")

    p = sub.add_parser("extension", help="give one student more time on an assignment")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("--hours", type=float, required=True, help="extra hours (0: no extension)")

    p = sub.add_parser(
        "regrade",
        help="autograde every submission of an assignment again (after a fix), keeping hand "
        "grades and comments; print whose points changed",
    )
    p.add_argument("assignment")
    p.add_argument("--jobs", type=int, default=jobs_default, help="students graded at once")


def address(root: Path, args: argparse.Namespace) -> int:
    """``course address [URL | clone]``."""
    from grader.term import address as where  # loads nbgrader: once chosen

    if args.address:
        print(where.set_address(root, args.address))
        return 0
    current = where.configured(root)
    print(f"students install from: {current}" if current else "no address set (docs/term.md)")
    return 0 if current else 1


def release(root: Path, args: argparse.Namespace) -> int:
    """``course release [ASSIGNMENT] [--force] [--clone-only]``: exit 1 when an assignment with
    submissions would change and ``--force`` is not given (nothing is written then)."""
    from grader.term import commands  # loads nbgrader: once chosen

    chosen = [args.assignment] if args.assignment else assignments(root)
    return commands.release(root, chosen, args.force, args.clone_only)


def publish(root: Path, args: argparse.Namespace) -> int:
    """``course publish DIR [ASSIGNMENT ...]``: the public copy of a graded class."""
    from grader.term import address as where  # loads nbgrader: once chosen
    from grader.term.publish import publish as write_public  # (nbgrader too)

    address = where.require(root)
    if address == where.CLONE:
        raise CourseError("the address is 'clone': set the public one, `course address URL`")
    print("\n".join(write_public(root, args.folder, address, args.assignments)))
    print(f"now commit and push {args.folder} to {address}")
    return 0


def due(root: Path, args: argparse.Namespace) -> int:
    """``course due ASSIGNMENT DATE``."""
    from grader.books import deadlines  # loads nbgrader: once chosen

    print(deadlines.set_due(root, args.assignment, deadlines.parse_due(args.date, args.timezone)))
    return 0


def extension(root: Path, args: argparse.Namespace) -> int:
    """``course extension ASSIGNMENT STUDENT --hours N``."""
    from grader.books import deadlines  # loads nbgrader: once chosen

    print(deadlines.set_extension(root, args.assignment, args.student, args.hours))
    return 0


def regrade(root: Path, args: argparse.Namespace) -> int:
    """``course regrade ASSIGNMENT``: every submission graded again; the points that moved."""
    from grader.term import commands  # loads nbgrader: once chosen

    return commands.regrade(root, args.assignment, args.jobs)


def demo_folder(root: Path) -> Path:
    """The demo's own course folder (made or brought up to date), its gradebook its own even
    where the term's is a database server (``COURSE_DB``)."""
    from grader.coordinator import demo  # loads nbgrader: once chosen

    os.environ.pop("COURSE_DB", None)
    return demo.demo_course(root)
