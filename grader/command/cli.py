"""The ``course`` command: nbgrader's pipeline for this course, one sub-command per job.

Every sub-command and option, with its help: docs/cli.md (written from this parser). The ones of a
term (address, release, due, extension, regrade, publish) are in :mod:`grader.command.cli_term`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from grader.command import cli_term
from grader.coordinator import lab  # the standard library and grader.shared only
from grader.lms import LMS_NAMES
from grader.shared import report  # lab: the standard library and grader.shared.paths only
from grader.shared.paths import CourseError, assignments, find_root, use_this_python

if TYPE_CHECKING:  # for the annotations only: grader.coordinator.grading loads nbgrader (see run())
    from grader.coordinator.grading import Graded


def _jobs_default() -> int:
    return max(1, os.cpu_count() or 1)


COLD_HELP = (
    "start each kernel and each nbgrader process afresh, instead of forking them from warm "
    "workers that imported torch, the course and nbgrader once (the default, in the same "
    "sandbox: grader/warm/pool.py)"
)
UNSAFE_HELP = (
    "grade without the bubblewrap sandbox (where bwrap is missing, e.g. macOS): student code "
    "can then reach the grader; the report marks every notebook graded this way"
)


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``course`` command."""
    top = argparse.ArgumentParser(prog="course", description=__doc__.split("\n")[0])
    top.add_argument("--root", type=Path, help="the course folder (default: found from cwd)")
    sub = top.add_subparsers(dest="command", required=True)

    cli_term.add_parsers(sub, _jobs_default())  # address, release, due, extension, regrade

    p = sub.add_parser("autograde", help="autograde the submissions of an assignment")
    p.add_argument("assignment")
    p.add_argument("--jobs", type=int, default=_jobs_default(), help="students graded at once")
    p.add_argument("--student", action="append", help="grade only this student (repeatable)")
    p.add_argument("--unsafe-no-sandbox", action="store_true", help=UNSAFE_HELP)
    p.add_argument("--cold", action="store_true", help=COLD_HELP)
    on = p.add_mutually_exclusive_group()
    on.add_argument(
        "--scheduler", metavar="ADDRESS", help="grade on the Dask cluster of this scheduler"
    )
    on.add_argument(
        "--cluster", metavar="local:N", help="grade on a Dask LocalCluster of N workers"
    )

    _collect_parser(sub)

    p = sub.add_parser("feedback", help="write feedback HTML without the hidden tests")
    p.add_argument("assignment")
    p.add_argument("--zip", action="store_true", help="also pack it for upload to the LMS")

    p = sub.add_parser("grades", help="print the grade table and write it to CSV")
    p.add_argument("--csv", type=Path, help="CSV path (default: ROOT/grades.csv)")
    _lms_grade_options(p)

    _report_options(sub.add_parser("report", help="the class at a glance: one HTML page"))
    p = sub.add_parser("demo", help="build and grade the demo class")
    p.add_argument("assignments", nargs="*", help="assignments (default: all)")
    p.add_argument("--jobs", type=int, default=_jobs_default(), help="students graded at once")
    p.add_argument(
        "--all",
        action="store_true",
        help="grade every demo student (default: the reference, the blank release, one other "
        "correct style and a few named mistakes per assignment)",
    )
    p.add_argument("--unsafe-no-sandbox", action="store_true", help=UNSAFE_HELP)
    p.add_argument("--cold", action="store_true", help=COLD_HELP)

    for add_parser in (_workers_parser, _lab_parser, _forget_parser, _self_study_parsers):
        add_parser(sub)

    p = sub.add_parser("submission", help="build submissions from descriptions")
    actions = p.add_subparsers(dest="action", required=True)
    b = actions.add_parser("build", help="fill a release notebook from a YAML description")
    b.add_argument("release_notebook", type=Path)
    b.add_argument("description", type=Path)
    b.add_argument("out", type=Path)
    return top


