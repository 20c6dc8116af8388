"""Assignment G quotes its figures from the run it names: each number its text gives for "the
instructor's full run" equals what that run printed (``tools/stages/full_modes/g.json``, written
by ``benchmarks/full_modes.py --only g``), each GPU figure is in the GPU record it stands under,
and the text stays within its length. Fast: reads the notebook and the records, runs nothing."""

from __future__ import annotations

import json
import re
from statistics import mean

import nbformat
import pytest

from tests.conftest import REPO

SOURCE = REPO / "source" / "g_birth_places" / "birth_places.ipynb"
RELEASE = REPO / "release" / "g_birth_places" / "birth_places.ipynb"
STAGES = REPO / "tools" / "stages"
MAX_WORDS = 3_000  # of text a student reads (the other notebooks: 2,300 to 3,200)


def record(name: str) -> dict:
    """A JSON record of tools/stages/."""
    return json.loads((STAGES / name).read_text())


def flat(text: str) -> str:
    """Text on one line, single spaces (the notebook wraps its lines anywhere)."""
    return " ".join(text.split())


def cell(heading: str, notebook=SOURCE) -> str:
    """The markdown cell that holds ``heading``, on one line."""
    nb = nbformat.read(notebook, as_version=4)
    (found,) = (c.source for c in nb.cells if c.cell_type == "markdown" and heading in c.source)
    return flat(found)


def printed(index: int) -> str:
    """What code cell ``index`` printed in the recorded full run."""
    return record("full_modes/g.json")["printed"][str(index)]


def percents(line: str) -> list[str]:
    """The percentages of a printed line, as printed ("43.2")."""
    return re.findall(r"(\d+\.\d)%", line)


def test_the_closing_section_quotes_the_recorded_cpu_run() -> None:
    text = cell("### What this run shows")
    rows = {line[:21].strip(): percents(line) for line in printed(28).splitlines()}
    scratch, long, pretrained = (rows[k] for k in rows if k != "London")
    assert "from scratch {}%, {}% and {}%".format(*scratch) in text
    assert "pretrained {}%, {}% and {}%".format(*pretrained) in text
    assert f"always London {rows['London'][0]}%" in text
    assert f"the model from scratch answered {long[0]}%" in text
    seconds = record("full_modes.json")["g"]["seconds"]
    minutes, rest = divmod(round(seconds), 60)
    assert f"took {minutes} minutes {rest} seconds on a 2-core AMD EPYC" in text
    assert "AVX-512 BF16" in text and "without those instructions" in text
    assert "laptop" not in text


def test_the_float32_run_is_quoted_with_its_machine() -> None:
    """The float32 run (``--floor --beside avx2``): its machine and figures, seed 0 of each setup
    only, having said how long the other runs would take before skipping them."""
    text = cell("### What this run shows")
    run = record("full_modes.json")["g-avx2"]
    assert run["machine"]["limits"].startswith("float32 only, AVX2")
    assert "Held to float32 and AVX2 code" in text and "(AVX2 only)" in text
    rows = record("full_modes/g-avx2.json")["printed"]["28"].splitlines()
    assert [row[:21].strip() for row in rows] == [
        "scratch, 2 epochs",
        "pretrained, 2 epochs",
        "London",
    ]
    scratch, pretrained = (percents(row) for row in rows[:2])
    assert len(scratch) == len(pretrained) == 1, "the float32 run fine-tunes seed 0 only"
    assert f"printed {scratch[0]}% from scratch and {pretrained[0]}% pretrained" in text
    runs = record("full_modes/g-avx2.json")["printed"]["27"].splitlines()
    assert len(runs) == 3 and runs[2].startswith("seeds 1 and 2 and the long scratch run skipped")
    passes = re.search(r"\((\d+) more passes, about \d+ minutes here\)", runs[2]).group(1)
    assert f"the other five runs take {passes} passes over the pairs against the 4" in flat(
        cell("## 5. The experiment")
    )


