"""The class roster (the gradebook's students, as ``nbgrader db student import`` wrote them)
and how an LMS's student is found in it."""

from __future__ import annotations

import re
import unicodedata
import warnings
from dataclasses import dataclass

from nbgrader.api import Gradebook


@dataclass
class Person:
    """A student of the roster."""

    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""


def read_roster(url: str) -> list[Person]:
    """The students of the gradebook at ``url``."""
    with warnings.catch_warnings(), Gradebook(url) as gb:
        warnings.simplefilter("ignore")
        return [
            Person(s.id, s.first_name or "", s.last_name or "", s.email or "", s.lms_user_id or "")
            for s in gb.students
        ]


def squeeze(text: str) -> str:
    """A name reduced to lower-case letters and digits (as Canvas writes ``lastfirst``)."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", plain.lower())


def find(roster: list[Person], lms_id: str, name: str, email: str = "") -> Person | None:
    """The roster's student for an LMS id, name ('lastfirst' or 'First Last') or email."""
    for person in roster:
        if person.lms_user_id and person.lms_user_id == lms_id:
            return person
    if email:
        for person in roster:
            if person.email and person.email.lower() == email.lower():
                return person
    wanted = squeeze(name)
    matches = [
        p
        for p in roster
        if wanted
        and wanted in (squeeze(p.last_name + p.first_name), squeeze(p.first_name + p.last_name))
    ]
    return matches[0] if len(matches) == 1 else None
