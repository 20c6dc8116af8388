"""Loading the language model that ships with assignment E (``course/e_pretraining/review_lm.pt``).

The checkpoint holds weights only (float16, to keep the file small) and, beside them, what made
them: the model configuration, the vocabulary, the seed, the SHA-256 of the pretraining text
(:mod:`course.e_pretraining.text`), the training budget and the losses. The model's code is not
here: it is assignment D's answer, given to the students in E's notebook, whose class
:func:`load_pretrained` fills. The instructor's script ``tools/pretrain_review_lm.py`` made it.
"""

from __future__ import annotations

from pathlib import Path

from course.checkpoints import COMPUTED, pretrained_loader
from course.data import WordTokenizer

SHIPPED = Path(__file__).parent / "review_lm.pt"  # the checkpoint that ships with the course
__all__ = ["COMPUTED", "SHIPPED", "load_pretrained"]


# load_pretrained(model_class, path=SHIPPED) -> (model, WordTokenizer, info)
load_pretrained = pretrained_loader(SHIPPED, "tools/pretrain_review_lm.py", "vocab", WordTokenizer)