def _collect_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="collect an LMS download (zip) into submitted/")
    p.add_argument("assignment")
    p.add_argument("zip", type=Path, help="the submissions as the LMS downloaded them")
    p.add_argument("--lms", choices=LMS_NAMES, required=True)
    p.add_argument(
        "--worksheet", type=Path, help="Moodle's grading worksheet (CSV): submission times"
    )
    p.add_argument(
        "--timezone",
        metavar="ZONE",
        help="the time zone of the LMS's submission times, your LMS profile's (e.g. "
        "Europe/Berlin; default: this machine's)",
    )


def _self_study_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="run a notebook's tests and explain each failure")
    p.add_argument("notebook", type=Path)
    p.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    sub.add_parser("progress", help="a self-learner's progress, A to H, from work/ (read only)")


def _lab_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lab",
        help="JupyterLab on the course folder, where formgrader (Nbgrader menu) finds the "
        "course: grade written answers by hand, autograde, feedback (make formgrader)",
    )
    p.add_argument(
        "jupyter_args",
        nargs="*",
        metavar="JUPYTER_OPTION",
        help="options for jupyter lab, after --, e.g. -- --ServerApp.port=8890 --no-browser",
    )


def _forget_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forget", help="remove a student's data from the course (docs/personal-data.md)"
    )
    p.add_argument("students", nargs="+", metavar="STUDENT", help="the course's student id")
    p.add_argument("--yes", action="store_true", help="remove it (without: list what it removes)")


def _workers_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "workers",
        help="keep warm workers between grading runs (the zygote, nbgrader, the judge), so that "
        "each `course autograde` skips their start (grader/warm/service.py)",
    )
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument(
        "--jobs", type=int, default=_jobs_default(), help="the --jobs of the runs that use them"
    )
    p.add_argument(
        "--idle", type=float, default=30, metavar="MINUTES", help="stop after this long unused"
    )


def _lms_grade_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lms", choices=LMS_NAMES, help="write the CSV this LMS imports instead")
    p.add_argument("--out", type=Path, help="with --lms: the file (default: ROOT/grades-LMS.csv)")
    p.add_argument(
        "--gradebook",
        type=Path,
        metavar="EXPORT.csv",
        help="with --lms: the LMS's own gradebook export (Canvas's, or Moodle's export or "
        "grading worksheet), filled in and written to --out for import as it is",
    )
    p.add_argument(
        "--assignment",
        action="append",
        metavar="NAME[=COLUMN]",
        help="with --lms: export this assignment (repeatable or comma separated; default: each "
        "one with a submission); =COLUMN names its column in --gradebook",
    )
    p.add_argument(
        "--missing",
        choices=["skip", "blank", "zero", "empty"],
        default="skip",
        help="with --lms: a student who submitted nothing: skip (default: the cell is left as "
        "the gradebook has it, empty in a new file), blank, or zero (empty: the same as blank)",
    )
    p.add_argument(
        "--allow-ungraded",
        action="store_true",
        help="with --lms: export even while written answers wait for a hand grade (they count 0)",
    )


def _report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment")
    p.add_argument("--out", type=Path, help="the page (default: ROOT/class-report-ASSIGNMENT.html)")
    p.add_argument(
        "--threshold", type=float, default=0.3, help="alike: share of shared code (default 0.3)"
    )


def run(args: argparse.Namespace) -> int:
    """Carry out one parsed command; return its exit code (the table COMMANDS names each one)."""
    if args.command == "lab":  # before nbgrader is loaded: this process becomes JupyterLab
        _lab(args)
    # The sub-commands load nbgrader (several seconds on a busy machine): imported by each command's
    # function, once it is chosen, so `course --help` and a mistyped command answer at once.
    from grader.shared.slow_imports import skip_slow_imports

    skip_slow_imports()  # a second of CPU less to load nbgrader (grader/nbgrader/main.py)
    command, needs_root = COMMANDS[args.command]
    if not needs_root:
        return command(args)
    root = (args.root.resolve() if args.root else None) or find_root()
    return command(root, args)


