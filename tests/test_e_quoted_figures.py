"""E's text quotes the figures of "the CPU run", the instructor's run of the notebook in full mode
by ``benchmarks/full_modes.py``; each quoted figure must equal what that run printed
(``tools/stages/full_modes/e.json``), its time and machine those that the benchmark recorded
beside it (``tools/stages/full_modes.json``). Re-run ``python benchmarks/full_modes.py --only e``
after changing E's code, then update the text from the new record. Also: E's text stays within
its word budget and names its machine, not "a laptop". Fast: reads files, runs nothing."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from course.e_pretraining import checkpoint, similarity
from tests.conftest import REPO
from tools import pretrain_review_lm as pretrain

NOTEBOOK = REPO / "source" / "e_pretraining" / "pretraining_and_finetuning.ipynb"
RECORD = json.loads((REPO / "tools" / "stages" / "full_modes" / "e.json").read_text())
RESULT = json.loads((REPO / "tools" / "stages" / "full_modes.json").read_text())["e"]
SOLUTION = re.compile(r"### BEGIN SOLUTION.*?(### END SOLUTION|\Z)", re.DOTALL)
WORDS_AT_MOST = 4500  # E's text (what a student reads, model answers left out)


def cells() -> list[nbformat.NotebookNode]:
    return nbformat.read(NOTEBOOK, as_version=4).cells


def text(marker: str) -> str:
    """The text of the one markdown cell that holds ``marker`` (a phrase, or a written answer's
    grade id), its whitespace made single spaces."""
    found = [
        c.source
        for c in cells()
        if c.cell_type == "markdown"
        and (marker in c.source or c.metadata.get("nbgrader", {}).get("grade_id") == marker)
    ]
    assert len(found) == 1, f"{len(found)} markdown cells of E hold {marker!r}"
    return " ".join(found[0].split())  # line breaks read as spaces


def printed(marker: str) -> str:
    """What the code cell that printed ``marker`` printed in the CPU run."""
    found = [out for out in RECORD["printed"].values() if marker in out]
    assert len(found) == 1, f"{len(found)} cells of the CPU run printed {marker!r}"
    return found[0]


def kv_timings() -> dict[int, tuple[str, str, str]]:
    """{tokens: (seconds without, seconds with, times faster)} as the CPU run printed them."""
    pattern = r"(\d+) tokens: ([\d.]+) s without the cache, ([\d.]+) s with it \(([\d.]+) times"
    return {int(n): (a, b, r) for n, a, b, r in re.findall(pattern, printed("times faster"))}


def test_the_kv_cache_timings_are_the_cpu_runs() -> None:
    timings = kv_timings()
    assert {10, 100, 500} <= set(timings)
    for where in ("**What the figure shows.**", "q_kv_cache"):
        quoted = text(where)
        without, with_cache, ratio = timings[500]
        assert f"{without} s" in quoted and f"{with_cache} s" in quoted, where
        for n in (10, 100, 500):
            assert f"{timings[n][2]} times" in quoted or f"{timings[n][2]} at {n}" in quoted, (
                f"{where}: the speed-up at {n} tokens, {timings[n][2]}, is not quoted"
            )


def test_the_main_table_is_the_cpu_runs() -> None:
    table = printed("epoch 2      best epoch")
    answer = text("q_curves")
    for setup in ("scratch", "pretrained", "frozen"):
        (row,) = [line for line in table.splitlines() if line.startswith(setup)]
        means = re.findall(r"([\d.]+) ±", row)
        assert f"{setup} {' / '.join(means)}" in answer, f"Q2's model answer: {setup} {means}"


def test_the_frozen_readings_are_the_cpu_runs() -> None:
    gains = re.findall(
        r"^(frozen, [^:]+): best accuracy minus the last-token reading's, per seed: (.*) points$",
        printed("best accuracy minus the last-token reading's"),
        flags=re.MULTILINE,
    )
    assert len(gains) == 2
    shown = text("**What the experiment shows.**")
    for name, values in gains:
        assert values in shown, f"the gains of {name!r}, {values}, are not quoted"


def test_the_label_count_table_is_the_cpu_runs() -> None:
    shown = text("**What the two experiments printed.**")
    rows = re.findall(r"^ *(\d+) labels: +(\S+) +(\S+) +(\S+) ", printed("word order:"), re.M)
    assert len(rows) == 13  # sentiment: 3 comparisons x 3 label counts; word order: 2 x 2
    for labels, *values in rows:
        assert ", ".join(values) in shown, f"{labels} labels: {values} not in the table"


def test_the_similarities_are_the_cpu_runs() -> None:
    """Q3's model answer quotes the input embeddings' mean cosines: those the CPU run printed,
    and the adjective controls, which the measurement (deterministic) gives on the shipped model
    as the notebook's cell prints them."""
    given = pretrain.given_lm()
    lm, tokenizer, _ = checkpoint.load_pretrained(given.TransformerLM)
    table = similarity.format_table(similarity.measure(lm, tokenizer, given.causal_mask))
    (row,) = [line for line in table.splitlines() if line.startswith("input embedding")]
    means = re.findall(r"(-?[\d.]+) \(", row)
    assert len(means) == len(similarity.GROUPS) == 4
    (recorded,) = [
        line for line in printed("same polarity").splitlines() if "input embedding" in line
    ]
    assert re.findall(r"(-?[\d.]+) \(", recorded) == means[: len(re.findall(r" \(", recorded))]
    answer = text("q_two_tasks")
    for mean in means:
        assert mean in answer, f"Q3's model answer does not quote the input embeddings' {mean}"


def test_the_time_is_quoted_with_its_machine() -> None:
    """The run's minutes and cores; its matmul GFLOP/s too where the benchmark recorded the
    machine (a record made before it did has no "machine")."""
    quoted = text("**The figures this notebook quotes**")
    minutes = round(RESULT["seconds"] / 60)
    box = RECORD.get("machine")
    cores = box["cores"] if box else 2  # the records without a machine: the 2-core machine
    assert f"about {minutes} minutes on a {cores}-core" in quoted
    if box:
        assert box == RESULT["machine"]
        assert f"{box['float32_gflops']:.0f} GFLOP/s" in quoted


def test_no_laptop_and_within_the_word_budget() -> None:
    shown = [SOLUTION.sub("", c.source) for c in cells() if c.cell_type == "markdown"]
    words = sum(len(re.sub(r"<!--.*?-->", "", s, flags=re.DOTALL).split()) for s in shown)
    assert words <= WORDS_AT_MOST, f"E's text has {words} words, more than {WORDS_AT_MOST}"
    everything = "\n".join(c.source for c in cells())
    assert "laptop" not in everything.lower()


@pytest.mark.parametrize("phrase", ["h100_run", "tools/stages/", "run 7", "docs/"])
def test_the_text_names_no_record_a_student_lacks(phrase: str) -> None:
    """Where a figure comes from is told in docs/experiments.md, for the instructor: the
    student part ships neither the docs nor the records, so the text names neither."""
    shown = "\n".join(c.source for c in cells() if c.cell_type == "markdown")
    assert phrase not in shown
