"""The demo class: a reference student, a blank one, and students with typical mistakes.

``demo/ASSIGNMENT/NAME.yaml`` describes one student (see :mod:`grader.coordinator.submission`); the
file name is the student id. A described student starts from the reference solutions, so a mistake
costs only the points of the tests that target it. Two students need no file: ``reference`` (the
solutions of ``source/``) and ``blank`` (the release notebooks untouched).

``course demo`` grades the demo class in a course folder of its own, ``demo-course/`` inside the
course (:func:`demo_course`): its own gradebook, release/, submitted/, autograded/, feedback/ and
grade table, so that a term graded in the course folder never sees a demo student.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import nbformat

from grader.coordinator import pipeline
from grader.coordinator.grading import Graded
from grader.coordinator.submission import fill, read_description, reference_code
from grader.sandbox import bubblewrap as sandbox
from grader.shared import reference_run
from grader.shared.notebooks import read_notebook
from grader.shared.paths import CONFIG_FILE, CourseError, assignments, require_assignment

REFERENCE, BLANK = "reference", "blank"
FOLDER = "demo-course"  # the demo's own course folder, inside the course (git ignores it)
MARKER = ".demo-course"  # the file that marks a course folder as the demo's
COPIED = ("source", "demo")  # what the demo's folder takes from the course, afresh each run
MISTAKES = 2  # named mistakes per assignment in the representative class (`course demo`)


def is_demo_course(root: Path) -> bool:
    """Whether ``root`` is the demo's own course folder (made by :func:`demo_course`)."""
    return (root / MARKER).is_file()


def demo_course(root: Path) -> Path:
    """The demo's own course folder, ``ROOT/demo-course/``, made or brought up to date: the course's
    nbgrader_config.py, reference runs, source/ and demo/ copied afresh; its gradebook, release/,
    submitted/, autograded/ and feedback/ its own. ``root`` itself when it is that folder."""
    if is_demo_course(root):
        return root
    folder = root / FOLDER
    folder.mkdir(exist_ok=True)
    (folder / MARKER).write_text(
        "The demo class's course folder (`course demo`, `make demo`), apart from the term's.\n"
        "Delete it whenever you like: `make clean`.\n"
    )
    shutil.copy(root / CONFIG_FILE, folder / CONFIG_FILE)  # its gradebook.db is the folder's own
    if (root / reference_run.FILE).is_file():  # the time limits of grading, as recorded
        shutil.copy(root / reference_run.FILE, folder / reference_run.FILE)
    for name in COPIED:
        shutil.rmtree(folder / name, ignore_errors=True)
        if (root / name).is_dir():
            shutil.copytree(root / name, folder / name)
    return folder


def student_ids(root: Path) -> set[str]:
    """Every demo student's id, of every assignment (``reference``, ``blank`` and ``demo/``'s)."""
    return {s for a in assignments(root) for s in descriptions(root, a)}


def descriptions(root: Path, assignment: str) -> dict[str, dict]:
    """Every demo student's description for ``assignment``, by student id."""
    folder = root / "demo" / assignment
    students: dict[str, dict] = {
        REFERENCE: {"about": "The instructor's solutions.", "expect": {"full_marks": True}},
        BLANK: {"about": "The release notebook, untouched.", "expect": {"zero": True}},
    }
    for path in sorted(folder.glob("*.yaml")):
        students[path.stem] = read_description(path)
    return students


def representative(
    root: Path, assignment: str, students: list[str] | None = None, mistakes: int = MISTAKES
) -> list[str]:
    """The representative demo class of ``assignment``: the reference, the blank release, one other
    correct style and ``mistakes`` named mistakes (``course demo`` grades these; ``course demo
    --all`` every demo student).

    The mistakes are taken in name order, each one only when it fails a test cell that none taken
    before it fails, so that the few shown target different exercises.
    """
    described = descriptions(root, assignment)
    students = sorted(described) if students is None else sorted(students)
    expect = {s: described.get(s, {}).get("expect", {}) for s in students}
    styles = [s for s in students if expect[s].get("full_marks") and s != REFERENCE]
    chosen = {s for s in (REFERENCE, BLANK) if s in students} | set(styles[:1])
    covered: set[str] = set()
    for student in (s for s in students if expect[s].get("fail")):
        if len(chosen - {REFERENCE, BLANK, *styles[:1]}) >= mistakes:
            break
        cells = set(expect[student]["fail"])
        if cells - covered:
            chosen.add(student)
            covered |= cells
    return sorted(chosen)


