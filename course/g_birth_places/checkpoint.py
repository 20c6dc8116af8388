"""Loading the character model that ships with assignment G (``wiki_char_lm.pt``).

The checkpoint holds weights only (float16, to keep the file small) and, beside them, what made
them: the model configuration, the characters, the seed, the SHA-256 of the pretraining text
(wiki.txt), the training budget and the losses. The model's code is the notebook's given
``TransformerLM`` (assignment D's model), whose class :func:`load_pretrained` fills. The
instructor's script ``tools/pretrain_birth_places.py`` made it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from course.checkpoints import COMPUTED, pretrained_loader
from course.data.corpora import WIKI_FILE, data_file
from course.g_birth_places.chars import CharVocab

SHIPPED = Path(__file__).parent / "wiki_char_lm.pt"  # the checkpoint that ships with the course
__all__ = ["COMPUTED", "SHIPPED", "load_pretrained", "wiki_sha256"]


def wiki_sha256() -> str:
    """SHA-256 of the shipped wiki.txt, the pretraining text."""
    return hashlib.sha256(data_file(WIKI_FILE).read_bytes()).hexdigest()


# load_pretrained(model_class, path=SHIPPED) -> (model, CharVocab, info)
load_pretrained = pretrained_loader(SHIPPED, "tools/pretrain_birth_places.py", "itos", CharVocab)
