"""Checks for assignment B (attention and the Transformer layer): the names the notebook's test
cells call.

``diagnose_X(code, ...)`` runs the student's code (a module, a function);
``diagnose_X_result(got, ...)`` and ``diagnose_X_facts(facts, ...)`` decide on what it returned or
what was read of it. Each raises :class:`GradingError` with a message that names what is wrong.
They check properties stated in the syllabus and compare with
PyTorch's own modules given the same weights; none of them computes a graded answer. They live
by topic:

- :mod:`course.b_attention.attention_checks`: the named mistakes, scaled dot-product attention,
  splitting and merging heads;
- :mod:`course.b_attention.projection_checks`: multi-head self-attention and cross-attention;
- :mod:`course.b_attention.layer_checks`: layer normalisation, the Transformer layer, gradients.
"""

from __future__ import annotations

from course.b_attention.attention_checks import *  # noqa: F403
from course.b_attention.layer_checks import *  # noqa: F403
from course.b_attention.projection_checks import *  # noqa: F403