def build_class(root: Path, assignment: str) -> list[str]:
    """Write every demo student's notebooks to ``submitted/STUDENT/ASSIGNMENT/``."""
    require_assignment(root, assignment)
    release_dir = root / "release" / assignment
    notebooks = sorted(release_dir.glob("*.ipynb"))
    if not notebooks:
        raise CourseError(
            f"no release notebooks in {release_dir}: run `course release {assignment}`"
        )
    students = descriptions(root, assignment)
    for student, description in students.items():
        target = root / "submitted" / student / assignment
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        unused = set(description.get("code", {}))
        for release_path in notebooks:
            nb = read_notebook(release_path)
            if student != BLANK:
                source = read_notebook(root / "source" / assignment / release_path.name)
                fill(nb, reference_code(source))
            code = description.get("code", {})
            unused -= set(code) - set(fill(nb, code))
            nbformat.write(nb, str(target / release_path.name))
        if unused:
            raise CourseError(
                f"demo/{assignment}/{student}.yaml names {', '.join(sorted(unused))}, which no "
                f"solution cell of release/{assignment} defines"
            )
    return sorted(students)


def run(
    root: Path,
    assignments: list[str],
    jobs: int,
    say: Callable[[str], None] = print,
    unsafe_no_sandbox: bool = False,
    choose: Callable[[str, list[str]], list[str]] | None = None,
    warm: bool = True,
) -> Path:
    """Release, build the demo class, autograde in parallel, write feedback and the grade table.

    Every assignment is released and its class built first; then all the submissions are graded in
    one pool of ``jobs`` workers, and each assignment's feedback is written as soon as its last
    student is graded. ``choose(assignment, students)`` picks the students to grade (default: all of
    them; ``course demo`` passes :func:`representative` unless ``--all``). ``warm`` (the default;
    ``--cold`` not): kernels and nbgrader forked from warm workers (:mod:`grader.warm.pool`).

    The demo class is the course's own notebooks: where no sandbox can start (no bubblewrap, as on
    macOS), it is graded without one, and ``say`` tells so in one line. ``course autograde`` of a
    real class refuses instead, unless given ``--unsafe-no-sandbox``.
    """
    why = "" if unsafe_no_sandbox else no_sandbox_here()
    if why:
        say(
            f"{why}: the demo class (the course's own notebooks) is graded without the sandbox; "
            "`course autograde` of a real class refuses to, unless given --unsafe-no-sandbox"
        )
    unsafe_no_sandbox = unsafe_no_sandbox or bool(why)
    classes = {}
    for assignment in assignments:
        say(f"[{assignment}] generating release/ from source/")
        pipeline.release(root, assignment)
        students = build_class(root, assignment)
        classes[assignment] = choose(assignment, students) if choose is not None else students
        say(f"[{assignment}] demo class: {', '.join(classes[assignment])}")

    def feedback(assignment: str) -> None:
        pipeline.feedback(root, assignment)
        say(f"[{assignment}] feedback written to feedback/STUDENT/{assignment}/")

    results = pipeline.autograde_classes(
        root,
        classes,
        jobs=jobs,
        progress=lambda a, g: say(_graded_line(a, g)),
        unsafe_no_sandbox=unsafe_no_sandbox,
        finished=feedback,
        warm=warm,
    )
    failed = [f"{a}/{g.student}" for a, graded in results.items() for g in graded if not g.ok]
    if failed:
        raise CourseError(f"grading failed for {', '.join(failed)}")
    rows = pipeline.grade_rows(root)
    say(pipeline.format_grade_table(rows))
    path = pipeline.write_grades_csv(rows, root / "grades.csv")
    say(f"grade table written to {path}")
    return path


def no_sandbox_here() -> str:
    """Why no kernel can be sandboxed on this machine, in a few words; '' when one can."""
    if shutil.which("bwrap") is None:
        return "no sandbox here: bubblewrap (bwrap) is not installed"
    try:
        sandbox.check_sandbox()
    except CourseError:
        return "no sandbox here: bubblewrap cannot start one (user namespaces disabled?)"
    return ""


def _graded_line(assignment: str, graded: Graded) -> str:
    status = "graded" if graded.ok else f"NOT GRADED ({graded.message})"
    flags = [e for e in graded.events if e.status != "graded"]
    extra = "".join(f"\n    {e.notebook}: {e.status.upper()}: {e.detail}" for e in flags)
    return f"[{assignment}] {graded.student}: {status} in {graded.seconds:.1f} s{extra}"
