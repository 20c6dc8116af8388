"""Mutation tests of H's graded modules (issue 58): every module is compared by value.

Each mutant is the reference answer with one submodule of ``forward`` skipped, repeated or
moved (the blocks of GPT, ``ln_f``, the embeddings; the branches and norms of Block; the
projections, mask and scaling of CausalSelfAttention). It goes through the grader's own path,
the probe in this process, then the trusted judge (:func:`tests.test_own_gpt.verdicts`), and
must lose the hidden test cell of its module (and no other module's cells), with the mistake
named where the checks know it. Correct implementations in other styles (a loop, ``reduce``,
``nn.Sequential``, ``einsum``, ``F.scaled_dot_product_attention``) must pass every cell.
"""

from __future__ import annotations

import pytest
import torch

from course.h_own_gpt import checks
from tests.test_own_gpt import ATTENTION, MERGE, SPLIT, TRIL, reference, verdicts, with_code

GPT_FORWARD = """
_GPT = GPT
class GPT(_GPT):
    def forward(self, idx, targets=None):
        x = {EMBED}
        {BODY}
        logits = {HEAD}
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
"""
EMBED = "self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(idx.size(1))))"
LOOP = "for block in self.blocks:\n            x = block(x)"
HEAD = "self.head(self.ln_f(x))"


def gpt(**parts: str) -> str:
    return GPT_FORWARD.format(**({"EMBED": EMBED, "BODY": LOOP, "HEAD": HEAD} | parts))


GPT_MUTANTS = [
    ("skips_blocks", gpt(BODY="pass"), checks.BLOCKS_SKIPPED),
    ("first_block_only", gpt(BODY=LOOP + "\n            break"), checks.FIRST_BLOCK_ONLY),
    (
        "blocks_not_chained",
        gpt(BODY="out = x\n        for block in self.blocks:\n            out = block(x)\n"
            "        x = out"),
        checks.LAST_BLOCK_ONLY,
    ),
    ("blocks_reversed", gpt(BODY=LOOP.replace("self.blocks", "reversed(self.blocks)")),
     checks.BLOCKS_REVERSED),
    ("ln_f_before_blocks", gpt(BODY="x = self.ln_f(x)\n        " + LOOP, HEAD="self.head(x)"),
     checks.LN_F_FIRST),
    (
        "ln_f_after_each_block",
        gpt(BODY="for i, block in enumerate(self.blocks):\n            x = block(x)\n"
            "            if i < len(self.blocks) - 1:\n                x = self.ln_f(x)"),
        checks.LN_F_EACH,
    ),
    ("ln_f_missing", gpt(HEAD="self.head(x)"), checks.NO_LN_F),
    ("residual_around_blocks", gpt(BODY=LOOP.replace("= block(x)", "= x + block(x)")),
     checks.BLOCK_RESIDUAL),
    ("no_positions", gpt(EMBED="self.drop(self.tok_emb(idx))"), checks.NO_POSITIONS),
    ("blocks_rotated", gpt(BODY=LOOP.replace("self.blocks", "[*self.blocks[1:], self.blocks[0]]")),
     None),
    ("blocks_run_twice", gpt(BODY=LOOP + "\n        " + LOOP), None),
    ("each_block_twice", gpt(BODY=LOOP.replace("block(x)", "block(block(x))")), None),
    ("positions_only", gpt(EMBED="self.pos_emb(torch.arange(idx.size(1))).expand("
                                 "len(idx), -1, -1)"), None),
    ("ln_f_twice", gpt(HEAD="self.head(self.ln_f(self.ln_f(x)))"), None),
    ("last_position_sees_all", gpt(BODY=LOOP + "\n        x = x + x.mean(1, keepdim=True)"),
     None),
]  # fmt: skip

BLOCK_FORWARD = """
_Block = Block
class Block(_Block):
    def forward(self, x):
        {FORWARD}
"""
ATTN = "x = x + self.attn(self.ln1(x))"
MLP = "x = x + self.mlp(self.ln2(x))"


def block(*lines: str) -> str:
    return BLOCK_FORWARD.format(FORWARD="\n        ".join([*lines, "return x"]))


