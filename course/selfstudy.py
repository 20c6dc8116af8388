"""Self-study controls in a learner's own copy of a notebook (``work/``, in a clone of the course).

- :func:`compare`, under each written question: once the answer cell holds an answer (saved),
  a button shows the model answer and the rubric (read from the clone's ``source/`` at run time)
  and a box per rubric point; the points ticked are kept beside the notebook
  (``NOTEBOOK.marks.json``), never in it. Before an attempt it shows nothing of the answer.
- :func:`check_button`: ``course check`` on the saved notebook, visible and hidden tests, one
  line per exercise (the hidden tests' messages, never their code).
- :func:`progress`: ``course progress``, A to H, and what to do next.

Where there is no clone (the student part alone, a JupyterHub class) or while the notebook is
graded, each says that written answers are graded by the instructor, or that the hidden tests run
when the work is graded, and shows nothing else. The last two run the instructor's ``course``
command of the clone (``python -m grader.command.cli``) in a separate process.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from html import escape
from pathlib import Path

from course import mode
from course.selfstudy_files import (
    Question,
    attempted,
    cell_text,
    clone_source,
    learner_notebook,
    read_marks,
    read_question,
    save_marks,
)

GRADED_BY_INSTRUCTOR = "Written answers are graded by the instructor."
HIDDEN_WHEN_GRADED = "The hidden tests run when your work is graded."
SAVE_FIRST = "(It reads the saved notebook: save it first, Ctrl+S.)"
COMMAND = "grader.command.cli"  # the instructor's `course` command, in a clone


def _say(text: str) -> None:
    from IPython.display import Markdown, display  # the kernel's display (no IPython outside)

    display(Markdown(f"*{text}*"))


def _button(description: str, name: str, icon: str = "") -> tuple[object, object]:
    """A control's button (CSS class ``name``, for the tests and the lab's style) and the output
    area below it."""
    import ipywidgets as widgets  # the kernel's widgets: loaded when a control is drawn

    button = widgets.Button(description=description, icon=icon)
    button.layout.width = "auto"
    button.add_class(name)
    return button, widgets.Output()


def compare(grade_id: str) -> object:
    """The "compare" control of the written question ``grade_id`` (a cell under its answer);
    returns it (None where written answers are graded by the instructor)."""
    import ipywidgets as widgets  # the kernel's widgets: loaded when a control is drawn
    from IPython.display import Markdown, display  # (likewise)

    notebook = learner_notebook(grade_id)
    source = clone_source(notebook) if notebook else None
    if source is None:
        _say(GRADED_BY_INSTRUCTOR)
        return None
    button, out = _button("Compare with the model answer", "course-compare", "balance-scale")

    def show(_: object = None) -> None:
        out.clear_output()
        with out:
            if not attempted(cell_text(notebook, grade_id)):
                _say(f"Nothing to compare yet: write your answer in the cell above. {SAVE_FIRST}")
                return
            question = read_question(source, grade_id)
            if question is None:
                _say(f"No model answer for {grade_id} in {source}.")
                return
            display(Markdown(question.model), Markdown(question.rubric))
            display(_rubric_boxes(notebook, question))

    button.on_click(show)
    control = widgets.VBox([button, out])
    display(control)
    return control


def _rubric_boxes(notebook: Path, question: Question) -> object:
    """A box per rubric item, ticked as the learner left them; each tick is saved at once."""
    import ipywidgets as widgets  # the kernel's widgets (see compare)

    ticked = set(read_marks(notebook).get(question.grade_id, {}).get("ticked", []))
    total = widgets.HTML()
    boxes = []
    for i in range(len(question.items)):
        box = widgets.Checkbox(value=i in ticked, description="", indent=False)
        box.layout.width = "2em"
        box.add_class("course-rubric-point")
        boxes.append(box)

    def save(_: object = None) -> None:
        chosen = [i for i, b in enumerate(boxes) if b.value]
        points = save_marks(notebook, question, chosen)
        total.value = (
            f"<b>Self-marked: {points:g} of {question.points:g} points</b> "
            f"(kept in {notebook.stem}.marks.json, beside the notebook)"
        )

    rows = []
    for box, (_, text) in zip(boxes, question.items, strict=True):
        box.observe(save, names="value")
        label = widgets.HTMLMath(value=text.replace("\n", " "))
        rows.append(widgets.HBox([box, label]))
    heading = widgets.HTML("Tick each point your answer makes:")
    if ticked:
        save()
    else:
        total.value = f"Self-marked: not yet (0 of {question.points:g} points)"
    return widgets.VBox([heading, *rows, total])


def _course(*args: str) -> tuple[int, str]:
    """Run the clone's ``course`` command; (exit code, what it printed)."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_FAST"}
    done = subprocess.run(
        [sys.executable, "-m", COMMAND, *args], capture_output=True, text=True, env=env
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def _has_grader() -> bool:
    return importlib.util.find_spec(COMMAND.split(".")[0]) is not None


def _pre(text: str) -> object:
    import ipywidgets as widgets  # the kernel's widgets (see compare)

    return widgets.HTML(f"<pre style='white-space: pre-wrap'>{escape(text)}</pre>")


def check_button(grade_id: str) -> object:
    """A button that runs ``course check`` on this notebook (``grade_id``: one of its cells, to
    find it): every exercise's visible and hidden tests, one line each."""
    import ipywidgets as widgets  # the kernel's widgets (see compare)
    from IPython.display import display  # (likewise)

    notebook = learner_notebook(grade_id)
    if notebook is None or clone_source(notebook) is None or not _has_grader():
        _say(HIDDEN_WHEN_GRADED)
        return None
    button, out = _button("Check every exercise (visible and hidden tests)", "course-check")

    def run(_: object = None) -> None:
        out.clear_output()
        with out:
            display(widgets.HTML("Running the notebook with every test (a minute or so)..."))
        code, text = _course("check", str(notebook))
        out.clear_output()
        with out:
            display(_pre(text))

    button.on_click(run)
    control = widgets.VBox([widgets.HTML(SAVE_FIRST), button, out])
    display(control)
    return control


def progress() -> object:
    """``course progress`` of the clone, with a button that shows it again."""
    import ipywidgets as widgets  # the kernel's widgets (see compare)
    from IPython.display import display  # (likewise)

    here = Path.cwd().resolve()
    roots = [p for p in [here, *here.parents] if (p / "source").is_dir() and (p / "work").is_dir()]
    if not roots or mode.under_nbgrader() or not _has_grader():
        _say(f"{GRADED_BY_INSTRUCTOR} {HIDDEN_WHEN_GRADED}")
        return None
    button, out = _button("Show my progress again", "course-progress", "refresh")

    def show(_: object = None) -> None:
        _, text = _course("--root", str(roots[0]), "progress")
        out.clear_output()
        with out:
            display(_pre(text))

    button.on_click(show)
    show()
    control = widgets.VBox([out, button])
    display(control)
    return control
