"""Run a command under resource limits: ``python -m grader.sandbox.rlimits [LIMITS] -- COMMAND...``.

:mod:`grader.coordinator.nbgrader_run` starts each ``nbgrader autograde`` through this module rather
than with ``subprocess.Popen(preexec_fn=...)``, which the Python documentation calls unsafe in a
process with threads (the grading pipeline starts submissions from worker threads). This process
sets the rlimits with :func:`resource.setrlimit` and then replaces itself with the command
(:func:`os.execvp`): the command keeps this process id, so killing the id the caller started kills
the command, and the limits hold for it and for every process it starts (its kernels).

Limits set: address space (``--memory-mb``), size of a written file (``--file-size-mb``), processes
of the user (``--processes``; not enforced for root), and no core dumps. With ``--cgroup``
(repeated), the command also runs in those cgroups (:mod:`grader.sandbox.cgroups`: a kernel's cap on
processes that holds for root, and its share of the processors).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from collections.abc import Sequence

from grader.sandbox import cgroups

MB = 1024 * 1024


def wrap(
    command: Sequence[str],
    memory_mb: int,
    file_size_mb: int,
    processes: int,
    groups: list[str] | None = None,
) -> list[str]:
    """The command line that runs ``command`` under these limits (and in cgroups ``groups``)."""
    group = [argument for g in groups or [] for argument in ("--cgroup", g)]
    # -P: the current folder is not put first on sys.path. A kernel's wrapper starts in the
    # submission's folder, outside the sandbox: a `grader/sandbox/rlimits.py` handed in there ran
    # instead of this one, as the grader's user. Every `python -m` of the grader has it, so that its
    # code is that of the `course` command, never a course folder's own copy.
    return [
        sys.executable, "-P", "-m", "grader.sandbox.rlimits",
        "--memory-mb", str(memory_mb),
        "--file-size-mb", str(file_size_mb),
        "--processes", str(processes),
        *group,
        "--", *command,
    ]  # fmt: skip


def apply(memory_mb: int, file_size_mb: int, processes: int) -> None:
    """Set the rlimits of this process (inherited by whatever it runs or starts)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * MB, memory_mb * MB))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_mb * MB, file_size_mb * MB))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.sandbox.rlimits", description=__doc__)
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--file-size-mb", type=int, required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--cgroup", action="append", default=[], help="a cgroup to run in")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run (after --)")
    try:
        apply(args.memory_mb, args.file_size_mb, args.processes)
    except (ValueError, OSError) as error:
        raise SystemExit(f"grader.sandbox.rlimits: cannot set the limits ({error!r})") from None
    try:
        cgroups.join(args.cgroup)
    except OSError as error:  # the rlimits hold still; said in the kernel's log
        print(f"grader.sandbox.rlimits: not in the kernel's cgroups ({error!r})", file=sys.stderr)
    try:
        os.execvp(command[0], command)
    except OSError as error:
        raise SystemExit(f"grader.sandbox.rlimits: cannot run {command[0]} ({error!r})") from None


if __name__ == "__main__":
    main(sys.argv[1:])
