"""Checks for assignment H's three modules: they name the usual mistakes.

Each module is built under a seed, observed (the facts the tests read of it, its weights, its
outputs on given inputs) by an ``observe_*`` function, and judged from that observation by a
``judge_*`` function: the notebook's test cells call both in the kernel, the trusted judge calls
the second on what the kernel recorded. Every parameter gets its own random values first
(``ln1`` equals ``ln2`` at initialisation), and the expected outputs are computed from the
weights the student's module holds, with PyTorch's own operations (``F.scaled_dot_product_
attention``, ``F.layer_norm``, ``F.gelu``), as assignment B's checks compare with
``nn.MultiheadAttention``.

By topic: CausalSelfAttention and Block in :mod:`course.h_own_gpt.block_checks`, GPT in
:mod:`course.h_own_gpt.gpt_checks` (its initialisation in :mod:`course.h_own_gpt.init_checks`);
this module re-exports their names, which the notebook's cells and the judge call. The recipe,
the training step and the tokens: ``recipe_checks``, ``step_checks`` and ``token_checks``.
"""

from __future__ import annotations

from course.h_own_gpt.block_checks import (  # noqa: F401 - re-exported
    ATTENTION_WEIGHTS,
    BLOCK_WEIGHTS,
    GELU_TANH,
    HEAD_SPLIT,
    LN1_TWICE,
    LN_SWAPPED,
    MLP_FIRST,
    NO_ATTN,
    NO_ATTN_RESIDUAL,
    NO_MASK,
    NO_MLP,
    NO_MLP_RESIDUAL,
    NO_PROJ,
    NO_SCALE,
    NORM_STREAM,
    POST_NORM,
    RELU,
    SCALE_D,
    attention_cases,
    attention_from,
    block_from,
    diagnose_attention,
    diagnose_block,
    judge_attention,
    judge_block,
    observe_attention,
    observe_block,
)
from course.h_own_gpt.gpt_checks import (  # noqa: F401 - re-exported
    BLOCK_RESIDUAL,
    BLOCKS_ORDER,
    BLOCKS_REVERSED,
    BLOCKS_SKIPPED,
    EMB_SCALED,
    FIRST_BLOCK_ONLY,
    HEAD_FIRST,
    LAST_BLOCK_ONLY,
    LN_F_EACH,
    LN_F_FIRST,
    LOSS_SHIFTED,
    NO_LN_F,
    NO_POSITIONS,
    diagnose_gpt,
    gpt_cases,
    gpt_from,
    gpt_parameters,
    judge_gpt,
    observe_gpt,
)
from course.h_own_gpt.init_checks import (  # noqa: F401 - the messages, re-exported
    BIAS_NOT_ZERO,
    NO_INIT,
    NO_RESIDUAL_SCALING,
    initial_spreads,
    judge_initialisation,
)
