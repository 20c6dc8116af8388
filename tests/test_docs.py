"""The docs are what a reader can follow: every command they show is one the course has, every
option of the `course` command is in the generated reference, every relative link and anchor
resolves, guides hold no records, and the README stays a short front page."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "tools"))

import cli_reference  # noqa: E402  (tools/, as when the script runs)
import doc_words  # noqa: E402

DOCS = REPO / "docs"
PAGES = [
    REPO / "README.md",
    REPO / "CONTRIBUTING.md",
    *sorted(DOCS.glob("*.md")),
    REPO / "deploy" / "jupyterhub" / "README.md",
    REPO / "student" / "GUIDE.md",  # the student's page, published with the public copy
    REPO / "student" / "README.md",
]
# Records keep their dates and the commands of their day; every other page is a guide or reference.
RECORDS = {DOCS / "history.md"}
GUIDES = [p for p in PAGES if p not in RECORDS]


def _text(page) -> str:
    return page.read_text(encoding="utf-8")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page) -> set[str]:
    """Every anchor of a page: its headings' (numbered as GitHub numbers repeats) and its ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for line in _text(page).splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and (m := re.match(r"#{1,6} (.+)", line)):
            base = slug(m.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found |= set(re.findall(r'<a id="([^"]+)"', _text(page)))
    return found


def _prose(page) -> str:
    """The page without its fenced blocks (links in code are not links)."""
    return re.sub(r"^```.*?^```", "", _text(page), flags=re.S | re.M)


def broken_links(pages: list) -> list[str]:
    """Each relative link of these pages whose file, or whose anchor in a markdown file, is
    missing."""
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", _prose(page)):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.name} -> {target}")
                continue
            if anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.name} -> {target}#{anchor}")
    return broken


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = broken_links(PAGES)
    assert not broken, broken


def test_a_broken_link_or_anchor_is_caught(tmp_path) -> None:
    (tmp_path / "a.md").write_text(
        "# The `course` command: one page\n\n## Twice\n\n## Twice\n\n"
        '<a id="kept"></a>[here](#kept), [there](b.md#gone), [file](c.md), [ok](b.md#b-page)\n'
        "[self](#the-course-command-one-page) [again](#twice-1) [web](https://x.org/y.md)\n"
    )
    (tmp_path / "b.md").write_text("# B page\n\n```\n# not a heading\n```\n[x](#not-a-heading)\n")
    assert broken_links([tmp_path / "a.md", tmp_path / "b.md"]) == [
        "a.md -> b.md#gone",
        "a.md -> c.md",
        "b.md -> #not-a-heading",
    ]


def test_the_docs_stay_within_their_word_budget() -> None:
    """docs/ without its records: at most 60% of the words it had before it was rewritten
    (`python tools/doc_words.py` prints each page's count)."""
    counts = doc_words.words()
    assert "history.md" not in counts and "README.md" in counts
    total = sum(counts.values())
    assert total <= doc_words.BUDGET, f"docs/ holds {total} words, over {doc_words.BUDGET}"


def test_the_word_count_tool_prints_its_help_and_writes_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "tools/doc_words.py", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0 and "budget" in done.stdout, done