BLOCK_MUTANTS = [
    ("skips_attention", block(MLP), checks.NO_ATTN),
    ("skips_mlp", block(ATTN), checks.NO_MLP),
    ("mlp_first", block(MLP, ATTN), checks.MLP_FIRST),
    ("norms_swapped", block(ATTN.replace("ln1", "ln2"), MLP.replace("ln2", "ln1")),
     checks.LN_SWAPPED),
    ("post_norm", block("x = self.ln1(x + self.attn(x))", "x = self.ln2(x + self.mlp(x))"),
     checks.POST_NORM),
    ("no_attention_residual", block(ATTN.replace("x + ", ""), MLP), checks.NO_ATTN_RESIDUAL),
    ("no_mlp_residual", block(ATTN, MLP.replace("x + ", "")), checks.NO_MLP_RESIDUAL),
    ("ln1_twice", block(ATTN, MLP.replace("ln2", "ln1")), checks.LN1_TWICE),
    ("gelu_tanh", block(ATTN, "x = x + self.mlp[2](F.gelu(self.mlp[0](self.ln2(x)), "
                              "approximate='tanh'))"), checks.GELU_TANH),
    ("relu", block(ATTN, "x = x + self.mlp[2](F.relu(self.mlp[0](self.ln2(x))))"), checks.RELU),
    ("attention_twice", block(ATTN, ATTN, MLP), None),
    ("mlp_twice", block(ATTN, MLP, MLP), None),
    ("no_ln1", block(ATTN.replace("self.ln1(x)", "x"), MLP), None),
    ("no_ln2", block(ATTN, MLP.replace("self.ln2(x)", "x")), None),
]  # fmt: skip

ATTENTION_MUTANTS = [
    ("no_mask", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        '        s = s.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))\n', ""),
     checks.NO_MASK),
    ("no_scale", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        " / math.sqrt(d // self.nhead)", ""), checks.NO_SCALE),
    ("scale_d_model", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        "math.sqrt(d // self.nhead)", "math.sqrt(d)"), checks.SCALE_D),
    ("no_proj", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        "return self.proj(", "return ("), checks.NO_PROJ),
    ("proj_twice", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        "return self.proj(", "return self.proj(self.proj(") + ")", None),
    ("q_k_swapped", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE).replace(
        "q, k, v = self.qkv(x)", "k, q, v = self.qkv(x)"), None),
    ("mask_after_softmax", ATTENTION.format(TRIL=TRIL, SPLIT=SPLIT, MERGE=MERGE.replace(
        "s.softmax(-1)", "s.softmax(-1).masked_fill(self.tril[:, :, :t, :t] == 0, 0)")).replace(
        '        s = s.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))\n', ""), None),
]  # fmt: skip

CELLS = {
    "gpt": {"test_gpt_visible", "test_gpt_hidden"},
    "block": {"test_block_visible", "test_block_hidden"},
    "attention": {"test_attention_visible", "test_attention_hidden"},
}
MUTANTS = (
    [("gpt", *m) for m in GPT_MUTANTS]
    + [("block", *m) for m in BLOCK_MUTANTS]
    + [("attention", *m) for m in ATTENTION_MUTANTS]
)


@pytest.mark.parametrize(
    ("module", "code", "message"),
    [m[:1] + m[2:] for m in MUTANTS],
    ids=[f"{m[0]}-{m[1]}" for m in MUTANTS],
)
def test_each_mutant_fails_its_module_and_is_named(
    module: str, code: str, message: str | None
) -> None:
    got = verdicts(with_code(code), seed=7)
    lost = {cell for cell, reason in got.items() if reason}
    hidden = f"test_{module}_hidden"
    assert hidden in lost and lost <= CELLS[module], got
    if message is not None:
        for cell in lost:
            assert message[:50] in got[cell], (cell, got[cell], message)


def test_a_mutant_blocks_own_mistake_costs_the_block_only() -> None:
    """A Block without its MLP's residual, in a GPT written right: the GPT's cells pass (its
    logits are the right composition of the student's own blocks)."""
    got = verdicts(with_code(block(ATTN, MLP.replace("x + ", ""))), seed=3)
    assert {cell for cell, reason in got.items() if reason} == CELLS["block"], got


