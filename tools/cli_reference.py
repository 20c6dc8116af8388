"""Write docs/cli.md, the reference of every `course` command and option, from the CLI's parser.

    python tools/cli_reference.py          # write docs/cli.md from grader/command/cli.py
    python tools/cli_reference.py --check  # exit 1 if docs/cli.md is not what the parser says

The page is generated, never edited by hand: a sub-command or option added to ``parser()`` in
``grader/command/cli.py`` appears here once this script runs again, and
``tests/test_docs.py`` fails while the page is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generated_page import write_or_check  # tools/, as when the script runs

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "cli.md"
sys.path.insert(0, str(REPO))

HEAD = """\
# The `course` command: every sub-command and option

<!-- written by tools/cli_reference.py from grader/command/cli.py: do not edit by hand -->

Generated from the command's parser (`course autograde --help` prints the same for one
sub-command). It comes with the instructor's install
([tutorial](tutorial-instructor.md#1-install)); how the commands fit together: [term.md](term.md).
"""


def _subparsers(p: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _name(action: argparse.Action) -> str:
    """How the argument is typed: `--jobs N`, `ASSIGNMENT`, `{start,stop,status}`."""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        value = "|".join(str(c) for c in action.choices)
    else:
        value = action.metavar or action.dest.upper()
    if not action.option_strings:
        return value
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return flags
    return f"{flags} {value}"


def _default(action: argparse.Action) -> str:
    """The default as a reader needs it (the machine's cores, not this machine's count)."""
    if action.dest == "jobs":
        return "the number of cores"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    if action.nargs in ("*", "?") and not action.option_strings:
        return ""
    return str(action.default)


# What a positional argument without a help of its own is, by its name in the parser.
POSITIONALS = {
    "assignment": "an assignment, by its folder's name in source/ (`a_masks` ... `h_own_gpt`)",
    "notebook": "the path of a notebook (`.ipynb`)",
    "release_notebook": "a notebook of release/",
    "description": "a demo student's YAML description (`demo/ASSIGNMENT/NAME.yaml`)",
    "out": "the notebook to write",
    "action": "what to do with the kept workers",
}


def _row(action: argparse.Action) -> str:
    words = action.help or POSITIONALS.get(action.dest, "")
    extra = []
    if action.required and action.option_strings:
        extra.append("required")
    if not action.option_strings and action.nargs == "?":
        extra.append("optional")
    if action.nargs in ("*", "+"):
        extra.append("any number")
    default = _default(action)
    if default and "default" not in words:
        extra.append(f"default: {default}")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in words:
        extra.append("repeatable")
    note = f" ({'; '.join(extra)})" if extra else ""
    return f"- `{_name(action)}`: {(words + note).strip()}"


def _section(words: list[str], p: argparse.ArgumentParser, help_: str, depth: int) -> list[str]:
    title = "#" * depth + " `" + " ".join(words) + "`"
    lines = [title, "", help_[:1].upper() + help_[1:] + "." if help_ else "", ""]
    actions = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
    shown = [a for a in actions if not isinstance(a, argparse._SubParsersAction)]
    groups = p._mutually_exclusive_groups
    if shown:
        lines += [_row(a) for a in shown]
        lines.append("")
    for group in groups:
        names = " and ".join(f"`{a.option_strings[0]}`" for a in group._group_actions)
        lines += [f"{names}: one at most.", ""]
    nested = _subparsers(p)
    if nested is not None:
        helps = {c.dest: c.help or "" for c in nested._choices_actions}
        for name, child in nested.choices.items():
            lines += _section([*words, name], child, helps.get(name, ""), depth + 1)
    return lines


def page() -> str:
    """The whole page, from ``grader.command.cli.parser()``."""
    from grader.command.cli import parser

    top = parser()
    sub = _subparsers(top)
    assert sub is not None
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    lines = [HEAD, "## Options of every sub-command", ""]
    lines += [
        _row(a)
        for a in top._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]
    lines += ["", "Sub-commands: " + ", ".join(f"`{n}`" for n in sub.choices) + ".", ""]
    for name, child in sub.choices.items():
        lines += _section(["course", name], child, helps.get(name, ""), 2)
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """Write the page, or with --check say whether it is current."""
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    return write_or_check(
        PAGE,
        page(),
        "--check" in argv,
        "docs/cli.md is stale: run python tools/cli_reference.py",
        f"wrote {PAGE.relative_to(REPO)}",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