def test_section_4_names_the_machine_of_its_pretraining_estimate() -> None:
    """Section 4 quotes section 7's estimate of the recorded bfloat16 run, with its machine."""
    text = cell("## 4. The pretrained model")
    hours = re.search(r"about ([\d.]+) hours", printed(39)).group(1)
    assert f"computes in bfloat16 (AVX-512 BF16) it printed {hours} hours" in text
    assert "ten hours" not in text


def test_the_recorded_seed_spread_is_the_recorded_runs() -> None:
    """Section 5 says what seeds 1 and 2 changed in the recorded run that made them."""
    text = cell("## 5. The experiment")
    rows = {line[:21].strip(): percents(line) for line in printed(28).splitlines()}
    pretrained = [float(a) for a in rows["pretrained, 2 epochs"]]
    scratch = [float(a) for a in rows["scratch, 2 epochs"]]
    assert len(pretrained) == 3 and set(scratch) == {0.0}
    spread = round(max(pretrained) - min(pretrained))
    gap = round(min(pretrained) - max(scratch), -1)
    assert f"moved the pretrained model's accuracy by {spread} points" in text
    assert f"against a gap of {gap:.0f} points between the setups" in text


def test_every_row_of_the_gpu_table_is_a_recorded_gpu_run() -> None:
    text = cell("### What this run shows")
    runs = record("g_gpu_runs.json")["runs"]
    rows = re.findall(r"\| ([^|]*) \| (\d+) \| (\d\.\d+) \| ([\d., ]+)% \|", text)
    assert len(rows) >= 4
    for name, passes, loss, accuracies in rows:
        named = re.search(r"width (\d+)", name)
        assert named, f"the row {name!r} does not say the model's width"
        width = int(named.group(1))
        scores = [float(a) for a in accuracies.split(",")]
        match = [
            r for r in runs
            if r["d_model"] == width and round(r["passes_over_wiki"]) == int(passes)
            and r["loss_per_character"] == float(loss)
            and r["dev_accuracy_percent_10_epochs"]["pretrained"] == scores
        ]  # fmt: skip
        assert match, f"the row {name!r} is not in tools/stages/g_gpu_runs.json"
    scores = {r["name"]: r["dev_accuracy_percent_10_epochs"]["pretrained"] for r in runs}
    small = [a for name, run in scores.items() if name.startswith("w128") for a in run]
    assert f"({min(small)} to {max(small)}% against 5.0%)" in text


def test_the_fine_tuning_budgets_are_the_recorded_means() -> None:
    text = cell("### What this run shows")
    by_epochs = record("g_gpu_runs.json")["fine_tuning_epochs"]["dev_accuracy_percent_by_epochs"]
    short, long = (round(mean(by_epochs[e]), 1) for e in ("2", "10"))
    assert f"answers {short}% after 64 steps and {long}% after 320" in text


def test_the_pretraining_time_is_the_checkpoints_own() -> None:
    shipped = printed(23)
    seconds = re.search(r"'seconds': (\d+)", shipped).group(1)
    device = re.search(r"'device': '([^']+)'", shipped).group(1)
    for heading in ("## 4. The pretrained model", "## 7. Optional"):
        text = cell(heading)
        assert f"{seconds} s on one {device}" in text, heading
        assert "333" not in text and "laptop" not in text


def test_section_7_compares_checkpoints_after_the_same_fine_tuning() -> None:
    """Section 7 fine-tunes the student's checkpoint for 64 steps: the figures it compares with
    are 64-step figures of the GPU runs' logs, not the 320-step table."""
    text = cell("## 7. Optional")
    logs = "".join(p.read_text() for p in sorted((STAGES / "gpu").glob("*.log")))
    ours = re.findall(r"\|\s+yours\s+3,000\s+\S+\s+([\d.]+)%", logs)
    theirs = re.findall(r"\|\s+shipped\s+15,000\s+\S+\s+([\d.]+)%", logs)
    assert "answered {} and {}%".format(*ours) in text
    assert "answered {} and {}%".format(*theirs) in text
    assert "320 steps" not in text


