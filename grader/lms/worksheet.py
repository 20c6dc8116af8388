"""Moodle's grading worksheet ("View all submissions", Grading action, "Download grading
worksheet"), read in whatever language and time zone it was written.

What Moodle writes (``mod/assign/gradingtable.php``, ``assign_grading_table`` when downloading,
read at moodle/moodle 1494620bfb; ``mod/assign/feedback/offline/locallib.php``
``download_grades``): a column per ``get_string()`` of the teacher's language, in this order:
``recordid`` ("Identifier"), ``fullname``, the identity fields (e.g. "Email address"), ``status``,
[team], [marker], ``grade``, ``maxgrade`` or ``scale``, [workflow state], ``gradecanbechanged``,
``lastmodifiedsubmission`` ("Last modified (submission)"), the online text, ``lastmodifiedgrade``,
the feedback comments. The identifier cell is ``get_string('hiddenuser', 'assign')`` and the
participant id ("Participant 71"); a time is ``userdate()`` with the language's
``strftimedaydatetime`` in the teacher's time zone ("Monday, 5 October 2026, 6:30 PM" in English,
``%A, %d. %B %Y, %H:%M`` in German, ``%A %d %B %Y, %H:%M`` in French, ``%A, %d de %B de %Y,
%I:%M %p`` in Spanish: ``langconfig.php`` of those language packs), or ``-`` when there is none.

Moodle's core repository ships English only; the other headers below are from the language
packs as published in projectestac/moodle-langpacks (``LANG/assign.php``). A worksheet in another
language is still read: the identifier by its cells (a label and a number), the email by its
``@``, and the submission time as the first column whose cells are all Moodle dates (the column
before "Last modified (grade)", which is the order above). Dates with a month name are read in
the languages of :data:`MONTHS`; dates in numbers alone as year, month, day when the year comes
first (the CJK packs) and as day, month, year when it comes last.
"""

from __future__ import annotations

import csv
import io
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from grader.shared.paths import CourseError

# get_string('lastmodifiedsubmission', 'assign'), per language pack
SUBMITTED_HEADERS = {
    "en": "Last modified (submission)",
    "de": "Zuletzt geändert (Abgabe)",
    "fr": "Dernière modification (travail remis)",
    "es": "Última modificación (entrega)",
    "it": "Ultima modifica (consegna)",
    "pt": "Última modificação (envio)",
    "pt_br": "Última atualização (submissão)",
    "nl": "Laatst gewijzigd (inzending)",
    "ca": "Darrera modificació (tramesa)",
    "ru": "Последнее изменение (ответ)",
    "tr": "Son düzenleme (gönderim)",
}

# the month names that strftime's %B writes in those languages (Russian and Polish: genitive)
MONTHS = [
    "january february march april may june july august september october november december",
    "januar februar märz april mai juni juli august september oktober november dezember",
    "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
    "januari februari maart april mei juni juli augustus september oktober november december",
    "gener febrer març abril maig juny juliol agost setembre octubre novembre desembre",
    "января февраля марта апреля мая июня июля августа сентября октября ноября декабря",
    "январь февраль март апрель май июнь июль август сентябрь октябрь ноябрь декабрь",
    "ocak şubat mart nisan mayıs haziran temmuz ağustos eylül ekim kasım aralık",
    "stycznia lutego marca kwietnia maja czerwca lipca sierpnia września października "
    "listopada grudnia",
]


def fold(text: str) -> str:
    """Lower case without accents ('März' -> 'marz')."""
    plain = unicodedata.normalize("NFKD", text)
    return "".join(c for c in plain if not unicodedata.combining(c)).casefold().strip()


MONTH_OF = {fold(name): n + 1 for line in MONTHS for n, name in enumerate(line.split())}
IDENTIFIER = re.compile(r"^\D+?\s*(\d+)$")  # "Participant 71", "Teilnehmer/in 71"


@dataclass
class WorksheetRow:
    """One participant of Moodle's grading worksheet."""

    email: str
    modified: str  # the submission time as Moodle wrote it ('' for none)
    submitted: datetime | None  # that time in UTC (naive, as nbgrader keeps times)


def machine_timezone() -> tzinfo:
    """This machine's time zone (``TZ``, ``/etc/localtime``), or its current UTC offset."""
    name = os.environ.get("TZ", "").lstrip(":")
    link = Path("/etc/localtime")
    if not name and link.is_symlink():
        name = str(link.resolve()).split("zoneinfo/", 1)[-1]
    try:
        return ZoneInfo(name) if name else datetime.now().astimezone().tzinfo
    except (ZoneInfoNotFoundError, ValueError):
        return datetime.now().astimezone().tzinfo or UTC


