"""The figures that F's and H's texts quote from the instructor's full run are that run's.

``benchmarks/full_modes.py`` runs each source notebook in full mode and records what every cell
printed in ``tools/stages/full_modes/LETTER.json``. The texts that say "the instructor's full run"
(H's closing cell and its question 5's model answer; F's cell after the recall run) must quote
those printouts, and no other figure of the same kind: a figure kept from an older run, or from
another machine, fails here. The record's cells are found by what they print (not by their
index), so a cell moved in the notebook keeps its figures. Fast: reads files, runs nothing.
"""

from __future__ import annotations

import json
import math
import re

import nbformat
import pytest

from tests.conftest import REPO

RECORDS = REPO / "tools" / "stages" / "full_modes"


def printed(letter: str, pattern: str) -> re.Match:
    """The one match of ``pattern`` in what the recorded run of notebook ``letter`` printed."""
    record = json.loads((RECORDS / f"{letter}.json").read_text())
    found = [m for text in record["printed"].values() for m in re.finditer(pattern, text, re.M)]
    assert len(found) == 1, f"{letter}.json: {len(found)} printouts match {pattern!r}"
    return found[0]


def cell(assignment: str, starts: str) -> str:
    """The source of the one cell of ``source/<assignment>`` whose text starts with ``starts``
    (a heading, or a solution's ``### BEGIN SOLUTION`` followed by the grade id's answer)."""
    (path,) = (REPO / "source" / assignment).glob("*.ipynb")
    cells = nbformat.read(path, as_version=4).cells
    found = [c.source for c in cells if c.source.startswith(starts)]
    assert len(found) == 1, f"{path.name}: {len(found)} cells start with {starts!r}"
    return found[0]


def answer(assignment: str, grade_id: str) -> str:
    """The model answer of the written question ``grade_id``."""
    (path,) = (REPO / "source" / assignment).glob("*.ipynb")
    cells = nbformat.read(path, as_version=4).cells
    (found,) = (
        c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )
    return found


def h_run() -> dict:
    """H's recorded full run: each model's loss, perplexity and speed, the tokens per character
    of the validation stream, the vocabulary, D's feed-forward width, the GPT's parameters."""
    rows = {}
    for name in ("your GPT", "D's model"):
        row = printed("h", rf"^{re.escape(name)}\s+([\d,]+)\s+(\d\.\d+)\s+([\d.]+)\s+([\d,]+)$")
        rows[name] = {
            "parameters": int(row[1].replace(",", "")),
            "loss": float(row[2]),
            "perplexity": row[3],
            "tokens_per_s": row[4],
        }
    stream = printed("h", r"^V = (\d+) tokens; .*; (\d\.\d+) tokens per character")
    return {
        "models": rows,
        "vocab": stream[1],
        "tokens_per_char": float(stream[2]),
        "d_hid": printed("h", r"feed-forward width of (\d+)")[1],
    }


def per_character(loss: float, tokens_per_char: float) -> str:
    """The perplexity per character, as the texts round it."""
    return f"{math.exp(loss * tokens_per_char):.1f}"


def test_h_closing_cell_quotes_its_own_run() -> None:
    run = h_run()
    text = " ".join(cell("h_own_gpt", "### What this run shows").split())
    gpt, d = run["models"]["your GPT"], run["models"]["D's model"]
    quoted = [
        f"{round(gpt['parameters'] / 1000)} thousand parameters",
        f"V = {run['vocab']}",
        f"{gpt['loss']:.3f} nats per token",
        f"perplexity {gpt['perplexity']} per token",
        f"{per_character(gpt['loss'], run['tokens_per_char'])} per character",
        f"D's model {d['loss']:.3f} ({d['perplexity']} and "
        f"{per_character(d['loss'], run['tokens_per_char'])})",
        f"{gpt['tokens_per_s']} and {d['tokens_per_s']} training tokens per second",
        f"{run['d_hid']} against your GPT's 256",
    ]
    for figure in quoted:
        assert figure in text, f"H's closing cell should quote {figure!r} (h.json)"
    losses = {f"{m['loss']:.3f}" for m in run["models"].values()}
    assert set(re.findall(r"\d\.\d{3}", text)) == losses, "a loss that is not the run's"
    speeds = {m["tokens_per_s"] for m in run["models"].values()} | {"1,000"}  # and the steps
    assert set(re.findall(r"\d{1,3}(?:,\d{3})+", text)) <= speeds, "a count not from the run"


