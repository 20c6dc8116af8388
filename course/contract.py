"""The verification contract: what the grader, the student's kernel and the judge say to each
other, in one place (standard library only; the three import it and nothing else of each other).

Three processes take part in the trusted verification of a graded notebook:

- the grader (``grader/``, outside the sandbox) runs the notebook and then asks the kernel to
  observe (:func:`observe_code`);
- the kernel (``course/verify.py``, inside the sandbox) writes the observations next to the
  notebook (:func:`observations_path`) and, item by item, a log (:func:`log_path`, lines made
  by :func:`log_line`, read back by :func:`read_log`); an item whose call raised is saved as an
  error observation (:func:`error_observation`);
- the judge (``python -m judge``, outside the sandbox) answers one request line per notebook
  (:func:`request_line` / :func:`read_request`) with one reply line (:func:`verdicts_line` or
  :func:`refused_line` / :func:`read_reply`).
"""

from __future__ import annotations

import json
import os

OBSERVATIONS_SUFFIX = ".observations.pt"  # NOTEBOOK.observations.pt beside the graded notebook
LOG_SUFFIX = ".log"  # the kernel's log: the observations' path + LOG_SUFFIX
ERROR_CHARS = 500  # an error observation's message, at most
MESSAGE_CHARS = 2000  # a failed check's message in the judge's reply, at most
# The mistake keys of failures that no check of the course named: the student's code raised,
# a plain assertion, observations of the wrong kind.
RAISED, UNNAMED, BROKEN = "raised", "unnamed", "broken"
# The start of the mistake key of a check that decides from random draws (frequencies against a
# distribution): its failure is evidence, not proof, so a kernel that passed it and a judge that
# failed it disagree on chance, not on the code, and the grader asks for a review instead of
# flagging the notebook.
STATISTICAL = "statistical:"
# The start of the mistake key of a failure on the grader's cases only: the code passes, in the
# judge too, the cases of the notebook's own hidden test, which the kernel's check passed, so the
# two disagree by their cases (a rounding or a bug those cases miss), not by a changed test, and
# the grader asks for a review with the numbers (H's sampler).
CASES_DIFFER = "cases differ:"
REVIEW_KEYS = (STATISTICAL, CASES_DIFFER)  # the keys of failures that ask for a review
LOG_EVENTS = ("start", "error", "interrupted")  # what a log line says of an item


# ----------------------------------------------------------------------------- file names
def observations_path(folder: str | os.PathLike, notebook: str) -> str:
    """Where the kernel writes the observations of ``notebook`` (in the graded folder)."""
    return os.path.join(os.fspath(folder), f"{notebook}{OBSERVATIONS_SUFFIX}")


def log_path(observations: str | os.PathLike) -> str:
    """The kernel's log of the observations at ``observations``."""
    return f"{os.fspath(observations)}{LOG_SUFFIX}"


# ----------------------------------------------------------------------------- the log
def log_line(event: str, item: str) -> str:
    """One line of the log: ``event`` (one of :data:`LOG_EVENTS`) of the item ``item``."""
    if event not in LOG_EVENTS:
        raise ValueError(f"unknown log event {event!r}")
    return f"{event} {item}\n"


def read_log(lines: list[str]) -> tuple[list[str], set[str], str | None]:
    """The items started (in order), those interrupted, and the item the log ends on when it
    ends on a start (the kernel died in it), from the log's lines."""
    started, interrupted, last = [], set(), None
    for line in lines:
        event, _, item = line.strip().partition(" ")
        if event == "start":
            started.append(item)
        elif event == "interrupted":
            interrupted.add(item)
        last = item if event == "start" else None
    return started, interrupted, last


# ----------------------------------------------------------------------------- observations
def error_observation(message: str) -> dict[str, str]:
    """The observation of an item whose call raised (or was not made): its message."""
    return {"error": str(message)[:ERROR_CHARS]}


def is_error(observed: object) -> bool:
    """Whether ``observed`` is an error observation."""
    return isinstance(observed, dict) and set(observed) == {"error"}


# ----------------------------------------------------------------------------- grader -> kernel
def observe_code(assignment: str, seed: int, path: str, failed: dict[str, str]) -> str:
    """The code the grader runs in the kernel after the notebook's last cell."""
    return (
        "import course.verify as _course_verify\n"
        f"_course_verify.observe({assignment!r}, {int(seed)}, {str(path)!r}, "
        f"failed={dict(failed)!r})"
    )


def stop_runaways_code() -> str:
    """The code the grader runs in the kernel after a cell was interrupted at its time limit."""
    return "import course.verify as _course_verify\n_course_verify.stop_runaways()"


# ----------------------------------------------------------------------------- grader <-> judge
def request_line(assignment: str, seed: int, path: str) -> str:
    """The grader's request to the judge for the observations at ``path``."""
    return json.dumps({"assignment": assignment, "seed": int(seed), "path": str(path)}) + "\n"


def read_request(line: str) -> tuple[str, int, str]:
    """A request line read back: assignment, seed, path."""
    request = json.loads(line)
    return str(request["assignment"]), int(request["seed"]), str(request["path"])


def verdicts_line(
    verdicts: dict[str, str | None], mistakes: dict[str, dict[str, str]] | None = None
) -> str:
    """The judge's reply: one verdict per test cell (None: passes, else why it fails), and
    for each failed cell the mistake named (``{"key": ..., "message": ...}``)."""
    return json.dumps({"verdicts": verdicts, "mistakes": mistakes or {}}) + "\n"


def refused_line(reason: str) -> str:
    """The judge's reply when the observations cannot be read safely."""
    return json.dumps({"refused": reason}) + "\n"


def read_reply(line: str) -> tuple[dict[str, str | None], str]:
    """A reply line read back: the verdicts, and the refusal ('' when none)."""
    reply = json.loads(line)
    if "refused" in reply:
        return {}, str(reply["refused"])
    return dict(reply["verdicts"]), ""


def read_mistakes(line: str) -> dict[str, dict[str, str]]:
    """The mistakes of a reply line (empty when refused, or from a judge that named none)."""
    return dict(json.loads(line).get("mistakes") or {})