def test_the_readme_is_a_front_page_and_the_index_names_every_page() -> None:
    readme = _text(REPO / "README.md")
    assert len(readme.splitlines()) <= 150
    assert "(docs/README.md)" in readme
    for path in ("student", "instructor", "contributor"):
        assert f"## The {path} path" in readme, path
    index = _text(DOCS / "README.md")
    linked = set(re.findall(r"\]\(([a-z_-]+\.md)[)#]", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages <= linked, f"docs/README.md does not say who reads {sorted(pages - linked)}"


# ---------------------------------------------------------------- every command a reader types


def commands(page) -> list[str]:
    """Every `course`, `make` and `nbgrader` command of a page: lines of its fenced blocks and
    code spans of its prose, continuation lines joined, comments and prompts left out."""
    text = _text(page)
    found: list[str] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        found += block.replace("\\\n", " ").splitlines()
    # a code span of one word is a program's name in a sentence ("the `course` command"), not a
    # command: not counted (a fenced line of one word is, and is checked)
    spans = re.findall(r"`([^`\n]+)`", _prose(page).replace("\n", " "))
    found += [span for span in spans if len(span.split()) > 1]
    typed = []
    for line in found:
        line = re.sub(r"^\s*\$ ", "", line)
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        for part in re.split(r"&&|;|\|\|", line):
            words = part.split()
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                words = words[1:]  # VAR=value before the command
            if words and words[0].split("/")[-1] in ("course", "make", "nbgrader"):
                if words[0] in ("course", "make", "nbgrader") or words[0].startswith(".venv/"):
                    typed.append(" ".join(words))
    return typed


ALL_COMMANDS = sorted({(p, c) for p in GUIDES for c in commands(p)}, key=str)


def test_the_docs_show_commands_of_each_kind() -> None:
    kinds = {c.split()[0].split("/")[-1] for _, c in ALL_COMMANDS}
    assert kinds == {"course", "make", "nbgrader"}, kinds
    assert len(ALL_COMMANDS) > 40


def _placeholders(words: list[str]) -> list[str]:
    """A command as a reader types it: `[--jobs N]` with its brackets gone, `a|b` as `a`."""
    out = []
    for word in words:
        word = word.strip("[]")
        if not word or word.endswith("..."):
            continue
        if "|" in word and not word.startswith("-"):
            word = word.split("|")[0]
        out.append({"N": "2", "MINUTES": "30"}.get(word, word))
    return out


def _course_path(words: list[str]) -> bool:
    """The words name a sub-command and some of its options, without the arguments it needs
    (`course autograde` or `course grades --lms` in a sentence)."""
    from grader.command.cli import parser

    node, rest = parser(), list(words)
    named = False
    while rest and (sub := cli_reference._subparsers(node)) and rest[0] in sub.choices:
        node, named = sub.choices[rest.pop(0)], True
    options = {f: a for a in node._actions for f in a.option_strings}
    waiting = None  # the option whose value comes next
    for word in rest:
        if word.startswith("-"):
            flag, _, given = word.partition("=")
            if flag not in options or (given and not _fits(options[flag], given)):
                return False
            waiting = options[flag] if options[flag].nargs != 0 and not given else None
        elif waiting is None or not _fits(waiting, word):
            return False
        else:
            waiting = None
    return named


def _fits(action, word: str) -> bool:
    return not action.choices or word in action.choices


def course_parses(words: list[str]) -> bool:
    from grader.command.cli import parser

    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser().parse_args(words)
        except SystemExit as stop:
            return stop.code == 0 or _course_path(words)
    return True


ASSIGNMENTS = {p.name for p in (REPO / "source").iterdir() if p.is_dir()}


def assignment_names(words: list[str]) -> list[str]:
    """The words of a command that name an assignment (`a_masks`, `--assignment b_x=Column`)."""
    names = []
    for word in words:
        for part in word.split(","):
            name = part.split("=")[-1] if part.startswith("--") else part.split("=")[0]
            if re.fullmatch(r"[a-z]_[a-z_]+", name):
                names.append(name)
    return names


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", _text(REPO / "Makefile"), re.M))


def _load(app: object) -> type:
    if isinstance(app, str):
        module, _, name = app.rpartition(".")
        return getattr(importlib.import_module(module), name)
    return app  # type: ignore[return-value]


def nbgrader_parses(words: list[str]) -> bool:
    """The sub-commands exist (`db student import`) and each option is one the app takes."""
    from nbgrader.apps import NbGraderApp

    def value(app: type, name: str) -> dict:
        found = getattr(app, name, None)
        if isinstance(found, dict):
            return found
        trait = app.class_traits().get(name)  # a traitlets Dict on the class
        return dict(trait.default() or {}) if trait is not None else {}

    app: type = NbGraderApp
    rest = list(words)
    while rest and rest[0] in value(app, "subcommands"):
        app = _load(value(app, "subcommands")[rest.pop(0)][0])
    if app is NbGraderApp and words:
        return False
    names = set()
    for key in [*value(app, "aliases"), *value(app, "flags")]:
        names |= set(key) if isinstance(key, tuple) else {key}
    for word in rest:
        if word.startswith("-"):
            name = word.lstrip("-").split("=")[0]
            if name not in names and "." not in name:
                return False
    return True


@pytest.mark.parametrize(
    ("page", "command"), ALL_COMMANDS, ids=[f"{p.name}:{c}" for p, c in ALL_COMMANDS]
)
def test_every_command_in_the_docs_is_one_the_course_has(page, command: str) -> None:
    problem = command_problem(command)
    assert problem is None, f"{page.name}: `{command}` {problem}"


def command_problem(command: str) -> str | None:
    """Why a command of the docs is not one the course has (None: it is). Every command is
    checked against something: its parser, the Makefile's targets or nbgrader's apps."""
    words = _placeholders(shlex.split(command, posix=True))
    program = words[0].split("/")[-1]
    if program == "course":
        if len(words) == 1 or not course_parses(words[1:]):
            return "is not a course command"
        unknown = set(assignment_names(words[1:])) - ASSIGNMENTS
        return f"names no assignment {sorted(unknown)}" if unknown else None
    if program == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        known = make_targets()
        if not targets:  # `make` alone, or with variables: the Makefile's first target
            return None if default_target() in known else "runs no target of the Makefile"
        return None if set(targets) <= known else "names no target of the Makefile"
    if len(words) == 1 or not nbgrader_parses(words[1:]):
        return "is not nbgrader's"
    return None


def default_target() -> str | None:
    """The target that `make` alone runs: the Makefile's first (or its .DEFAULT_GOAL)."""
    text = _text(REPO / "Makefile")
    goal = re.search(r"^\.DEFAULT_GOAL\s*:?=\s*(\S+)", text, re.M)
    first = re.search(r"^([a-z][a-z-]*):", text, re.M)
    return goal.group(1) if goal else first.group(1) if first else None


def test_a_wrong_command_is_caught() -> None:
    """The checks above can fail: a misspelt option, target or sub-command is refused."""
    assert not course_parses(["autograde", "a_masks", "--jobz", "2"])
    assert not course_parses(["autograd", "a_masks"])
    assert not nbgrader_parses(["autograd", "a_masks"])
    assert not course_parses(["grades", "--missing", "none"])
    assert assignment_names(["--assignment", "a_masks,c_pretrain=Lab (1)"]) == [
        "a_masks",
        "c_pretrain",
    ]
    assert course_parses(["grades", "--lms", "canvas", "--missing", "empty"])
    assert not nbgrader_parses(["db", "assignment", "add", "a", "--due=x"])
    assert nbgrader_parses(["db", "assignment", "add", "a", "--duedate=x"])
    assert "help" in make_targets() and "lab-now" not in make_targets()
    # every counted case checks something: a program's name alone is no command
    assert command_problem("course") == "is not a course command"
    assert command_problem("nbgrader") == "is not nbgrader's"
    assert command_problem("make nosuchtarget") == "names no target of the Makefile"
    assert command_problem("make ALL=1") is None and default_target() in make_targets()
    assert command_problem("course autograde z_none") == "names no assignment ['z_none']"
    page = REPO / "README.md"  # "Python 3.11 or newer and `make`": a name, not counted
    assert "`make`" in _text(page) and all(len(c.split()) > 1 for c in commands(page))


# ---------------------------------------------------------------- the generated reference


def test_the_cli_reference_is_what_the_parser_says() -> None:
    assert _text(DOCS / "cli.md") == cli_reference.page(), (
        "docs/cli.md is stale: run python tools/cli_reference.py"
    )


def test_every_option_of_the_course_command_is_in_the_reference() -> None:
    from grader.command.cli import parser

    reference = _text(DOCS / "cli.md")
    missing = []

    def walk(node, words: list[str]) -> None:
        for action in node._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help") and f"`{flag}" not in reference:
                    missing.append(f"{' '.join(words)} {flag}")
            for choice in (action.choices or {}) if action.option_strings else ():
                if str(choice) not in reference:
                    missing.append(f"{' '.join(words)} {choice}")
        sub = cli_reference._subparsers(node)
        for name, child in (sub.choices if sub else {}).items():
            if f"`{' '.join([*words, name])}`" not in reference:
                missing.append(" ".join([*words, name]))
            walk(child, [*words, name])

    walk(parser(), ["course"])
    assert not missing, missing


def test_the_config_reference_has_every_setting() -> None:
    """Every `c.X.y` that nbgrader_config.py sets, and every setting of the course's own
    configurable classes, is in docs/config.md."""
    from traitlets.config import Configurable

    reference = _text(DOCS / "config.md")
    settings = set(re.findall(r"^(c\.\w+\.\w+) =", _text(REPO / "nbgrader_config.py"), re.M))
    for module in (
        "grader.shared.limits",
        "grader.nbgrader.kernels",
        "grader.nbgrader.execute_keeping_points",
        "grader.nbgrader.verify_points",
    ):
        for obj in vars(importlib.import_module(module)).values():
            if isinstance(obj, type) and issubclass(obj, Configurable) and obj.__module__ == module:
                settings |= {
                    f"c.{obj.__name__}.{name}"
                    for name in obj.class_traits(config=True)
                    if name in obj.__dict__
                }
    missing = sorted(s for s in settings if f"`{s}`" not in reference)
    assert len(settings) > 20 and not missing, missing


# ---------------------------------------------------------------- guides, not records


MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
RECORD_WORDS = [
    rf"\b\d{{1,2}} ({MONTHS})[a-z]*\b",  # 28 Nov
    r"\b[Ii]ssues? #?\d+",  # issue 44
    r"\bthis round\b",
    r"\bthe round before\b",
]


def _without_generated_tables(text: str) -> str:
    """benchmarks/full_modes.py's table dates each row: that column is the table's own record."""
    return re.sub(r"<!-- full_modes: begin.*?<!-- full_modes: end -->", "", text, flags=re.S)


@pytest.mark.parametrize("page", GUIDES, ids=[p.name for p in GUIDES])
def test_a_guide_holds_no_date_issue_number_or_round(page) -> None:
    text = _without_generated_tables(_text(page))
    found = [m.group(0) for pattern in RECORD_WORDS for m in re.finditer(pattern, text)]
    assert not found, f"{page.name}: {found} belong in docs/history.md"


# ---------------------------------------------------------------- the tools' own help


def test_make_help_lists_every_target_with_its_comment() -> None:
    makefile = _text(REPO / "Makefile")
    commented = dict(re.findall(r"^([a-z][a-z-]*):.*?## (.+)$", makefile, re.M))
    phony = re.search(r"^\.PHONY: (.+)$", makefile, re.M).group(1).split()
    assert set(phony) <= set(commented), set(phony) - set(commented)
    shown = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    for target, comment in commented.items():
        assert re.search(rf"make {re.escape(target)} +{re.escape(comment)}", shown.stdout), target


def test_the_module_map_tool_prints_its_help_and_writes_nothing() -> None:
    layout = DOCS / "layout.md"
    before = layout.stat().st_mtime_ns, _text(layout)
    for flag in ("--help", "-h"):
        done = subprocess.run(
            [sys.executable, "tools/module_map.py", flag], cwd=REPO, capture_output=True, text=True
        )
        assert done.returncode == 0 and "--check" in done.stdout, done
    wrong = subprocess.run(
        [sys.executable, "tools/module_map.py", "--chek"], cwd=REPO, capture_output=True, text=True
    )
    assert wrong.returncode == 2 and "--help" in wrong.stderr
    assert (layout.stat().st_mtime_ns, _text(layout)) == before


def test_every_word_of_the_glossary_is_linked_from_a_page_that_uses_it() -> None:
    glossary = DOCS / "glossary.md"
    others = "".join(_text(p) for p in PAGES if p != glossary)
    words = anchors(glossary) - {"glossary"}  # the page's own title
    unlinked = [a for a in sorted(words) if f"glossary.md#{a})" not in others]
    assert not unlinked, f"no page links these words to the glossary: {unlinked}"