GPT_STYLES = {
    "reduce": gpt(BODY="x = functools.reduce(lambda h, blk: blk(h), self.blocks, x)"),
    "sequential": """
_GPT = GPT
class GPT(_GPT):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blocks = nn.Sequential(*self.blocks)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        h = self.tok_emb(idx) + self.pos_emb.weight[:t]
        logits = self.head(self.ln_f(self.blocks(self.drop(h))))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return logits, loss
""",
    "indexed": gpt(BODY="for i in range(len(self.blocks)):\n            x = self.blocks[i](x)",
                   HEAD="F.linear(self.ln_f(x), self.tok_emb.weight)"),
}  # fmt: skip
ATTENTION_STYLES = {
    "sdpa": """
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, nhead, block_size, dropout=0.0):
        super().__init__()
        self.h, self.p = nhead, dropout
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.p if self.training else 0.0)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
""",
    "einsum": ATTENTION.format(
        TRIL=TRIL, SPLIT="z.unflatten(-1, (self.nhead, -1))",
        MERGE="torch.einsum('bhts,bshe->bthe', s.softmax(-1), v).flatten(2)",
    ).replace("s = q @ k.transpose(-2, -1)", "s = torch.einsum('bthe,bshe->bhts', q, k)"),
}  # fmt: skip


@pytest.mark.parametrize(
    "code", [*GPT_STYLES.values(), *ATTENTION_STYLES.values()],
    ids=[*(f"gpt-{s}" for s in GPT_STYLES), *(f"attention-{s}" for s in ATTENTION_STYLES)],
)  # fmt: skip
def test_correct_styles_pass_every_cell(code: str) -> None:
    ns = reference()
    exec("import functools\n" + code, ns)
    got = verdicts(ns, seed=7)
    assert all(reason is None for reason in got.values()), got


def test_the_head_before_ln_f_is_named_when_it_can_run() -> None:
    """ln_f(head(x)) runs only when V == D; the checks name it then."""
    ns = with_code(gpt(HEAD="self.ln_f(self.head(x))"))
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(8, (2, 5), generator=gen)
    changed = idx.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % 8
    sizes = {"vocab_size": 8, "d_model": 8, "nhead": 2, "nlayers": 2, "block_size": 6}
    case = sizes | {"seed": 1, "idx": idx, "targets": idx.flip(1), "changed": changed}
    case["change_from"] = 3
    with pytest.raises(AssertionError, match="the head is applied before ln_f"):
        checks.judge_gpt(checks.observe_gpt(ns["GPT"], case), case)


def test_three_blocks_in_another_order_are_named() -> None:
    order = "[self.blocks[i] for i in (1, 0, 2)] if len(self.blocks) == 3 else self.blocks"
    ns = with_code(gpt(BODY=LOOP.replace("self.blocks", order)))
    case = next(c for c in checks.gpt_cases(2, hidden=True) if c["nlayers"] == 3)
    with pytest.raises(AssertionError, match=r"another order \(blocks\[1\], blocks\[0\], "):
        checks.judge_gpt(checks.observe_gpt(ns["GPT"], case), case)


def test_causality_is_checked_on_the_changed_tokens() -> None:
    """A GPT whose logits match the reference on idx but that peeks at later tokens elsewhere
    fails the causality check."""
    code = gpt(BODY=LOOP + "\n        if not torch.equal(idx, self._first):\n"
               "            x = x + x.mean(1, keepdim=True)")  # fmt: skip
    ns = with_code(code)
    case = checks.gpt_cases(0, hidden=False)[1]
    model_cls = ns["GPT"]

    class Peeking(model_cls):  # the first call (idx) is right, the next ones peek
        def forward(self, idx, targets=None):
            if not hasattr(self, "_first"):
                self._first = idx
            return super().forward(idx, targets)

    with pytest.raises(AssertionError, match="causality"):
        checks.judge_gpt(checks.observe_gpt(Peeking, case), case)
