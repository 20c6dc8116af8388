"""Mutation tests of the graded modules of A, B and D (issue 58; H's: ``test_gpt_mutants.py``).

Each mutant is the instructor's answer with one submodule of ``forward`` skipped, repeated or
moved. It goes through the grader's path (the assignment's probe in this process, then the
trusted judge) and must lose the hidden test cell of its module, and only cells that build on
that module, with the mistake named where the checks know it.
"""

from __future__ import annotations

import ast
import json
import tempfile

import pytest
import torch

from course import verify
from course.b_attention import checks as b_checks
from course.testcells import randomise_parameters
from judge import core
from tests.conftest import REPO

NOTEBOOKS = {
    "a_masks": "masks_and_positions",
    "b_attention": "attention_and_layer",
    "d_language_model": "language_model",
    "e_pretraining": "pretraining_and_finetuning",
}


DEFINITIONS = (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Expr)


def solutions(assignment: str) -> dict:
    """The setup cell (magics aside) and the cells of the instructor's notebook that only define
    names (the answers and the given code, not the experiments), run in a fresh namespace."""
    path = REPO / "source" / assignment / f"{NOTEBOOKS[assignment]}.ipynb"
    ns: dict = {}
    for cell in json.loads(path.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        source = "\n".join(line for line in lines if not line.startswith("%"))
        setup = meta.get("grade_id") == "setup"
        answer = (meta.get("solution") or not meta.get("grade")) and all(
            isinstance(node, DEFINITIONS) for node in ast.parse(source).body
        )  # an answer, or what the notebook gives (E's TransformerLM)
        if setup or answer:
            exec(source, ns)
    return ns


def verdicts(assignment: str, code: str, seed: int = 17) -> dict[str, str | None]:
    """The answers with ``code`` run after them, observed and judged as the grader does."""
    ns = solutions(assignment)
    exec(code, ns)
    with tempfile.NamedTemporaryFile(suffix=".pt") as handle:
        verify.observe(assignment, seed, handle.name, ns)
        return core.verdicts(assignment, seed, core.load(handle.name))


MHSA = """
_MHSA = MultiHeadSelfAttention
class MultiHeadSelfAttention(_MHSA):
    def forward(self, x, mask=None):
        q, k, v = {Q}, {K}, {V}
        heads, _ = scaled_dot_product_attention(
            split_heads(q, self.nhead), split_heads(k, self.nhead), split_heads(v, self.nhead), {M})
        return {OUT}
"""
MHSA_PARTS = {
    "Q": "self.q_proj(x)",
    "K": "self.k_proj(x)",
    "V": "self.v_proj(x)",
    "M": "mask",
    "OUT": "self.out_proj(merge_heads(heads))",
}


def mhsa(**changes: str) -> str:
    return MHSA.format(**(MHSA_PARTS | changes))


LAYER = """
_Layer = TransformerLayer
class TransformerLayer(_Layer):
    def forward(self, x, mask=None):
        sa = lambda h: self.self_attn(h, mask)
        ff = lambda h: self.linear2(torch.relu(self.linear1(h)))
        if self.norm_first:
            {PRE}
        else:
            {POST}
        return x
"""
PRE = ["x = x + sa(self.norm1(x))", "x = x + ff(self.norm2(x))"]
POST = ["x = self.norm1(x + sa(x))", "x = self.norm2(x + ff(x))"]


def layer(pre: list[str] = PRE, post: list[str] = POST) -> str:
    join = "\n            ".join
    return LAYER.format(PRE=join(pre), POST=join(post))


MODEL = """
_Model = TransformerModel
class TransformerModel(_Model):
    def forward(self, src, src_mask=None):
        x = self.embedding(src) * math.sqrt(self.d_model)
        {BODY}
        return {OUT}
"""
BODY = ["x = self.pos_encoder(x)", "x = self.transformer_encoder(x, mask=src_mask)"]


def model(body: list[str] = BODY, out: str = "self.decoder(x)") -> str:
    return MODEL.format(BODY="\n        ".join(body), OUT=out)


PE = """
_PE = PositionalEncoding
class PositionalEncoding(_PE):
    def forward(self, x):
        return {OUT}
"""

CLASSIFIER = """
_Classifier = SentimentClassifier
class SentimentClassifier(_Classifier):
    def forward(self, src, lengths):
        hidden = {HIDDEN}
        return {OUT}
"""
ENCODED = "self.lm.encode(src, causal_mask(src.size(1)))"
HEADED = "self.lm.decoder(last_token_states(hidden, lengths))"


def classifier(hidden: str = ENCODED, out: str = HEADED) -> str:
    return CLASSIFIER.format(HIDDEN=hidden, OUT=out)


MHSA_CELLS = {f"test_{m}_{k}" for m in ("mhsa", "layer") for k in ("visible", "hidden")}
LAYER_CELLS = {"test_layer_visible", "test_layer_hidden"}
MODEL_CELLS = {"test_model_visible", "test_model_hidden"}
PE_CELLS = {"test_pe_visible", "test_pe_hidden"}
CLASSIFIER_CELLS = {
    f"test_{m}_{k}" for m in ("classifier", "freeze") for k in ("visible", "hidden")
}
MUTANTS = [
    # B's MultiHeadSelfAttention: each projection skipped, repeated or taken for another
    ("b_attention", "mhsa-no_out_proj", mhsa(OUT="merge_heads(heads)"), MHSA_CELLS,
     b_checks.NO_OUT_PROJ),
    ("b_attention", "mhsa-out_proj_twice", mhsa(OUT="self.out_proj(self.out_proj("
                                                    "merge_heads(heads)))"), MHSA_CELLS, None),
    ("b_attention", "mhsa-no_q_proj", mhsa(Q="x"), MHSA_CELLS, None),
    ("b_attention", "mhsa-no_v_proj", mhsa(V="x"), MHSA_CELLS, None),
    ("b_attention", "mhsa-q_from_k_proj", mhsa(Q="self.k_proj(x)"), MHSA_CELLS, None),
    ("b_attention", "mhsa-q_k_swapped", mhsa(Q="self.k_proj(x)", K="self.q_proj(x)"),
     MHSA_CELLS, None),
    ("b_attention", "mhsa-q_proj_twice", mhsa(Q="self.q_proj(self.q_proj(x))"), MHSA_CELLS,
     None),
    ("b_attention", "mhsa-mask_ignored", mhsa(M="None"), MHSA_CELLS, None),
    # B's TransformerLayer, post-norm and pre-norm: sublayers skipped, repeated, reordered
    ("b_attention", "layer-post_no_attention", layer(post=["x = self.norm1(x)", POST[1]]),
     LAYER_CELLS, None),
    ("b_attention", "layer-post_no_ff", layer(post=[POST[0], "x = self.norm2(x)"]),
     LAYER_CELLS, None),
    ("b_attention", "layer-post_ff_first", layer(post=POST[::-1]), LAYER_CELLS,
     b_checks.FF_FIRST),
    ("b_attention", "layer-post_norms_swapped",
     layer(post=[POST[0].replace("norm1", "norm2"), POST[1].replace("norm2", "norm1")]),
     LAYER_CELLS, b_checks.NORMS_SWAPPED),
    ("b_attention", "layer-post_attention_twice", layer(post=[POST[0], POST[0], POST[1]]),
     LAYER_CELLS, None),
    ("b_attention", "layer-post_no_residual", layer(post=["x = self.norm1(sa(x))", POST[1]]),
     LAYER_CELLS, b_checks.NO_RESIDUAL),
    ("b_attention", "layer-post_is_pre_norm", layer(post=PRE), LAYER_CELLS,
     "your layer normalises first"),
    ("b_attention", "layer-residual_after_norm",
     layer(post=["x = self.norm1(sa(x)) + x", "x = self.norm2(ff(x)) + x"]), LAYER_CELLS,
     "not LN(SA(X)) + X"),
    ("b_attention", "layer-pre_is_post_norm", layer(pre=POST), LAYER_CELLS, "post-norm"),
    ("b_attention", "layer-pre_no_ff", layer(pre=PRE[:1]), LAYER_CELLS, None),
    ("b_attention", "layer-pre_ff_first", layer(pre=PRE[::-1]), LAYER_CELLS, b_checks.FF_FIRST),
    ("b_attention", "layer-pre_norms_swapped",
     layer(pre=[PRE[0].replace("norm1", "norm2"), PRE[1].replace("norm2", "norm1")]),
     LAYER_CELLS, b_checks.NORMS_SWAPPED),
    # D's TransformerModel: the positions, the encoder, the mask, the decoder
    ("d_language_model", "model-no_positions", model(BODY[1:]), MODEL_CELLS,
     "positional encoding is skipped"),
    ("d_language_model", "model-no_encoder", model(BODY[:1]), MODEL_CELLS, "encoder is skipped"),
    ("d_language_model", "model-encoder_first", model(BODY[::-1]), MODEL_CELLS,
     "added after the encoder"),
    ("d_language_model", "model-encoder_twice", model([*BODY, BODY[1]]), MODEL_CELLS, None),
    ("d_language_model", "model-positions_twice", model([BODY[0], *BODY]), MODEL_CELLS, None),
    ("d_language_model", "model-mask_ignored",
     model([BODY[0], "x = self.transformer_encoder(x)"]), MODEL_CELLS, "mask is ignored"),
    ("d_language_model", "model-softmax", model(out="self.decoder(x).softmax(-1)"), MODEL_CELLS,
     "softmax"),
    ("d_language_model", "model-decoder_before_encoder_output",
     model(out="self.decoder(self.embedding(src))"), MODEL_CELLS, None),
    # E's SentimentClassifier: the base, its mask, the position read, the head
    ("e_pretraining", "classifier-no_mask", classifier(hidden="self.lm.encode(src)"),
     CLASSIFIER_CELLS, "padding after the sentences changed"),
    ("e_pretraining", "classifier-last_padded", classifier(out="self.lm.decoder(hidden[:, -1])"),
     CLASSIFIER_CELLS, "index -1"),
    ("e_pretraining", "classifier-first", classifier(out="self.lm.decoder(hidden[:, 0])"),
     CLASSIFIER_CELLS, "first position"),
    ("e_pretraining", "classifier-mean", classifier(out="self.lm.decoder(hidden.mean(1))"),
     CLASSIFIER_CELLS, "padding after the sentences changed"),
    ("e_pretraining", "classifier-no_base", classifier(hidden="self.lm.embedding(src)"),
     CLASSIFIER_CELLS, None),
    ("e_pretraining", "classifier-no_head", classifier(out="last_token_states(hidden, lengths)"),
     CLASSIFIER_CELLS, None),
    ("e_pretraining", "classifier-base_twice",
     classifier(hidden="self.lm.transformer_encoder(" + ENCODED + ", causal_mask(src.size(1)))"),
     CLASSIFIER_CELLS, None),
    # A's PositionalEncoding (a buffer, no parameter): the table and the dropout
    ("a_masks", "pe-no_table", PE.format(OUT="self.dropout(x)"), PE_CELLS, None),
    ("a_masks", "pe-no_dropout", PE.format(OUT="x + self.pe[: x.size(1)]"), PE_CELLS, None),
    ("a_masks", "pe-table_twice", PE.format(OUT="self.dropout(x + 2 * self.pe[: x.size(1)])"),
     PE_CELLS, None),
    ("a_masks", "pe-dropout_before_table",
     PE.format(OUT="self.dropout(x) + self.pe[: x.size(1)]"), PE_CELLS, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("assignment", "name", "code", "allowed", "message"), MUTANTS, ids=[m[1] for m in MUTANTS]
)
def test_each_mutant_fails_its_module(
    assignment: str, name: str, code: str, allowed: set[str], message: str | None
) -> None:
    got = verdicts(assignment, code)
    lost = {cell for cell, reason in got.items() if reason}
    hidden = f"test_{name.split('-')[0]}_hidden"
    assert hidden in lost and lost <= allowed, got
    if message is not None:
        assert message[:40] in got[hidden], got[hidden]


@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_the_answers_pass_every_cell(assignment: str) -> None:
    got = verdicts(assignment, "")
    assert all(reason is None for reason in got.values()), got


def test_the_hidden_items_give_the_parameters_values_of_the_submission() -> None:
    """B's attention and D's model are observed with values drawn from the grader's seed (not
    the fixed values the notebook's cells give): two seeds, two sets of weights."""
    from course.b_attention import probe as b_probe
    from course.d_language_model import probe as d_probe

    b_ns, d_ns = solutions("b_attention"), solutions("d_language_model")
    for item, ns, key, name in (
        (b_probe.mhsa_hidden, b_ns, "weights", "q_proj.weight"),
        (d_probe.model_hidden, d_ns, "state", "embedding.weight"),
    ):
        cases = "cases" if item is b_probe.mhsa_hidden else "models"
        first, second = (item(ns, seed)[cases][0][key][name] for seed in (1, 2))
        if first.shape == second.shape:
            assert not torch.equal(first, second)
        model = (
            ns["MultiHeadSelfAttention"](*first.shape[1:], 1)
            if item is b_probe.mhsa_hidden
            else ns["TransformerModel"](first.shape[0], first.shape[1], 2, 4, 1)
        )
        randomise_parameters(model, b_checks.RANDOM_VALUES)
        fixed = dict(model.named_parameters())[name]
        assert fixed.shape == first.shape and not torch.equal(fixed, first)
