"""Submissions that look alike: winnowing over the solution cells' Python tokens.

The detector is the one MOSS uses, winnowing (Schleimer, Wilkinson and Aiken, "Winnowing: local
algorithms for document fingerprinting", SIGMOD 2003): every run of :data:`K` consecutive tokens is
hashed, and in every window of :data:`WINDOW` consecutive hashes the smallest is kept as a
fingerprint. Two submissions that share a passage of at least ``K + WINDOW - 1`` tokens are
guaranteed to share a fingerprint; passages shorter than ``K`` tokens are never matched.

Why our own and not ``copydetect`` (which implements the same algorithm, and installs from PyPI): it
tokenises with Pygments and compares every pair of files, N^2 / 2 comparisons (125,000 for a class
of 500); here Python's own tokenizer reads the cells (a cell that does not tokenize is read word by
word), and an index from fingerprint to submissions compares only the pairs that share one. Sixty
lines, no dependency.

Tokens (:func:`tokens`): comments, blank lines and indentation are left out; every name the student
chose (a variable, a function, an argument) becomes ``V``, every number ``N`` and every string
``S``, so that renaming, re-commenting and reformatting change nothing; keywords, operators,
builtins, the libraries' names (``torch``, ``nn``...) and attributes after a dot (``.tril``,
``.masked_fill``) are kept, so that two solutions calling different functions differ. What the
release gives is left out before (:func:`grader.report.class_report` keeps the solution cells
only and drops the lines of their stubs). A passage of the instructor's own solution counts for no
pair (short exercises have an idiomatic answer, which honest students find too), nor does a
fingerprint found in more than :func:`common_limit` submissions: a passage many students write
alike.

A pair is listed when the tokens of its shared passages cover at least ``threshold`` of the smaller
of the two submissions: a pair to look at, never a verdict.

The published solution (:func:`near_published`): the course is open, its ``source/`` public, so a
submission may be the instructor's solution in disguise, which the pairs never show. Exercise by
exercise, the share of a student's tokens in passages of the instructor's solution is measured;
it is marked where it reaches :data:`PUBLISHED_SHARE`, on exercises whose solution has at least
:data:`PUBLISHED_TOKENS` tokens (shorter ones have an idiomatic answer that honest students write
too). Both were measured (``benchmarks/published_solution.py``): independent correct answers of
the demo class and written for it stay well under the share, copies with renamed variables and
comments reach it. A mark is a pointer for review, never a verdict.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import keyword
import re
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field

K = 12  # tokens in a hashed run: the noise threshold
WINDOW = 8  # hashes in a window: shared runs of K + WINDOW - 1 = 19 tokens are always found
THRESHOLD = 0.3  # the share of the smaller submission's tokens in shared passages
PUBLISHED_SHARE = 0.6  # a student's tokens in passages of the published solution: marked
PUBLISHED_TOKENS = 80  # an exercise's solution shorter than this: never marked (idiomatic)
KEPT_NAMES = (
    set(keyword.kwlist)
    | set(dir(builtins))
    | {"torch", "nn", "F", "math", "np", "numpy", "self", "super", "functional"}
)
WORD = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?|\S")


@dataclass
class Token:
    """One normalised token and the line (of the submission's solution text) it stands on."""

    text: str
    line: int


@dataclass
class Pair:
    """Two submissions that share passages: the share of each one's tokens in them, and the lines of
    each that they cover (line numbers of :attr:`Submission.lines`, from 0)."""

    a: str
    b: str
    share_a: float
    share_b: float
    lines_a: set[int] = field(default_factory=set)
    lines_b: set[int] = field(default_factory=set)

    @property
    def score(self) -> float:
        """The larger share: how much of the smaller submission is found in the other."""
        return max(self.share_a, self.share_b)


@dataclass
class Submission:
    """One student's solution text, its tokens and its fingerprints (hash -> token positions)."""

    student: str
    lines: list[str]
    tokens: list[Token]
    fingerprints: dict[int, list[int]]


def tokens(code: str) -> list[Token]:
    """The normalised tokens of ``code`` (see the module's text), with their lines (from 0)."""
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _words(code)
    found, after_dot = [], False
    for tok in raw:
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING):  # fmt: skip
            continue
        found.append(Token(_normal(tok.type, tok.string, after_dot), tok.start[0] - 1))
        after_dot = tok.string == "."
    return found


def _normal(kind: int, text: str, after_dot: bool) -> str:
    if kind == tokenize.NAME:
        return text if after_dot or text in KEPT_NAMES else "V"
    if kind == tokenize.NUMBER:
        return "N"
    if kind == tokenize.STRING or kind == getattr(tokenize, "FSTRING_START", -1):
        return "S"
    return text


def _words(code: str) -> list[Token]:
    """Tokens of code that Python cannot tokenize (an unfinished cell): word by word."""
    found = []
    for number, line in enumerate(code.splitlines()):
        for word in WORD.findall(line.split("#", 1)[0]):
            kind = tokenize.NAME if word[0].isalpha() or word[0] == "_" else tokenize.OP
            kind = tokenize.NUMBER if word[0].isdigit() else kind
            found.append(Token(_normal(kind, word, False), number))
    return found