def _lab(args: argparse.Namespace) -> None:
    """``course lab``: JupyterLab on the course folder (grader/coordinator/lab.py); does not
    return."""
    lab.start((args.root.resolve() if args.root else None) or find_root(), args.jupyter_args)


def _check(args: argparse.Namespace) -> int:
    """``course check NOTEBOOK``: the student's self-check."""
    from grader.selfstudy import check  # loads nbgrader: once this command is chosen (run())

    code, text = check.check(args.notebook, timeout=args.timeout)
    print(text)
    return code


def _progress(root: Path, args: argparse.Namespace) -> int:
    """``course progress``: grader/selfstudy/progress.py."""
    from grader.selfstudy import progress  # loads nbgrader: once this command is chosen (run())

    print(progress.progress(root))
    return 0


def _submission(args: argparse.Namespace) -> int:
    """``course submission build``: a submission from a description."""
    from grader.coordinator import submission  # loads nbgrader: once this command is chosen (run())

    print(f"wrote {submission.build(args.release_notebook, args.description, args.out)}")
    return 0


def _autograde(root: Path, args: argparse.Namespace) -> int:
    """``course autograde ASSIGNMENT``: exit 1 when a submission was not graded."""
    from grader.coordinator import pipeline  # loads nbgrader: once this command is chosen (run())

    results = pipeline.autograde(
        root,
        args.assignment,
        jobs=args.jobs,
        students=args.student,
        progress=_print_graded,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
        cluster=_cluster(args),
        warm=not args.cold,
    )
    return 0 if all(g.ok for g in results) else 1


def _workers(root: Path, args: argparse.Namespace) -> int:
    print(_workers_command(root, args))
    return 0


def _grades(root: Path, args: argparse.Namespace) -> int:
    """``course grades``: the table and its CSV, or (with --lms) the LMS's import file."""
    if args.lms:
        return _lms_command(root, args)
    if args.out or args.gradebook or args.assignment:
        raise CourseError(
            "--out, --gradebook and --assignment go with --lms canvas|moodle (the grade "
            "table's CSV: --csv)"
        )
    # these load nbgrader: imported once this command is chosen (run())
    from grader.books import deadlines  # (nbgrader too)
    from grader.coordinator import pipeline  # (nbgrader too)

    rows = pipeline.grade_rows(root)
    print(pipeline.format_grade_table(rows))
    print("\nDue dates, extensions, late submissions:")
    print("\n".join(f"  {line}" for line in deadlines.lateness_lines(root)))
    _print_problems(root)
    print(f"written to {pipeline.write_grades_csv(rows, args.csv or root / 'grades.csv')}")
    return 0


def _demo(root: Path, args: argparse.Namespace) -> int:
    """``course demo``: release, the demo class graded, feedback, the grade table."""
    from grader.coordinator import demo  # loads nbgrader: once this command is chosen (run())

    folder = cli_term.demo_folder(root)  # the demo's own course folder, apart from the term
    print(f"the demo class is graded in {folder}, apart from the term's gradebook")
    chosen = args.assignments or assignments(folder)
    choose = None if args.all else lambda a, students: demo.representative(folder, a, students)
    demo.run(
        folder,
        chosen,
        jobs=args.jobs,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
        choose=choose,
        warm=not args.cold,
    )
    return 0