def test_the_text_says_how_its_model_and_training_differ_from_mingpt() -> None:
    text = cell("## 4. The pretrained model")
    for difference in ("feed-forward dropout", "(0.9, 0.95)", "every parameter", "linear layers"):
        assert difference in text


def test_the_loss_skips_the_mask_after_the_question_as_the_text_says() -> None:
    from course.g_birth_places.chars import IGNORE, CharVocab, question_rows
    from course.g_birth_places.checks import MASK

    assert "also trains the `MASK` after the question" in cell("## 5. The experiment")
    vocab = CharVocab.build()
    question = "Where was Ada Lovelace born?"
    _, y = question_rows([(question, "London")], vocab, 64)
    assert int(y[0, len(question) - 1]) == IGNORE  # the target after "?" is the first MASK
    trained = y[0][y[0] != IGNORE]
    assert vocab.decode(trained) == "London" + MASK


@pytest.mark.parametrize("notebook", [SOURCE, RELEASE], ids=["source", "release"])
def test_the_text_a_student_reads_is_at_most_3000_words(notebook) -> None:
    solution = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.DOTALL)
    nb = nbformat.read(notebook, as_version=4)
    words = sum(
        len(solution.sub("", c.source).split()) for c in nb.cells if c.cell_type == "markdown"
    )
    assert words <= MAX_WORDS, f"{notebook.relative_to(REPO)}: {words} words of text"


def test_the_forgetting_tool_scores_only_the_birthplace_of_each_line() -> None:
    """tools/g_forgetting.py's stored-facts measure: the loss counts the place's characters of
    the person's own line, read as plain text; a line that does not state it is left out."""
    import g_forgetting

    from course.g_birth_places.chars import IGNORE, CharVocab

    vocab = CharVocab.build()
    wiki = ["Ada Lovelace. Ada Lovelace was born in London in 1815 .", "Bo Li. A painter ."]
    pairs = [("Where was Ada Lovelace born?", "London"), ("Where was Bo Li born?", "Paris")]
    x, y = g_forgetting.place_rows(pairs, wiki, vocab, 64)
    assert x.shape == y.shape == (1, 64)
    read = vocab.decode(x[0]).rstrip(vocab.itos[0])
    assert read == "Ada Lovelace. Ada Lovelace was born in London"
    assert vocab.decode(y[0][y[0] != IGNORE]) == "London"
    with pytest.raises(SystemExit, match="states the answer"):
        g_forgetting.place_rows(pairs[1:], wiki, vocab, 64)


def test_the_forgetting_figures_of_the_docs_are_the_tools_record() -> None:
    docs = flat((REPO / "docs" / "experiments.md").read_text())
    figures = record("g_forgetting.json")["figures"]
    before, after = figures["before fine-tuning"], figures["after 2 epochs (64 steps)"]
    long = figures["after 10 epochs (320 steps)"]
    assert f"is {before['corruption_loss']} and the loss on the birthplaces" in docs
    assert f"plain text, {before['place_loss']}; after 64 steps" in docs
    assert f"are {after['corruption_loss']} and {after['place_loss']}" in docs
    assert f"with {after['dev_accuracy_percent']}% of the development questions" in docs
    assert f"after 320 steps, {long['corruption_loss']} and {long['place_loss']}" in docs
    assert f"with {long['dev_accuracy_percent']}%." in docs
    text = cell("### What this run shows, and what it took")
    assert (
        f"went from {before['place_loss']} before fine-tuning to {after['place_loss']} after 64 "
        f"steps and {long['place_loss']} after 320." in text
    ), "G's closing text quotes the forgetting record (tools/stages/g_forgetting.json)"
