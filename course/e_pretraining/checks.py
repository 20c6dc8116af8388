"""Checks for assignment E: they name the usual mistakes (the names the notebook's test cells call).

Each function checks a property that SYLLABUS E states and raises :class:`GradingError` with a
message that names the mistake; none of them computes the answer. They live by topic:

- :mod:`course.e_pretraining.classifier_checks`: the last real token, the classification head,
  freezing the base and counting trainable parameters;
- :mod:`course.e_pretraining.masking_checks`: BERT's 80/10/10 corruption (``mask_tokens``);
- :mod:`course.e_pretraining.kv_cache_checks`: one step of attention with a KV cache.
"""

from __future__ import annotations

from course.e_pretraining.classifier_checks import *  # noqa: F403
from course.e_pretraining.kv_cache_checks import *  # noqa: F403
from course.e_pretraining.masking_checks import *  # noqa: F403