def _lms_command(root: Path, args: argparse.Namespace) -> int:
    """``course collect``, ``course feedback [--zip]`` and ``course grades --lms``."""
    # these load nbgrader (see run()): imported once an LMS command is chosen
    from grader.coordinator import pipeline  # load nbgrader: once this command is chosen
    from grader.lms import collect, feedback_zip  # (nbgrader too)
    from grader.term import commands  # (nbgrader too)

    if args.command == "collect":
        done = collect.collect(
            root, args.assignment, args.zip, args.lms, args.worksheet, args.timezone
        )
        print(collect.format_report(done))
        return 0 if done.taken else 1
    elif args.command == "feedback":
        print(f"feedback written under {pipeline.feedback(root, args.assignment)}")
        if args.zip:
            written, left = feedback_zip.pack(root, args.assignment)
            for path, packed in written:
                print(f"{len(packed)} students' feedback packed into {path} for upload")
            for line in left:
                print(f"  not packed: {line}")
    else:
        out = args.out or root / f"grades-{args.lms}.csv"
        chosen = [
            name
            for given in args.assignment or []
            for name in ([given] if "=" in given else given.split(","))  # a header may hold ","
            if name.strip()
        ]
        return commands.export_grades(
            root, args.lms, out, args.missing, chosen, args.gradebook, args.allow_ungraded
        )
    return 0


def _forget(root: Path, args: argparse.Namespace) -> int:
    """``course forget STUDENT... [--yes]`` (grader/term/forget.py)."""
    from grader.term import forget  # loads nbgrader: once this command is chosen (run())

    return forget.command(root, args.students, args.yes)


def _report(root: Path, args: argparse.Namespace) -> int:
    """``course report ASSIGNMENT``: the class page (docs/grading.md)."""
    from grader.report import class_report_html  # matplotlib: once this command is chosen

    if not 0 < args.threshold <= 1:
        raise CourseError(f"--threshold is a share between 0 and 1, not {args.threshold}")
    out = args.out or root / f"class-report-{args.assignment}.html"
    print(f"written to {class_report_html.write(root, args.assignment, out, args.threshold)}")
    return 0


def _workers_command(root: Path, args: argparse.Namespace) -> str:
    """``course workers start|stop|status``: what to tell the user."""
    from grader.warm import service as warm_service  # jupyter_client: once this command is chosen

    if args.action == "start":
        return warm_service.start(root, args.jobs, args.idle)
    if args.action == "stop":
        return warm_service.stop(root)
    return warm_service.status(root, args.jobs)


def _cluster(args: argparse.Namespace) -> str | None:
    if args.cluster is not None and not args.cluster.startswith("local:"):
        raise CourseError(f"--cluster expects local:N, not {args.cluster!r} (or --scheduler)")
    return args.scheduler or args.cluster


def _print_graded(graded: Graded) -> None:
    status = "graded" if graded.ok else f"NOT GRADED: {graded.message}"
    print(f"{graded.student}: {status} ({graded.seconds:.1f} s)", flush=True)
    for event in graded.events:
        if event.status != "graded":
            print(f"  {event.notebook}: {event.status.upper()}: {event.detail}", flush=True)


def _print_problems(root: Path) -> None:
    lines = report.problems(root)
    if lines:
        print(f"\nNeeds attention ({report.FILE}):")
        for row in lines:
            print("  " + report.format_line(row))


# Each sub-command's function, and whether it takes the course folder (found from cwd or --root).
COMMANDS: dict[str, tuple[Callable[..., int], bool]] = {
    "check": (_check, False),
    "submission": (_submission, False),
    "address": (cli_term.address, True),
    "release": (cli_term.release, True),
    "due": (cli_term.due, True),
    "extension": (cli_term.extension, True),
    "regrade": (cli_term.regrade, True),
    "publish": (cli_term.publish, True),
    "autograde": (_autograde, True),
    "workers": (_workers, True),
    "collect": (_lms_command, True),
    "feedback": (_lms_command, True),
    "grades": (_grades, True),
    "report": (_report, True),
    "demo": (_demo, True),
    "forget": (_forget, True),
    "progress": (_progress, True),
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; errors the user can fix are one line on stderr.

    This environment's programs come first on PATH, so ``.venv/bin/course`` works unactivated:
    nbgrader runs ``alembic`` by name (a gradebook's first open) and kernels by name.
    """
    use_this_python()
    args = parser().parse_args(argv)
    try:
        return run(args)
    except CourseError as error:
        print(f"course: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("course: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