def fingerprints(found: list[Token]) -> dict[int, list[int]]:
    """Winnowing: the smallest hash of every window of WINDOW K-gram hashes (rightmost on a tie), by
    hash, with the positions of the K-grams that have it."""
    hashes = [_hash(found[i : i + K]) for i in range(len(found) - K + 1)]
    if not hashes:
        return {}
    chosen: dict[int, list[int]] = defaultdict(list)
    last = -1
    for start in range(max(1, len(hashes) - WINDOW + 1)):
        window = hashes[start : start + WINDOW]
        low = min(window)
        position = start + len(window) - 1 - window[::-1].index(low)
        if position != last:
            chosen[low].append(position)
            last = position
    return dict(chosen)


def _hash(gram: list[Token]) -> int:
    text = "\x1f".join(t.text for t in gram).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def submission(student: str, code: str) -> Submission:
    """One student's solution text, tokenised and fingerprinted."""
    found = tokens(code)
    return Submission(student, code.splitlines(), found, fingerprints(found))


def common_limit(count: int) -> int:
    """A fingerprint in more submissions than this is common writing, not a shared passage."""
    return max(3, count // 20)


def alike(
    subs: list[Submission], threshold: float = THRESHOLD, given: Submission | None = None
) -> list[Pair]:
    """The pairs whose shared passages cover at least ``threshold`` of the smaller one, the most
    alike first. A passage of ``given`` (the instructor's own solution) counts for none."""
    index: dict[int, list[int]] = defaultdict(list)  # hash -> submissions that have it
    for number, sub in enumerate(subs):
        for value in sub.fingerprints:
            index[value].append(number)
    for value in given.fingerprints if given is not None else ():
        index.pop(value, None)
    limit = common_limit(len(subs))
    shared: dict[tuple[int, int], set[int]] = defaultdict(set)
    for value, holders in index.items():
        if 2 <= len(holders) <= limit:
            for i, a in enumerate(holders):
                for b in holders[i + 1 :]:
                    shared[(a, b)].add(value)
    pairs = [_pair(subs[a], subs[b], values) for (a, b), values in shared.items()]
    kept = [p for p in pairs if p.score >= threshold]
    return sorted(kept, key=lambda p: (-p.score, p.a, p.b))


def _pair(a: Submission, b: Submission, values: set[int]) -> Pair:
    covered_a = _covered(a, values)
    covered_b = _covered(b, values)
    return Pair(
        a.student,
        b.student,
        len(covered_a) / max(1, len(a.tokens)),
        len(covered_b) / max(1, len(b.tokens)),
        {a.tokens[i].line for i in covered_a},
        {b.tokens[i].line for i in covered_b},
    )


def _covered(sub: Submission, values: set[int]) -> set[int]:
    """The positions of the tokens in the K-grams of ``sub`` fingerprinted by ``values``."""
    positions = set()
    for value in values:
        for start in sub.fingerprints.get(value, ()):
            positions.update(range(start, start + K))
    return positions


@dataclass
class NearSolution:
    """A student's code for one exercise and the share of its tokens found in the published
    solution's passages."""

    student: str
    exercise: str
    share: float
    tokens: int


def own_tokens(cells: list[tuple[str, set[str]]]) -> list[Token]:
    """The tokens of each (cell's code, the stripped lines of its stub), those on the stub's
    lines left out: the whole cell is read, so its layout stays Python's."""
    found = []
    for code, stub in cells:
        lines = code.splitlines()
        found += [
            t for t in tokens(code) if t.line >= len(lines) or lines[t.line].strip() not in stub
        ]
    return found


def published_share(mine: list[Token], solution: list[Token]) -> float:
    """The share of the tokens ``mine`` in passages they share with ``solution``."""
    a = Submission("", [], mine, fingerprints(mine))
    shared = set(a.fingerprints) & set(fingerprints(solution))
    return len(_covered(a, shared)) / max(1, len(mine))


def near_published(
    code: dict[str, dict[str, list[Token]]],
    solutions: dict[str, list[Token]],
    share: float = PUBLISHED_SHARE,
    least: int = PUBLISHED_TOKENS,
) -> list[NearSolution]:
    """The (student, exercise) whose tokens (``code``: student -> exercise -> the tokens the
    student wrote, :func:`own_tokens`) lie at least ``share`` in passages of the exercise's
    published solution (``solutions``), on exercises whose solution has at least ``least``
    tokens and where the student wrote at least half as many; the closest first."""
    found = []
    for exercise, solution in solutions.items():
        if len(solution) < least:
            continue
        for student, written in code.items():
            mine = written.get(exercise, [])
            near = published_share(mine, solution) if mine else 0.0
            if len(mine) * 2 >= len(solution) and near >= share:
                found.append(NearSolution(student, exercise, near, len(mine)))
    return sorted(found, key=lambda n: (-n.share, n.exercise, n.student))
