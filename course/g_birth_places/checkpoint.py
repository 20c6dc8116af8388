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

import torch
from torch import nn

from course.data.corpora import WIKI_FILE, data_file
from course.g_birth_places.chars import CharVocab

SHIPPED = Path(__file__).parent / "wiki_char_lm.pt"  # the checkpoint that ships with the course
COMPUTED = ("pos_encoder.pe",)  # buffers rebuilt by the model's constructor, not stored


def wiki_sha256() -> str:
    """SHA-256 of the shipped wiki.txt, the pretraining text."""
    return hashlib.sha256(data_file(WIKI_FILE).read_bytes()).hexdigest()


def load_pretrained(
    model_class: type[nn.Module], path: str | Path = SHIPPED
) -> tuple[nn.Module, CharVocab, dict]:
    """Build ``model_class(**config)`` and load the checkpoint's weights into it.

    Returns (model in float32 and eval mode, vocabulary, info), where ``info`` is the checkpoint
    without its weights and characters (config, seed, data hash, budget, losses).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"No pretrained checkpoint at {path}. It ships with the course (restore it with "
            "`git checkout course/g_birth_places/wiki_char_lm.pt`), or an instructor makes one "
            "with `python tools/pretrain_birth_places.py`."
        )
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = model_class(**checkpoint["config"])
    weights = {k: v.float() for k, v in checkpoint["state_dict"].items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if set(missing) - set(COMPUTED) or unexpected:
        raise ValueError(
            f"{path} does not fit {model_class.__name__}: missing {missing}, unexpected "
            f"{unexpected}. Is it the model given in the notebook?"
        )
    model.eval()
    info = {k: v for k, v in checkpoint.items() if k not in ("state_dict", "itos")}
    return model, CharVocab(checkpoint["itos"]), info
