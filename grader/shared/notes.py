"""The notes file of one ``nbgrader autograde`` run: what the course's preprocessors did (copies
removed, cells stopped, kernels that died, outputs cut, processes ended), written in nbgrader's
process and read by the coordinator for the report (``--Notes.path``,
:mod:`grader.coordinator.nbgrader_run`)."""

from __future__ import annotations

import json
from pathlib import Path

from traitlets import Unicode
from traitlets.config import Configurable

# The kinds of notes, in the report's order
KINDS = ("removed", "stopped", "died", "cut", "processes")


class Notes(Configurable):
    """The notes file of one ``nbgrader autograde`` run: JSON, kind -> notes in the order made."""

    path = Unicode("", help="Where the course's preprocessors write their notes ('': none).").tag(
        config=True
    )

    def add(self, kind: str, note: str) -> None:
        """Append ``note`` under ``kind`` (one of :data:`KINDS`)."""
        if not self.path:
            return
        file = Path(self.path)
        notes = json.loads(file.read_text()) if file.is_file() else {}
        notes.setdefault(kind, []).append(note)
        file.write_text(json.dumps(notes))


def read_notes(path: Path) -> list[str]:
    """The notes at ``path`` for the report: the removed copies (each once), then the cells stopped,
    the kernels that died, the outputs cut and the processes ended (empty without a file)."""
    notes = json.loads(path.read_text()) if path.is_file() else {}
    removed = list(dict.fromkeys(notes.get("removed", [])))
    return removed + [n for kind in KINDS[1:] for n in notes.get(kind, [])]


def stopped_notebooks(path: Path) -> set[str]:
    """The notebooks (names) in which a cell ran away and its kernel was stopped."""
    notes = json.loads(path.read_text()) if path.is_file() else {}
    return set(notes.get("stopped_in", []))
