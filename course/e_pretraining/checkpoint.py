"""Loading the language model that ships with assignment E (``course/e_pretraining/review_lm.pt``).

The checkpoint holds weights only (float16, to keep the file small) and, beside them, what made
them: the model configuration, the vocabulary, the seed, the SHA-256 of the pretraining text
(:mod:`course.e_pretraining.text`), the training budget and the losses. The model's code is not
here: it is assignment D's answer, given to the students in E's notebook, whose class
:func:`load_pretrained` fills. The instructor's script ``tools/pretrain_review_lm.py`` made it.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from course.checkpoints import COMPUTED, load_weights
from course.data import WordTokenizer

SHIPPED = Path(__file__).parent / "review_lm.pt"  # the checkpoint that ships with the course
__all__ = ["COMPUTED", "SHIPPED", "load_pretrained"]


def load_pretrained(
    model_class: type[nn.Module], path: str | Path = SHIPPED
) -> tuple[nn.Module, WordTokenizer, dict]:
    """Build ``model_class(**config)`` and load the checkpoint's weights into it.

    Returns (model in float32 and eval mode, tokenizer, info), where ``info`` is the checkpoint
    without its weights and vocabulary (config, seed, data hash, budget, losses).
    """
    model, checkpoint = load_weights(model_class, path, SHIPPED, "tools/pretrain_review_lm.py")
    vocab = checkpoint.pop("vocab")
    return model, WordTokenizer(vocab), checkpoint
