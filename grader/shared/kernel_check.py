"""Before any student cell runs: can the grading kernel import the course?

A kernel whose Python cannot import ``course`` (the course installed in another environment, the
sandbox not showing where it is installed) fails every test cell of the notebook: the submission
would be recorded as a student's zero, "graded". So the kernel is asked first
(:func:`check_course_importable`, called by
:class:`grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints`
on every path that grades): ``import course``, and the assignment's own package. When that fails, no
cell runs, nbgrader records no score (the gradebook keeps the submission's earlier grades), the
grading report says "not graded" with the kernel's error and what to fix, and the `course` command
says the same (:func:`grader.coordinator.nbgrader_run.first_error` finds
:data:`MARKER` in nbgrader's log). The check is the grader's own: it does not depend on
anything the notebook's cells do.
"""

from __future__ import annotations

from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute

from grader.shared import report

MARKER = "CourseNotImportable"  # the exception's name, as nbgrader's log shows it
NOT_GRADED = "not graded"

# Run in the kernel in a namespace of its own (the student's namespace gets no name). The error
# names the kernel's interpreter, so that the instructor sees which environment lacks the course.
CODE = '''exec(compile("""
import importlib, importlib.util, os, sys
try:
    import course
    here = os.path.realpath(os.getcwd())
    found = getattr(course, "__file__", None)
    where = os.path.realpath(os.path.dirname(found) if found else list(course.__path__)[0])
    if where == here or where.startswith(here + os.sep):
        raise ImportError(f"{{SHADOW}} ({{where}})")
    if importlib.util.find_spec({package!r}) is not None:
        importlib.import_module({package!r})
except BaseException as error:
    raise ImportError(
        f"{{type(error).__name__}}: {{error}}; the kernel's Python: {{sys.executable}}"
    ) from None
""", "<the grader's check: import course>", "exec"), {{"SHADOW": {shadow!r}}})
'''
FIX = (
    "install the course into that Python's environment (`make setup` in the course folder, or "
    "`pip install -e COURSE_FOLDER`), or grade with the `course` command of the environment "
    "that has it; then grade again (no cell of the submission ran; its earlier grades are kept)"
)


# A submission that hands in a folder ``course/`` of its own: the kernel's working folder comes
# first on its path, so that folder would stand in for the course (its checks, its observation).
SHADOW = "the submission holds a course package of its own, which hides the installed course"
SHADOW_FIX = (
    "look at the submission's files: a folder or file named course in it stands in for the "
    "course's own checks; remove it (or ask the student to), then grade again (no cell of the "
    "submission ran; its earlier grades are kept)"
)


class CourseNotImportable(RuntimeError):
    """The grading kernel cannot import the course: the submission is not graded."""


def check_course_importable(client: Execute, assignment: str) -> None:
    """Ask ``client``'s kernel to import ``course`` and ``course.ASSIGNMENT`` (if it exists); raise
    :class:`CourseNotImportable` with the kernel's error and what to fix if it cannot."""
    package = f"course.{assignment}" if assignment else "course"
    code = CODE.format(package=package, shadow=SHADOW)
    try:
        reply = client.wait_for_reply(client.kc.execute(code, silent=True, store_history=False))
    except DeadKernelError as error:
        failed = f"the kernel died while it imported the course ({error})"
    else:
        content = (reply or {}).get("content", {})
        if content.get("status") == "ok":
            return
        failed = str(content.get("evalue") or content.get("ename") or "no answer from the kernel")
    fix = SHADOW_FIX if SHADOW in failed else FIX
    message = f"the grading kernel cannot import the course ({failed[:500]}): {fix}"
    _report(client, message)
    raise CourseNotImportable(message)


def _report(client: Execute, message: str) -> None:
    """The grading report's line for this notebook: not graded, why. In the course folder on plain
    nbgrader's path; on `course autograde`'s, in the scratch course (removed), the run writing its
    own line from nbgrader's log."""
    info = client.resources.get("nbgrader", {})
    assignment, student = str(info.get("assignment", "")), str(info.get("student", ""))
    if not assignment or not student:
        return
    root = Path(CourseDirectory(config=client.config).root)
    event = report.Event(assignment, student, str(info.get("notebook", "")), NOT_GRADED, None,
                         None, message)  # fmt: skip
    report.update(root, [event])
