"""The class report's page: one self-contained HTML file (figures embedded as PNG, no script, no
server), links to the students' feedback relative to the page. The data:
:mod:`grader.report.class_report`.
"""

from __future__ import annotations

import base64
import io
import os
import statistics
from html import escape
from pathlib import Path

from grader.report import similarity
from grader.report.class_report import ClassData, Exercise, Mistake, gather

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;padding:0 1em}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ddd;padding:.25em .6em;
text-align:left;vertical-align:top} th{background:#f4f4f4}
.num{text-align:right} .exercise{display:grid;grid-template-columns:34em 1fr;gap:2em;
align-items:start}
.message{white-space:pre-wrap;font-family:monospace;font-size:.85em;background:#fafafa;
border-left:3px solid #c66;padding:.3em .6em;margin:.2em 0;max-width:60em}
.other .message{border-left-color:#999} .students a{margin-right:.5em}
.side{display:grid;grid-template-columns:1fr 1fr;gap:1em} pre{margin:0;font-size:.8em;
overflow-x:auto;background:#fafafa;padding:.4em} .shared{background:#fde9a8;display:block}
.note{color:#555;font-size:.9em} nav a{margin-right:1em} .mistake{margin-top:.9em}
"""


def write(root: Path, assignment: str, out: Path, threshold: float) -> Path:
    """Gather ``assignment``'s class (:func:`grader.report.class_report.gather`) and write its
    page at ``out``."""
    data = gather(root, assignment, threshold)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(data, out), encoding="utf-8")
    return out


def page(data: ClassData, out: Path) -> str:
    """The whole page for ``data``, written to be saved at ``out`` (for its relative links)."""
    total = len(data.students)
    parts = [
        f"<h1>Class report: {escape(data.assignment)}</h1>",
        f"<p>{total} students. Everything here is read from what grading kept (gradebook, "
        "grading_report.csv, the trusted judge's verdicts); nothing from the text of outputs.</p>",
        '<nav><a href="#exercises">Exercises</a><a href="#mistakes">Mistakes</a>'
        '<a href="#attention">Needs attention</a><a href="#times">Grading time</a>'
        '<a href="#written">Written answers</a><a href="#alike">Alike</a>'
        '<a href="#published">Published solution</a></nav>',
        _exercises(data),
        _mistakes(data, out),
        _attention(data, out),
        _times(data),
        _written(data),
        _alike(data, out),
        _published(data, out),
    ]
    body = "\n".join(parts)
    title = f"Class report: {escape(data.assignment)}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )


# ----------------------------------------------------------------------------- figures
def _figure(draw: object, width: float = 4.0, height: float = 2.4) -> str:
    """An ``<img>`` of the figure ``draw(axes)`` draws, as an embedded PNG."""
    import matplotlib  # noqa: PLC0415 - only when a page is made

    matplotlib.use("Agg")
    from matplotlib.figure import Figure  # noqa: PLC0415

    figure = Figure(figsize=(width, height), dpi=90, layout="constrained")
    draw(figure.add_subplot())  # type: ignore[operator]
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def _histogram(values: list[float], xlabel: str) -> str:
    """A histogram of ``values`` (seconds)."""

    def draw(axes: object) -> None:
        axes.hist(values, bins=20, color="#4a7ab5", edgecolor="white")
        axes.set_xlabel(xlabel)
        axes.set_ylabel("students")

    return _figure(draw)


def _points_chart(values: list[float], xlabel: str, most: float) -> str:
    """How many students got each number of points, from 0 to ``most``."""
    counts: dict[float, int] = {}
    for value in values:
        counts[round(value, 2)] = counts.get(round(value, 2), 0) + 1

    def draw(axes: object) -> None:
        axes.bar(list(counts), list(counts.values()), width=0.6, color="#4a7ab5")
        axes.set_xlim(-0.6, most + 0.6)
        axes.set_xticks(range(int(most) + 1))
        axes.set_xlabel(xlabel)
        axes.set_ylabel("students")

    return _figure(draw)


# ----------------------------------------------------------------------------- sections
def points_of(data: ClassData, exercise: Exercise) -> dict[str, float]:
    """Each student's points on ``exercise`` (the students with a grade for it)."""
    found: dict[str, float] = {}
    for student in data.students:
        cells = [data.grades.get((student, exercise.notebook, c)) for c in exercise.cells]
        if any(cell is not None for cell in cells):
            found[student] = sum(float(c[0] or 0.0) for c in cells if c is not None)
    return found


def visible_not_hidden(data: ClassData, exercise: Exercise) -> set[str]:
    """The students with full points on the visible test cells but not on the hidden ones."""

    def full(student: str, cells: list[str]) -> bool:
        got = [data.grades.get((student, exercise.notebook, c)) for c in cells]
        return all(g is not None and (g[0] or 0.0) >= g[1] for g in got)

    return {
        s for s in data.students
        if exercise.visible and exercise.hidden
        and full(s, exercise.visible) and not full(s, exercise.hidden)
    }  # fmt: skip


def _most(data: ClassData, exercise: Exercise) -> float:
    """The exercise's points (each cell's most, as the gradebook holds it)."""
    most = {(n, c): g[1] for (_, n, c), g in data.grades.items()}
    return sum(most.get((exercise.notebook, cell), 0.0) for cell in exercise.cells)


def _exercises(data: ClassData) -> str:
    rows = ['<h2 id="exercises">Autograded exercises</h2>']
    for exercise in data.exercises:
        points = points_of(data, exercise)
        most = _most(data, exercise)
        tricked = visible_not_hidden(data, exercise)
        blank = data.blank.get(exercise.name, set())
        full = sum(1 for p in points.values() if p >= most)
        label = f"points of {exercise.name} (of {most:g})"
        figure = _points_chart(list(points.values()), label, most)
        rows.append(
            f'<div class="exercise"><div><h3>{escape(exercise.name)}</h3><table>'
            f"<tr><th>test cells</th><td>{escape(', '.join(exercise.cells))}</td></tr>"
            f'<tr><th>full points</th><td class="num">{full} of {len(points)}</td></tr>'
            f'<tr><th>passed the visible test, failed the hidden one</th><td class="num">'
            f"{len(tricked)}</td></tr>"
            f'<tr><th>left blank (solution cells as released)</th><td class="num">{len(blank)}'
            f"</td></tr></table></div><div>{figure}</div></div>"
        )
    return "\n".join(rows)


def _link(student: str, data: ClassData, out: Path) -> str:
    files = data.feedback.get(student, {})
    if not files:
        return f"<span>{escape(student)}</span>"
    target = os.path.relpath(next(iter(files.values())), out.parent)
    return f'<a href="{escape(target)}">{escape(student)}</a>'


def _mistakes(data: ClassData, out: Path) -> str:
    parts = [
        '<h2 id="mistakes">Mistakes, exercise by exercise</h2>',
        '<p class="note">Each failed test cell carries the key of the check that failed it, '
        "recorded by the trusted judge where it gave its verdict. The named mistakes (the "
        "misconceptions the checks recognise) come first, the most frequent first; then the "
        "failures no check named (wrong values or shape, an error raised). A student counts once "
        "per mistake and exercise. Names link to the student's feedback.</p>",
    ]
    for exercise in data.exercises:
        found = data.mistakes.get(exercise.name, [])
        if not found:
            continue
        parts.append(f"<h3>{escape(exercise.name)}</h3>")
        parts += [_mistake(m, data, out) for m in found]
    return "\n".join(parts)


def _mistake(mistake: Mistake, data: ClassData, out: Path) -> str:
    students = " ".join(_link(s, data, out) for s in sorted(mistake.students))
    kind = "" if mistake.named else " other"
    label = "" if mistake.named else " (not a named mistake)"
    message = escape(mistake.message or mistake.key)
    return (
        f'<div class="mistake{kind}" data-key="{escape(mistake.key)}">'
        f"<b>{len(mistake.students)} student{'s' if len(mistake.students) != 1 else ''}</b>"
        f'{label}<div class="message">{message}</div>'
        f'<div class="students">{students}</div></div>'
    )


def _attention(data: ClassData, out: Path) -> str:
    rows = ['<h2 id="attention">Flagged, timed out, over quota, not graded</h2>']
    if not data.problems:
        return rows[0] + "<p>None: every notebook was graded as usual.</p>"
    rows.append("<table><tr><th>student</th><th>notebook</th><th>status</th><th>points</th>"
                "<th>reason</th></tr>")  # fmt: skip
    for r in data.problems:
        points = f"{r['points'] or 0}/{r['max_points']}" if r["max_points"] else ""
        rows.append(
            f"<tr><td>{_link(r['student'], data, out)}</td><td>{escape(r['notebook'])}</td>"
            f"<td>{escape(r['status'])}</td><td>{points}</td><td>{escape(r['detail'])}</td></tr>"
        )
    return "\n".join(rows) + "</table>"


def _times(data: ClassData) -> str:
    head = '<h2 id="times">Time to grade each submission</h2>'
    times = data.seconds
    if not times:
        return head + "<p>No grading time recorded (graded before `course report` existed?).</p>"
    values = sorted(times.values())
    slowest = sorted(times.items(), key=lambda item: -item[1])[:10]
    table = "".join(
        f'<tr><td>{escape(s)}</td><td class="num">{t:.1f} s</td></tr>' for s, t in slowest
    )
    return (
        f"{head}<p>{len(values)} submissions: median {statistics.median(values):.1f} s, "
        f"longest {values[-1]:.1f} s, {sum(values) / 60:.1f} minutes in all.</p>"
        f'<div class="exercise"><div>{_histogram(values, "seconds")}</div>'
        f"<table><tr><th>slowest</th><th>time</th></tr>{table}</table></div>"
    )


def _written(data: ClassData) -> str:
    head = '<h2 id="written">Written answers (graded by hand)</h2>'
    questions: dict[str, list[tuple[float | None, float, bool]]] = {}
    for (_, _, cell), (points, most, needs, kind) in sorted(data.grades.items()):
        if kind == "markdown":
            questions.setdefault(cell, []).append((points, most, needs))
    if not questions:
        return head + "<p>This assignment has no written answer.</p>"
    rows, spread = [], {}
    for cell, grades in questions.items():
        done = [g[0] for g in grades if not g[2] and g[0] is not None]
        spread[cell] = [float(p) for p in done]
        mean = f"{statistics.mean(done):.2f}" if done else ""
        rows.append(
            f'<tr><td>{escape(cell)}</td><td class="num">{len(done)} of {len(grades)}</td>'
            f'<td class="num">{mean}</td><td class="num">{grades[0][1]:g}</td></tr>'
        )
    graded = sum(len(v) for v in spread.values())
    total = sum(len(v) for v in questions.values())
    figure = _boxes(spread) if graded else "<p>None graded yet: the spread comes later.</p>"
    return (
        f"{head}<p>{graded} of {total} answers graded so far (by hand in formgrader; an answer "
        "left blank is given 0 by nbgrader itself).</p>"
        "<table><tr><th>question</th><th>graded</th><th>mean</th><th>of</th></tr>"
        f"{''.join(rows)}</table>{figure}"
    )


def _boxes(spread: dict[str, list[float]]) -> str:
    names = [name for name, values in spread.items() if values]

    def draw(axes: object) -> None:
        axes.boxplot([spread[n] for n in names], orientation="horizontal")
        axes.set_yticks(range(1, len(names) + 1), names)
        axes.set_xlabel("points given by hand")

    return _figure(draw, 6.0, 0.5 + 0.35 * len(names))


def _alike(data: ClassData, out: Path) -> str:
    head = (
        '<h2 id="alike">Submissions that look alike: to look at</h2><p class="note">'
        "Only the code the students wrote in the solution cells is compared (the release's own "
        "lines and the other cells left out). Detector: winnowing, as MOSS does (Schleimer, "
        f"Wilkinson, Aiken 2003): runs of {similarity.K} tokens hashed, the smallest hash of "
        f"every {similarity.WINDOW} kept, so that a shared passage of "
        f"{similarity.K + similarity.WINDOW - 1} tokens or more is always found. Tokens: "
        "Python's tokenizer; comments, blank lines and layout left out; every name the student "
        "chose becomes V, every number N, every string S (renaming changes nothing); keywords, "
        "operators, builtins, library names and attributes kept. A passage of the instructor's own "
        "solution counts for no pair (an idiomatic answer honest students find too), nor does "
        "one found in more than "
        f"{similarity.common_limit(len(data.code))} submissions is common writing and counts for "
        f"no pair. Listed: pairs whose shared passages cover at least {data.threshold:.0%} of "
        "the smaller one. A pair listed here is one to look at, not a finding: short exercises "
        "have few ways to be written.</p>"
    )
    if not data.pairs:
        return head + "<p>No pair above the threshold.</p>"
    rows = [head, "<table><tr><th>#</th><th>students</th><th>shared (of each)</th></tr>"]
    for number, pair in enumerate(data.pairs, 1):
        rows.append(
            f'<tr class="pair"><td>{number}</td><td><a href="#pair-{number}">'
            f"{escape(pair.a)} and {escape(pair.b)}</a></td><td>{pair.share_a:.0%} / "
            f"{pair.share_b:.0%}</td></tr>"
        )
    rows.append("</table>")
    for number, pair in enumerate(data.pairs[:50], 1):
        rows.append(
            f'<h3 id="pair-{number}">{number}. {_link(pair.a, data, out)} and '
            f'{_link(pair.b, data, out)}: to look at</h3><div class="side">'
            f"{_code(data.code.get(pair.a, []), pair.lines_a)}"
            f"{_code(data.code.get(pair.b, []), pair.lines_b)}</div>"
        )
    return "\n".join(rows)


def _published(data: ClassData, out: Path) -> str:
    head = (
        '<h2 id="published">Close to the published solution: to review</h2><p class="note">'
        "The course is open: its solutions (source/) are public upstream. Listed: a student's "
        "code for an exercise whose tokens (compared as above: renaming and comments change "
        f"nothing) lie at least {similarity.PUBLISHED_SHARE:.0%} in passages of the published "
        f"solution, only on exercises whose solution has {similarity.PUBLISHED_TOKENS} tokens "
        "or more (shorter ones have an idiomatic answer honest students write too). Correct "
        "answers written independently stayed under 40% on every such exercise, copies with "
        "renamed variables and comments above 90% (docs/term.md). A pointer for a conversation, "
        "never a verdict: a student may have written it alone.</p>"
    )
    if not data.published:
        return head + "<p>No submission this close.</p>"
    rows = [head, "<table><tr><th>student</th><th>exercise</th><th>in its passages</th></tr>"]
    for near in data.published:
        rows.append(
            f'<tr class="published"><td>{_link(near.student, data, out)}</td>'
            f"<td>{escape(near.exercise)}</td><td>{near.share:.0%}</td></tr>"
        )
    return "\n".join(rows + ["</table>"])


def _code(lines: list[str], shared: set[int]) -> str:
    shown = []
    for number, line in enumerate(lines):
        text = escape(line) or " "
        shown.append(f'<span class="shared">{text}</span>' if number in shared else text + "\n")
    return f"<pre>{''.join(shown)}</pre>"
