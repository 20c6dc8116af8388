"""Tests for course.data: the offline loaders and the word tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import pytest
import torch

from course.data import WordTokenizer, corpora, load_polarity, load_tiny_shakespeare
from course.data.corpora import _polarity_sentences

SPLITS = ("train", "validation", "test")
PACKAGE_DATA = Path(corpora.__file__).parent


@pytest.fixture(scope="module")
def shakespeare() -> datasets.DatasetDict:
    return load_tiny_shakespeare()


@pytest.fixture(scope="module")
def polarity() -> datasets.DatasetDict:
    return load_polarity(seed=0)


def rows(dataset: datasets.Dataset) -> Counter:
    """Multiset of (text, label) rows of a polarity split."""
    return Counter(zip(dataset["text"], dataset["label"], strict=True))


# -- Tiny Shakespeare -----------------------------------------------------------------------


def test_offline_mode_is_on(shakespeare: datasets.DatasetDict) -> None:
    # This module imports datasets before course.data, the harder case: a loader's first use
    # (the fixture) turns offline mode on.
    assert datasets.config.HF_HUB_OFFLINE


def test_importing_the_data_package_leaves_datasets_unimported() -> None:
    """The plain-text loaders (G's) do not pay for importing ``datasets``."""
    code = "import sys, course.data; print('datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_polarity_split_is_the_one_datasets_draws(polarity: datasets.DatasetDict) -> None:
    """The fast stratified split gives the rows ``train_test_split`` gives, in the same order
    (the shipped E checkpoint was checked against this split)."""
    sentences = _polarity_sentences("local")
    first = sentences.train_test_split(test_size=1066, seed=0, stratify_by_column="label")
    second = first["train"].train_test_split(test_size=1066, seed=0, stratify_by_column="label")
    for ours, theirs in [("train", second["train"]), ("validation", second["test"])]:
        assert polarity[ours]["text"] == theirs["text"], ours
    assert polarity["test"]["label"] == first["test"]["label"]
    assert polarity["test"]["text"] == first["test"]["text"]


def test_shakespeare_splits_are_contiguous_90_5_5(shakespeare: datasets.DatasetDict) -> None:
    assert list(shakespeare) == list(SPLITS)
    file_text = (PACKAGE_DATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    expected = [line for line in file_text.split("\n") if line.strip()]
    assert len(expected) == 32_777

    sizes = [len(shakespeare[split]) for split in SPLITS]
    assert sizes == [29_499, 1_639, 1_639]
    # Train, then validation, then test, in file order: no line is shared or reordered.
    together = [text for split in SPLITS for text in shakespeare[split]["text"]]
    assert together == expected
    assert shakespeare["train"][0]["text"] == "First Citizen:"


def test_shakespeare_has_no_empty_lines(shakespeare: datasets.DatasetDict) -> None:
    for split in SPLITS:
        assert shakespeare[split].column_names == ["text"]
        assert all(text.strip() for text in shakespeare[split]["text"])


def test_shakespeare_fractions() -> None:
    data = load_tiny_shakespeare(val_fraction=0.1, test_fraction=0.2)
    sizes = [len(data[split]) for split in SPLITS]
    assert sum(sizes) == 32_777
    assert sizes[1] == round(0.1 * 32_777)
    assert sizes[2] == round(0.2 * 32_777)


# -- Sentence polarity ----------------------------------------------------------------------


def test_polarity_splits_cover_all_sentences(polarity: datasets.DatasetDict) -> None:
    assert list(polarity) == list(SPLITS)
    assert [len(polarity[split]) for split in SPLITS] == [8_530, 1_066, 1_066]

    expected = Counter()
    for name, label in (("rt-polarity.neg", 0), ("rt-polarity.pos", 1)):
        lines = (PACKAGE_DATA / "rt-polarity" / name).read_text(encoding="utf-8").split("\n")
        assert lines[-1] == ""  # the file ends with a newline
        expected.update((line.strip(), label) for line in lines[:-1])
    assert sum(expected.values()) == 10_662

    # Equal multisets: every sentence is in exactly one split, none is lost or duplicated.
    together = rows(polarity["train"]) + rows(polarity["validation"]) + rows(polarity["test"])
    assert together == expected


def test_polarity_columns_and_labels(polarity: datasets.DatasetDict) -> None:
    first = polarity["train"][0]
    assert isinstance(first["text"], str) and isinstance(first["label"], int)
    for split in SPLITS:
        labels = polarity[split]["label"]
        assert set(labels) == {0, 1}
        assert abs(sum(labels) / len(labels) - 0.5) < 0.03
        assert all(text and text == text.strip() for text in polarity[split]["text"])


def test_polarity_is_shuffled(polarity: datasets.DatasetDict) -> None:
    # The files list all negatives then all positives; a shuffled split mixes them.
    labels = polarity["train"]["label"][:200]
    assert 50 < sum(labels) < 150


def test_polarity_same_seed_same_splits(polarity: datasets.DatasetDict) -> None:
    again = load_polarity(seed=0)
    for split in SPLITS:
        assert list(again[split]["text"]) == list(polarity[split]["text"])
        assert list(again[split]["label"]) == list(polarity[split]["label"])


def test_polarity_other_seed_other_splits(polarity: datasets.DatasetDict) -> None:
    other = load_polarity(seed=1)
    assert len(other["test"]) == len(polarity["test"])
    assert set(other["test"]["text"]) != set(polarity["test"]["text"])


@pytest.mark.parametrize(
    ("val_fraction", "test_fraction"), [(0.0, 0.1), (0.1, 1.0), (0.5, 0.5), (-0.1, 0.1)]
)
def test_bad_fractions_raise(val_fraction: float, test_fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        load_polarity(val_fraction=val_fraction, test_fraction=test_fraction)


def test_bad_source_raises() -> None:
    with pytest.raises(ValueError, match="source"):
        load_polarity(source="internet")


def test_hub_source_offline_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="HF_DATASETS_OFFLINE=0"):
        load_tiny_shakespeare(source="hub")


@pytest.mark.parametrize(
    ("loader", "filename"),
    [(load_tiny_shakespeare, "input.txt"), (load_polarity, "rt-polarity.")],
)
def test_missing_file_message(
    loader, filename: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpora, "DATA_DIR", tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        loader()
    message = str(error.value)
    assert filename in message
    assert str(tmp_path) in message
    assert "git checkout course/data" in message


# -- WordTokenizer --------------------------------------------------------------------------

TEXTS = ["the cat sat on the mat .", "the dog sat .", "a cat !"]


@pytest.fixture
def tok() -> WordTokenizer:
    return WordTokenizer.build(TEXTS)


def test_tokenize_words_and_punctuation() -> None:
    text = "Don't stop, O'er the HILL-top!  'Tis 21st\tcentury's café…"
    assert WordTokenizer.tokenize(text) == [
        "don't", "stop", ",", "o'er", "the", "hill", "-", "top", "!",
        "'", "tis", "21st", "century's", "café", "…",
    ]  # fmt: skip
    assert WordTokenizer.tokenize("   \n ") == []


def test_build_order_and_special_ids(tok: WordTokenizer) -> None:
    # Counts: the 3, . 2, cat 2, sat 2, then 1 each; ties go alphabetically.
    assert tok.itos == [
        "<pad>", "<unk>", "<eos>", "<mask>",
        "the", ".", "cat", "sat",
        "!", "a", "dog", "mat", "on",
    ]  # fmt: skip
    assert (tok.pad_id, tok.unk_id, tok.eos_id, tok.mask_id) == (0, 1, 2, 3)
    assert len(tok) == 13
    assert all(tok.stoi[token] == i for i, token in enumerate(tok.itos))


def test_build_max_size_and_min_freq() -> None:
    small = WordTokenizer.build(TEXTS, max_size=6)
    assert small.itos == ["<pad>", "<unk>", "<eos>", "<mask>", "the", "."]
    frequent = WordTokenizer.build(TEXTS, min_freq=2)
    assert frequent.itos[4:] == ["the", ".", "cat", "sat"]
    with pytest.raises(ValueError, match="max_size"):
        WordTokenizer.build(TEXTS, max_size=3)


def test_bad_vocabularies_raise() -> None:
    with pytest.raises(ValueError, match="special"):
        WordTokenizer(["<pad>", "<unk>", "the"])
    with pytest.raises(ValueError, match="duplicate"):
        WordTokenizer(["<pad>", "<unk>", "<eos>", "<mask>", "the", "the"])
    with pytest.raises(ValueError, match="single string"):
        WordTokenizer.build("the cat sat")


def test_encode_decode_round_trip(tok: WordTokenizer) -> None:
    ids = tok.encode("The cat sat on the mat.")
    assert ids == [4, 6, 7, 12, 4, 11, 5]
    assert tok.decode(ids) == "the cat sat on the mat ."
    assert tok.decode(torch.tensor(ids)) == "the cat sat on the mat ."
    assert tok.encode("the dog", add_eos=True) == [4, 10, tok.eos_id]


def test_unknown_words(tok: WordTokenizer) -> None:
    assert tok.encode("the zebra sat quietly") == [4, tok.unk_id, 7, tok.unk_id]
    assert tok.decode(tok.encode("the zebra")) == "the <unk>"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([0, len(tok)])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([-1])


def test_encode_batch_pads_on_the_right(tok: WordTokenizer) -> None:
    ids, lengths = tok.encode_batch(["the cat sat .", "a dog", "the"])
    assert ids.dtype == torch.long and lengths.dtype == torch.long
    assert ids.shape == (3, 4)
    assert lengths.tolist() == [4, 2, 1]
    assert ids.tolist() == [[4, 6, 7, 5], [9, 10, 0, 0], [4, 0, 0, 0]]
    # Every position past a row's length is padding, every position before it is not.
    positions = torch.arange(ids.shape[1])  # (L,)
    is_pad = positions[None, :] >= lengths[:, None]  # (B, L)
    assert torch.equal(ids == tok.pad_id, is_pad)


def test_encode_batch_truncates(tok: WordTokenizer) -> None:
    ids, lengths = tok.encode_batch(["the cat sat on the mat .", "a"], max_len=3)
    assert ids.tolist() == [[4, 6, 7], [9, 0, 0]]
    assert lengths.tolist() == [3, 1]


def test_encode_batch_bad_input(tok: WordTokenizer) -> None:
    with pytest.raises(ValueError, match="at least one text"):
        tok.encode_batch([])
    with pytest.raises(ValueError, match="single string"):
        tok.encode_batch("the cat")
    with pytest.raises(ValueError, match="max_len"):
        tok.encode_batch(["the cat"], max_len=0)


def test_encode_corpus(tok: WordTokenizer) -> None:
    stream = tok.encode_corpus(TEXTS)
    assert stream.dtype == torch.long and stream.dim() == 1
    assert len(stream) == sum(len(tok.encode(text)) + 1 for text in TEXTS)
    assert int((stream == tok.eos_id).sum()) == len(TEXTS)
    assert stream[-1].item() == tok.eos_id
    assert stream[:4].tolist() == [4, 6, 7, 12]
    with pytest.raises(ValueError, match="no texts"):
        tok.encode_corpus([])


def test_save_load_round_trip(tmp_path: Path) -> None:
    original = WordTokenizer.build(TEXTS + ["un café , s'il vous plaît"])
    path = tmp_path / "vocab.json"
    original.save(path)
    assert json.loads(path.read_text(encoding="utf-8")) == original.itos
    loaded = WordTokenizer.load(path)
    assert loaded.itos == original.itos
    assert loaded.stoi == original.stoi
    assert loaded.encode("un café pour le chat") == original.encode("un café pour le chat")

    path.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(ValueError, match="list of tokens"):
        WordTokenizer.load(path)


def test_tokenizer_on_real_data(
    polarity: datasets.DatasetDict, shakespeare: datasets.DatasetDict
) -> None:
    tok = WordTokenizer.build(polarity["train"]["text"], max_size=10_000)
    assert len(tok) == 10_000
    ids, lengths = tok.encode_batch(polarity["test"]["text"])
    real = ids[ids != tok.pad_id]
    assert len(real) == int(lengths.sum())
    assert (real == tok.unk_id).float().mean() < 0.1  # about 7% unknown on held-out text

    lines = shakespeare["validation"]["text"]
    stream = WordTokenizer.build(shakespeare["train"]["text"]).encode_corpus(lines)
    assert int((stream == tok.eos_id).sum()) == len(lines)


# -- Shipped files and the novels -------------------------------------------------------------


def shipped_checksums() -> list[tuple[Path, str]]:
    """(file, sha256) for every data file listed in a SOURCE.md table: | `name` | ... | `hash` |."""
    pairs = []
    for source in sorted(PACKAGE_DATA.glob("*/SOURCE.md")):
        for line in source.read_text(encoding="utf-8").splitlines():
            cells = [cell.strip().strip("`") for cell in line.split("|")[1:-1]]
            if len(cells) >= 4 and len(cells[3]) == 64 and (source.parent / cells[0]).is_file():
                pairs.append((source.parent / cells[0], cells[3]))
    return pairs


def test_every_shipped_file_matches_its_source_checksum() -> None:
    import hashlib

    pairs = shipped_checksums()
    listed = {path.name for path, _ in pairs}
    expected = {"input.txt", "rt-polarity.pos", "austen-emma.txt", "wiki.txt", "birth_dev.tsv"}
    assert expected <= listed
    for path, digest in pairs:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path


def test_novels_are_paragraphs_without_title_lines() -> None:
    from course.data import load_novels

    novels = load_novels()
    assert novels.column_names == ["text", "book"]
    assert len(set(novels["book"])) == 6
    texts = list(novels["text"])
    assert not any(text.startswith("[") and "by" in text[:60] for text in texts[:3])
    assert all(text == " ".join(text.split()) and text for text in texts)
    assert texts[2].startswith("Emma Woodhouse, handsome, clever, and rich")
    assert sum(len(text.split()) for text in texts) > 500_000


def test_wikitext_is_plain_paragraphs_with_its_unknown_words() -> None:
    from course.data import WordTokenizer, load_wikitext

    paragraphs = load_wikitext()
    assert len(paragraphs) == 4024  # 8,118 lines less the headings and the empty lines
    assert not any(line.startswith("=") for line in paragraphs)
    assert not any(" @-@ " in line or " @,@ " in line or " @.@ " in line for line in paragraphs)
    assert paragraphs[0].startswith("Homarus gammarus , known as the European lobster")
    words = sum(len(line.split()) for line in paragraphs)
    assert 400_000 < words < 455_097, words
    assert WordTokenizer.tokenize("a <unk> lobster") == ["a", "<unk>", "lobster"]
    tokenizer = WordTokenizer.build(["a lobster"])
    assert tokenizer.encode("a <unk> lobster") == tokenizer.encode("a krill lobster")


def test_birth_places_and_wiki_lines() -> None:
    from course.data import load_birth_places, load_wiki_lines

    sizes = {"train": 2000, "dev": 500, "test": 437}
    for split, size in sizes.items():
        pairs = load_birth_places(split)
        assert len(pairs) == size, split
        assert all(q.startswith("Where was ") and q.endswith(" born?") for q, _ in pairs)
        assert all(bool(place) == (split != "test") for _, place in pairs)
    assert load_birth_places("train")[0] == ("Where was Khatchig Mouradian born?", "Lebanon")
    lines = load_wiki_lines()
    assert len(lines) == 2937 and all(lines)
    assert lines[0].startswith("Khatchig Mouradian. ")
    with pytest.raises(ValueError, match="split must be one of"):
        load_birth_places("validation")