def find_timezone(name: str | None) -> tzinfo:
    """The time zone ``name`` (e.g. ``Europe/Berlin``), or this machine's when None."""
    if not name:
        return machine_timezone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CourseError(
            f"unknown time zone {name!r}: give the one of your Moodle profile as an IANA name "
            "(e.g. --timezone Europe/Berlin, --timezone America/New_York, --timezone UTC)."
        ) from None


def parse_moodle_date(text: str) -> datetime | None:
    """A time as Moodle's ``userdate()`` writes it in any of the languages above (naive, the
    writer's wall clock); None when it is not one."""
    plain = fold(text)
    clock = re.search(r"(\d{1,2}):(\d{2})", plain)
    year = re.search(r"(?<!\d)(\d{4})(?!\d)", plain)
    if clock is None or year is None:
        return None
    rest = plain[: clock.start()] + " " + plain[clock.end() :]
    before, _, after = rest.partition(year.group(1))
    words = re.findall(r"[^\W\d_]+", before + " " + after)
    month = next((MONTH_OF[w] for w in words if w in MONTH_OF), None)
    numbers = re.findall(r"(?<!\d)\d{1,2}(?!\d)", before + " " + after)
    if month is None and len(numbers) == 2:  # no month name: 2026年 10月 5日, 05.10.2026
        month_first = not re.search(r"\d", before)  # the year first: year, month, day
        month, numbers = (
            (int(numbers[0]), numbers[1:]) if month_first else (int(numbers[1]), numbers[:1])
        )
    if month is None or not numbers:
        return None
    day = numbers[0]
    hour, minute = int(clock.group(1)), int(clock.group(2))
    marker = re.match(r"\s*([ap])\.?\s?m\b\.?", plain[clock.end() :])
    if marker:
        hour = hour % 12 + (12 if marker.group(1) == "p" else 0)
    try:
        return datetime(int(year.group(1)), month, int(day), hour, minute)
    except ValueError:
        return None


def read_worksheet(path: Path, zone: tzinfo | None = None) -> dict[str, WorksheetRow]:
    """Moodle's grading worksheet (CSV), by participant id; its times read in ``zone`` (the
    teacher's time zone; this machine's when None)."""
    if not path.is_file():
        raise CourseError(f"no grading worksheet at {path}")
    rows = read_rows(path)
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    ident = identifier_column(header, body)
    if ident is None:
        raise CourseError(
            f"{path} is not Moodle's grading worksheet (no column of participant identifiers "
            "such as 'Participant 71'): download it from the assignment's 'View all "
            "submissions' page (Grading action, 'Download grading worksheet')."
        )
    when = _submitted_column(header, body)
    if when is None:
        raise CourseError(
            f"{path}: no column of submission times (Moodle's 'Last modified (submission)'): "
            "is the assignment's file submission on, and is it the grading worksheet?"
        )
    email = first_column(body, lambda cell: "@" in cell)
    zone = zone or machine_timezone()
    sheet = {}
    for row in body:
        if len(row) <= max(ident, when):
            continue
        modified = row[when].strip()
        modified = "" if modified == "-" else modified
        local = parse_moodle_date(modified) if modified else None
        utc = local.replace(tzinfo=zone).astimezone(UTC) if local else None
        sheet[IDENTIFIER.match(row[ident].strip()).group(1)] = WorksheetRow(
            row[email].strip() if email is not None and email < len(row) else "",
            modified,
            utc.replace(tzinfo=None) if utc else None,
        )
    return sheet


def read_rows(path: Path) -> list[list[str]]:
    """A CSV's rows, comma, semicolon or tab separated, with or without a byte order mark."""
    text = path.read_text(encoding="utf-8-sig")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    return [row for row in csv.reader(io.StringIO(text, newline=""), dialect) if row]


def first_column(body: list[list[str]], fits: Callable[[str], bool], start: int = 0) -> int | None:
    """The first column from ``start`` whose cells (empty and '-' aside) all fit, one at least."""
    width = max((len(row) for row in body), default=0)
    for index in range(start, width):
        cells = [r[index].strip() for r in body if index < len(r)]
        cells = [c for c in cells if c and c != "-"]
        if cells and all(fits(c) for c in cells):
            return index
    return None


def identifier_column(header: list[str], body: list[list[str]]) -> int | None:
    return first_column(body, lambda cell: IDENTIFIER.match(cell) is not None)


def _submitted_column(header: list[str], body: list[list[str]]) -> int | None:
    """By its header in one of Moodle's languages, else by its place (the first date column)."""
    known = {fold(name) for name in SUBMITTED_HEADERS.values()}
    for index, name in enumerate(header):
        if fold(name) in known:
            return index
    return first_column(body, lambda cell: parse_moodle_date(cell) is not None)
