"""Offline data for the course: corpora as ``datasets.DatasetDict`` and a word tokenizer.

The data files ship inside this package (``course/data/tinyshakespeare/`` and
``course/data/rt-polarity/``, each with a SOURCE.md giving origin and licence), so nothing is
downloaded. Importing this package sets ``HF_DATASETS_OFFLINE=1`` unless it is already set.

    from course.data import WordTokenizer, load_polarity, load_tiny_shakespeare

    polarity = load_polarity(seed=0)          # train / validation / test, "text" + "label"
    tok = WordTokenizer.build(polarity["train"]["text"], max_size=10_000)
    ids, lengths = tok.encode_batch(polarity["train"]["text"][:32])  # (32, L), (32,)

    shakespeare = load_tiny_shakespeare()     # contiguous 90/5/5 split by lines, "text"
    stream = tok.encode_corpus(shakespeare["train"]["text"])          # (N,)
"""

from course.data.corpora import (
    DATA_DIR,
    data_file,
    load_birth_places,
    load_novels,
    load_polarity,
    load_tiny_shakespeare,
    load_wiki_lines,
    load_wikitext,
)
from course.data.tokenizer import WordTokenizer

__all__ = [
    "DATA_DIR",
    "WordTokenizer",
    "data_file",
    "load_birth_places",
    "load_novels",
    "load_polarity",
    "load_tiny_shakespeare",
    "load_wiki_lines",
    "load_wikitext",
]