def test_h_question_5_model_answer_converts_the_runs_figures() -> None:
    run = h_run()
    text = " ".join(answer("h_own_gpt", "q_subword_perplexity").split())
    gpt, d = run["models"]["your GPT"], run["models"]["D's model"]
    rate = run["tokens_per_char"]
    quoted = [
        f"{gpt['loss']:.3f} nats per token (perplexity {gpt['perplexity']}) at {rate:.3f} tokens",
        f"e^{{{gpt['loss']:.3f} \\times {rate:.3f}}} = e^{{{gpt['loss'] * rate:.3f}}}",
        f"\\approx {per_character(gpt['loss'], rate)}$ per character",
        f"D's model: {d['perplexity']} per token, {per_character(d['loss'], rate)} per character",
    ]
    for figure in quoted:
        assert figure in text, f"H's question 5 model answer should hold {figure!r} (h.json)"


def test_h_names_the_machine_and_the_load_of_its_run() -> None:
    """The closing cell names the machine h.json records and the load the run began under (the
    benchmark's row of it, tools/stages/full_modes.json), since its speeds hang on both."""
    box = json.loads((RECORDS / "h.json").read_text())["machine"]
    row = json.loads((RECORDS.parent / "full_modes.json").read_text())["h"]
    text = " ".join(cell("h_own_gpt", "### What this run shows").split())
    assert f"{box['processor']} processor with {box['cores']} cores" in text
    assert f"load {row['load'][0]:.0f} when it began" in text


def test_h_quotes_the_seconds_of_its_runs_merges() -> None:
    """Section 8 quotes the reference's seconds for the merges from the recorded run (h.json)."""
    merges = printed("h", r"^[\d,]+ distinct words; (\d+) merges in ([\d.]+) s \(yours\)$")
    assert merges[1] == "300", "section 8 speaks of 300 merges"
    section = " ".join(cell("h_own_gpt", "## 8. Subword tokens").split())
    assert f"{merges[2]} s in the instructor's full run" in section
    assert set(re.findall(r"(\d+(?:\.\d+)?) s in the instructor's", section)) == {merges[2]}


def test_f_recall_figures_are_the_runs() -> None:
    dot = printed("f", r"^dot-product attention .* by seed: (.*)$")[1]
    synthesizer = printed("f", r"^SynthesizerAttention .* by seed: (.*)$")[1]
    chance = printed("f", r"^chance .*?([\d.]+)%$")[1]
    text = " ".join(cell("f_attention_exploration", "### What the run shows").split())
    dot_seeds = [v.strip().rstrip("%") for v in dot.split(",")]
    synth_seeds = [v.strip().rstrip("%") for v in synthesizer.split(",")]
    assert len(set(dot_seeds)) == 1, "the text says one figure for every seed"
    assert f"answered {dot_seeds[0]} % of the held-out sequences on each of the 3 seeds" in text
    assert f"{synth_seeds[0]} %, {synth_seeds[1]} % and {synth_seeds[2]} %" in text
    assert f"({chance} %)" in text
    allowed = {*dot_seeds, *synth_seeds, chance}
    assert set(re.findall(r"(\d+\.\d) %", text)) <= allowed, "a percentage not from the run"


@pytest.mark.parametrize("letter", ["f", "h"])
def test_a_figure_from_another_run_is_caught(letter: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above fail when the text quotes other figures than the record's."""
    real = nbformat.read

    def older(path, *args, **kwargs):  # the figures of an older run put back into the text
        nb = real(path, *args, **kwargs)
        for c in nb.cells:
            c.source = c.source.replace("3.379", "3.381").replace("29.3 ", "29.4 ")
            c.source = c.source.replace("40,510", "31,000").replace("12.4 %", "12.6 %")
        return nb

    monkeypatch.setattr(nbformat, "read", older)
    checks = {
        "f": [test_f_recall_figures_are_the_runs],
        "h": [
            test_h_closing_cell_quotes_its_own_run,
            test_h_question_5_model_answer_converts_the_runs_figures,
        ],
    }[letter]
    for check in checks:
        with pytest.raises(AssertionError):
            check()
