"""Records of the notebook as it is: each record of a notebook's run that a text quotes carries the
code hash of the notebook that wrote it (``tools/record_run.py``'s ``code_hash``: the code cells'
sources but the install and check cells), and that hash is the notebook's as it is now. A record
whose notebook's code has changed since fails here: re-record it with the command its entry of
:data:`RERECORD` gives, then update the figures the text quotes from it.

The records written before the hash existed have none. Each is listed in :data:`UNHASHED` with
why it cannot be re-recorded here; the list may only shrink (an entry whose record now has a hash
fails, so that it is taken out). Fast: reads files, runs nothing.
"""

from __future__ import annotations

import json
import sys

import nbformat
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import record_run  # noqa: E402 - tools/ is not a package

STAGES = REPO / "tools" / "stages"
NOTEBOOKS = {
    "a": "source/a_masks/masks_and_positions.ipynb",
    "b": "source/b_attention/attention_and_layer.ipynb",
    "c": "source/c_params/counting_parameters.ipynb",
    "d": "source/d_language_model/language_model.ipynb",
    "e": "source/e_pretraining/pretraining_and_finetuning.ipynb",
    "f": "source/f_attention_exploration/attention_exploration.ipynb",
    "g": "source/g_birth_places/birth_places.ipynb",
    "h": "source/h_own_gpt/own_gpt.ipynb",
}
# Each record of a notebook's run, relative to tools/stages/, and the command that writes it again.
RERECORD = {
    **{
        f"full_modes/{name}.json": f"python benchmarks/full_modes.py --only {name[0]}"
        + (f" --beside {name[2:]}" if "-" in name else "")
        for name in ("a", "b", "c", "d", "e", "f", "g", "h", "e-avx512", "g-avx2")
    },
    "b_full_run.json": "python tools/record_run.py " + NOTEBOOKS["b"]
    + " --out tools/stages/b_full_run.json",
    "b_fast_run.json": "python tools/record_run.py " + NOTEBOOKS["b"]
    + " --fast --out tools/stages/b_fast_run.json",
    "d_full_run.json": "python tools/record_run.py " + NOTEBOOKS["d"]
    + " --timeout 3600 --out tools/stages/d_full_run.json",
    "g_full_run.json": "python tools/record_run.py " + NOTEBOOKS["g"]
    + " --timeout 3600 --out tools/stages/g_full_run.json",
}  # fmt: skip

_BEFORE = (
    "written before records carried a code hash (issue 78); not re-recorded with it, since the "
    "change that added the hash ran no notebook in full mode (its machine had 2 shared cores)"
)
# Records without a hash, each with why it was not re-recorded (RERECORD gives the command).
UNHASHED = {
    "full_modes/e-avx512.json": "an earlier version of E on another machine, kept for its time "
    "only (E's text quotes its minutes, none of its figures); needs an AVX-512 BF16 machine",
    "b_full_run.json": _BEFORE + " (B's residual question quotes its gradient ratio)",
    "d_full_run.json": _BEFORE + " (about an hour on a busy 2-core machine)",
    "g_full_run.json": _BEFORE + " (about 40 minutes)",
}


def notebook_of(name: str, record: dict) -> str:
    """The notebook that wrote the record ``name``: the one it names, else the one its name or
    its command gives."""
    if "notebook" in record:
        return record["notebook"]
    if name.startswith("full_modes/"):
        return NOTEBOOKS[name.removeprefix("full_modes/")[0]]
    return NOTEBOOKS[name[0]]


@pytest.mark.parametrize("name", sorted(RERECORD))
def test_each_record_was_written_by_the_notebook_as_it_is(name: str) -> None:
    record = json.loads((STAGES / name).read_text())
    if "code_hash" not in record:
        assert name in UNHASHED, (
            f"tools/stages/{name} has no code hash: re-record it ({RERECORD[name]})"
        )
        return
    assert name not in UNHASHED, f"tools/stages/{name} has a hash now: take it out of UNHASHED"
    notebook = notebook_of(name, record)
    now = record_run.code_hash(nbformat.read(REPO / notebook, as_version=4))
    assert record["code_hash"] == now, (
        f"tools/stages/{name} was written by another version of {notebook}'s code: re-record it "
        f"({RERECORD[name]}) and update the figures its text quotes"
    )
    assert record.get("machine"), f"tools/stages/{name} does not name its machine"


def test_every_record_of_a_run_is_listed() -> None:
    runs = {p.relative_to(STAGES).as_posix() for p in STAGES.glob("full_modes/*.json")}
    runs |= {p.name for p in STAGES.glob("*_run.json")}
    assert runs == set(RERECORD), "a record of a notebook's run is not in RERECORD"
    assert set(UNHASHED) <= set(RERECORD)


def test_the_hash_leaves_out_the_install_and_check_cells_only() -> None:
    nb = nbformat.read(REPO / NOTEBOOKS["a"], as_version=4)
    first, last = nb.cells[0], nb.cells[-1]
    assert (first.get("id"), last.get("id")) == ("colab-install", "check-notebook")
    before = record_run.code_hash(nb)
    first.source += "\n# another install address"
    last.source += "\n# another check"
    assert record_run.code_hash(nb) == before
    markdown = next(c for c in nb.cells if c.cell_type == "markdown")
    markdown.source += " More text."
    assert record_run.code_hash(nb) == before
    code = next(c for c in nb.cells[1:-1] if c.cell_type == "code")
    code.source += "\n# a comment"
    assert record_run.code_hash(nb) != before
