"""Assignment H's checks: the reference passes, every known mistake is named, the references of
the hidden cells and of the judge agree, and the experiment's helpers do what they say."""

from __future__ import annotations

import json
import math

import pytest
import torch

from course import testcells, verify
from course.h_own_gpt import (
    checks,
    experiment,
    probe,
    recipe_checks,
    step_checks,
    token_checks,
)
from judge import core
from judge import h_own_gpt as judge
from tests.conftest import REPO

NOTEBOOK = REPO / "source" / "h_own_gpt" / "own_gpt.ipynb"
HEADER = "import math\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def cells(kind: str) -> list[dict]:
    """The code cells of the instructor's notebook with the given nbgrader role."""
    out = []
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        role = "solution" if meta.get("solution") else "tests" if meta.get("grade") else "other"
        if cell["cell_type"] == "code" and role == kind:
            out.append(cell)
    return out


def reference() -> dict:
    """The instructor's solutions, run in a fresh namespace."""
    ns: dict = {}
    exec(HEADER, ns)
    for cell in cells("solution"):
        exec("".join(cell["source"]), ns)
    return ns


def verdicts(ns: dict, seed: int = 11) -> dict[str, str | None]:
    """Observe ``ns`` as the grader does, and judge the observations."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".pt") as handle:
        verify.observe("h_own_gpt", seed, handle.name, ns)
        return core.verdicts("h_own_gpt", seed, core.load(handle.name))


def with_code(code: str) -> dict:
    ns = reference()
    exec(code, ns)
    return ns


@pytest.mark.parametrize("seed", [0, 5, 123])
def test_the_reference_passes_every_item(seed: int) -> None:
    assert verdicts(reference(), seed) == {name: None for name in probe.CELLS}


def cells_that_pass(ns: dict, test_cells: list[dict], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The grade_ids of ``test_cells`` that run to their end on ``ns`` and say ``passed``."""
    said: list[str] = []
    monkeypatch.setattr(testcells, "passed", said.append)  # what the cells import
    exec(
        "from course.h_own_gpt import checks, recipe_checks, step_checks, token_checks\n"
        "from course.testcells import passed\n",
        ns,
    )
    found = []
    for cell in test_cells:
        before = len(said)
        exec("".join(cell["source"]), ns)
        if len(said) > before:
            found.append(cell["metadata"]["nbgrader"]["grade_id"])
    return found


def test_the_notebooks_test_cells_pass_on_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test cell that the probe declares is in the notebook, runs on the reference and
    ends with its ``passed`` (no cell, or a cell that stops early, is not a pass)."""
    passing = cells_that_pass(reference(), cells("tests"), monkeypatch)
    assert sorted(passing) == sorted(probe.CELLS)
    assert cells_that_pass(reference(), [], monkeypatch) == []  # nothing run: no cell passes


ATTENTION = """
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, nhead, block_size, dropout=0.0):
        super().__init__()
        self.nhead = nhead
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        {TRIL}

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = ({SPLIT} for z in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(d // self.nhead)
        s = s.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))
        return self.proj({MERGE})
"""
TRIL = 'self.register_buffer("tril", torch.ones(block_size, block_size).tril()[None, None])'
SPLIT = "z.view(b, t, self.nhead, -1).transpose(1, 2)"
MERGE = "(s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)"
TRIL_PARAMETER = TRIL.replace('self.register_buffer("tril", ', "self.tril = nn.Parameter(").replace(
    "[None, None])", "[None, None], requires_grad=False)"
)
BLOCK = """
class Block(nn.Module):
    def __init__(self, d_model, nhead, block_size, dropout=0.0):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, nhead, block_size, dropout)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), {ACT},
                                 nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x):
        {FORWARD}
"""
PRE_NORM = "x = x + self.attn(self.ln1(x))\n        return x + self.mlp(self.ln2(x))"
NORMED_STREAM = "x = self.ln1(x)\n        x = x + self.attn(x)\n        x = self.ln2(x)\n" + (
    "        return x + self.mlp(x)"
)
LN1_TWICE = "x = x + self.attn(self.ln1(x))\n        return x + self.mlp(self.ln1(x))"
GPT_INIT = """
_GPT = GPT
class GPT(_GPT):
    def __init__(self, vocab_size, d_model, nhead, nlayers, block_size, dropout=0.0):
        super().__init__(vocab_size, d_model, nhead, nlayers, block_size, dropout)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std={STD})
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.{BIAS}(module.bias)
"""
STEP = """
def train_step(model, optimizer, x, y, step, lr_schedule, grad_clip=1.0):
    {LR}
    {ZERO}
    _, loss = model(x, y)
    loss.backward()
    {CLIP}
    optimizer.step()
    {AFTER}
    return {RETURN}
"""
STEP_PARTS = {
    "LR": "for g in optimizer.param_groups: g['lr'] = lr_schedule(step)",
    "ZERO": "optimizer.zero_grad(set_to_none=True)",
    "CLIP": "if grad_clip is not None: "
    "torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)",
    "AFTER": "pass",
    "RETURN": "loss.item()",
}


def step_code(**changes: str) -> str:
    return STEP.format(**(STEP_PARTS | changes))


GPT_SCALED = """
_GPT = GPT
class GPT(_GPT):
    def forward(self, idx, targets=None):
        x = self.tok_emb(idx) * math.sqrt(self.tok_emb.embedding_dim)
        x = self.drop(x + self.pos_emb(torch.arange(idx.size(1))))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
"""
GROUPS = """
def optimizer_groups(model, weight_decay):
    params = dict(model.named_parameters())
    decay = [p for n, p in params.items() if {RULE}]
    rest = [p for n, p in params.items() if not ({RULE})]
    return [{{"params": decay, "weight_decay": weight_decay}},
            {{"params": rest, "weight_decay": 0.0}}]
"""
LR = """
def lr_at(step, max_lr, warmup_steps, total_steps, min_lr):
    return _schedule(step, max_lr, warmup_steps, total_steps, min_lr, mistake="{M}")
"""
SAMPLE = """
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    first = _distribution(logits[0], temperature, top_k, top_p, mistake={M})
    probs = torch.tensor(first).expand(len(logits), -1)  # every row of the tests is the same
    return torch.multinomial(probs, 1, generator={G}).squeeze(-1)
"""
BPE = """
def bpe_merges(word_counts, num_merges):
    return _merges(word_counts, num_merges, mistake="{M}")
"""
BPE_END_OF_WORD = """
def bpe_merges(word_counts, num_merges):
    marked = {w + "\\t": c for w, c in word_counts.items()}  # one more symbol per word
    out = _merges(marked, num_merges)
    return [(a.replace("\\t", "</w>"), b.replace("\\t", "</w>")) for a, b in out]
"""

MISTAKES = [
    ("attention_head_split", ATTENTION.format(TRIL=TRIL, SPLIT="z.reshape(b, self.nhead, t, -1)",
                                              MERGE="(s.softmax(-1) @ v).reshape(b, t, d)"),
     {"test_attention_visible", "test_attention_hidden"}, checks.HEAD_SPLIT),
    ("attention_tril_parameter",
     ATTENTION.format(TRIL=TRIL_PARAMETER, SPLIT=SPLIT, MERGE=MERGE),
     {"test_attention_visible", "test_attention_hidden"}, "nn.Parameter"),
    ("block_relu", BLOCK.format(ACT="nn.ReLU()", FORWARD=PRE_NORM),
     {"test_block_visible", "test_block_hidden"}, checks.RELU),
    ("block_normed_stream", BLOCK.format(ACT="nn.GELU()", FORWARD=NORMED_STREAM),
     {"test_block_visible", "test_block_hidden"}, checks.NORM_STREAM),
    ("block_ln1_twice", BLOCK.format(ACT="nn.GELU()", FORWARD=LN1_TWICE),
     {"test_block_visible", "test_block_hidden"}, checks.LN1_TWICE),
    ("gpt_scaled", GPT_SCALED, {"test_gpt_visible", "test_gpt_hidden"}, checks.EMB_SCALED),
    ("gpt_init_unscaled", GPT_INIT.format(STD="0.02", BIAS="zeros_"),
     {"test_gpt_visible", "test_gpt_hidden"}, checks.NO_RESIDUAL_SCALING),
    ("gpt_init_default", "_GPT = GPT\nclass GPT(_GPT):\n    def __init__(self, *a):\n"
     "        super().__init__(*a)\n        torch.manual_seed(0)\n"
     "        for m in self.modules():\n            if hasattr(m, 'reset_parameters'):\n"
     "                m.reset_parameters()\n",
     {"test_gpt_visible", "test_gpt_hidden"}, checks.NO_INIT),
    ("gpt_init_bias", GPT_INIT.format(STD="0.02", BIAS="ones_"),
     {"test_gpt_visible", "test_gpt_hidden"}, checks.BIAS_NOT_ZERO),
    ("step_lr_not_set", step_code(LR="pass"), {"test_step_visible", "test_step_hidden"},
     step_checks.LR_NOT_SET),
    ("step_lr_one_group", step_code(LR="optimizer.param_groups[0]['lr'] = lr_schedule(step)"),
     {"test_step_visible", "test_step_hidden"}, step_checks.LR_ONE_GROUP),
    ("step_no_zero_grad", step_code(ZERO="pass"), {"test_step_visible", "test_step_hidden"},
     step_checks.NO_ZERO_GRAD),
    ("step_zero_after_backward", step_code(ZERO="pass", CLIP="optimizer.zero_grad()"),
     {"test_step_visible", "test_step_hidden"}, step_checks.ZEROED_AFTER_BACKWARD),
    ("step_clip_after", step_code(CLIP="pass", AFTER=STEP_PARTS["CLIP"]),
     {"test_step_visible", "test_step_hidden"}, step_checks.CLIP_AFTER_STEP),
    ("step_no_clip", step_code(CLIP="pass"), {"test_step_visible", "test_step_hidden"},
     step_checks.NO_CLIP),
    ("step_clip_by_value",
     step_code(CLIP="torch.nn.utils.clip_grad_value_(model.parameters(), grad_clip or 1e9)"),
     {"test_step_visible", "test_step_hidden"}, step_checks.CLIP_BY_VALUE),
    ("step_returns_tensor", step_code(RETURN="loss.detach()"),
     {"test_step_visible", "test_step_hidden"}, step_checks.RETURNS_TENSOR),
    ("groups_all", GROUPS.format(RULE="True"), {"test_groups_visible", "test_groups_hidden"},
     recipe_checks.ALL_DECAY),
    ("groups_embeddings", GROUPS.format(RULE="p.dim() >= 2 and 'emb' not in n"),
     {"test_groups_visible", "test_groups_hidden"}, recipe_checks.EMBEDDING_NO_DECAY),
] + [
    (f"lr_{m}", LR.format(M=m), {"test_lr_visible", "test_lr_hidden"},
     getattr(recipe_checks, m))
    for m in ("COSINE_TO_ZERO", "PROGRESS_FROM_START", "NO_FLOOR")
] + [
    (f"sample_{m}", SAMPLE.format(M=f'"{m}"', G="generator"), {"test_sample_hidden"},
     getattr(recipe_checks, m))
    for m in ("TOP_P_ON_ALL",)
] + [
    ("sample_temperature_after", SAMPLE.format(M='"TEMPERATURE_AFTER"', G="generator"),
     {"test_sample_visible", "test_sample_hidden"}, recipe_checks.TEMPERATURE_AFTER),
    ("sample_global", SAMPLE.format(M="None", G="None"),
     {"test_sample_visible", "test_sample_hidden"}, recipe_checks.GLOBAL_GENERATOR),
    ("bpe_not_weighted", BPE.format(M="NOT_WEIGHTED"), {"test_bpe_visible", "test_bpe_hidden"},
     recipe_checks.NOT_WEIGHTED),
    ("bpe_end_of_word", BPE_END_OF_WORD, {"test_bpe_visible", "test_bpe_hidden"},
     recipe_checks.END_OF_WORD),
] + [
    (f"bpe_{m}", BPE.format(M=m), {"test_bpe_hidden"}, getattr(recipe_checks, m))
    for m in ("NON_OVERLAPPING_COUNT", "STRING_REPLACE")
]  # fmt: skip


@pytest.mark.parametrize(
    ("code", "failed", "message"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_each_mistake_is_named_and_costs_its_tests_only(
    code: str, failed: set[str], message: str
) -> None:
    helpers = {
        "_schedule": judge.schedule,
        "_distribution": judge.distribution,
        "_merges": judge.merges,
    }
    ns = reference() | helpers
    exec(code, ns)
    got = verdicts(ns)
    lost = {name for name, reason in got.items() if reason}
    assert lost == failed, got
    for name in failed:
        assert message[:40] in got[name], (name, got[name])


# Correct training steps written otherwise: the gradients zeroed in place (by the optimizer, or
# tensor by tensor), dropped by hand, or zeroed through the model. Every one earns every point.
CORRECT_STEPS = {
    "zero_in_place": step_code(ZERO="optimizer.zero_grad(set_to_none=False)"),
    "grad_zero_": step_code(
        ZERO="for p in model.parameters():\n        if p.grad is not None: p.grad.zero_()"
    ),
    "grad_none": step_code(ZERO="for p in model.parameters(): p.grad = None"),
    "model_zero_grad": step_code(ZERO="model.zero_grad()"),
    "clip_returns_norm": step_code(
        CLIP="norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) "
        "if grad_clip is not None else None"
    ),
}


@pytest.mark.parametrize("code", CORRECT_STEPS.values(), ids=CORRECT_STEPS.keys())
def test_correct_training_steps_earn_every_point(code: str) -> None:
    got = verdicts(with_code(code), seed=17)
    assert all(reason is None for reason in got.values()), got
    ns = with_code(code)  # the notebook's own test cells, in the kernel, agree
    exec("from course.h_own_gpt import step_checks", ns)
    step_checks.diagnose_train_step(ns["train_step"], [step_checks.STEP_VISIBLE])
    step_checks.diagnose_train_step(ns["train_step"], step_checks.step_cases(2024))


def hidden_helpers() -> dict:
    """The references that the notebook's hidden cells define inline."""
    ns: dict = {}
    exec(HEADER, ns)
    for cell in cells("tests"):
        source = "".join(cell["source"])
        if "def _" in source:
            defs = source[source.index("def _") : source.rindex("\n\n\n")]
            exec(defs, ns)
    return ns


def test_the_hidden_cells_and_the_judge_share_their_references() -> None:
    ns = hidden_helpers()
    for case in recipe_checks.lr_cases(4):
        args = (case["max_lr"], case["warmup_steps"], case["total_steps"], case["min_lr"])
        for mistake in (None, *judge.LR_MISTAKES):
            for step in case["steps"]:
                assert ns["_schedule"](step, *args, mistake) == judge.schedule(step, *args, mistake)
    for case in token_checks.sample_cases(4):
        args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
        for mistake in (None, *token_checks.SAMPLE_MISTAKES):
            assert ns["_distribution"](*args, mistake) == judge.distribution(*args, mistake)
    for counts, n in token_checks.bpe_cases(4):
        for mistake in (None, *judge.BPE_MISTAKES):
            assert ns["_merges"](counts, n, mistake) == judge.merges(counts, n, mistake)


def test_the_visible_constants_follow_the_reference() -> None:
    counts, n = token_checks.BPE_VISIBLE
    assert judge.merges(counts, n) == token_checks.BPE_VISIBLE_MERGES
    for mistake, wrong in token_checks.BPE_VISIBLE_MISTAKES.items():
        assert judge.merges(counts, n, mistake) == wrong
    for case, probs, wrong in zip(
        token_checks.sample_visible_cases(),
        token_checks.VISIBLE_PROBABILITIES,
        token_checks.VISIBLE_MISTAKES,
        strict=True,
    ):
        args = (case["logits"], case["temperature"], case["top_k"], case["top_p"])
        assert torch.allclose(torch.tensor(judge.distribution(*args)), torch.tensor(probs))
        for mistake, values in wrong.items():
            got = torch.tensor(judge.distribution(*args, mistake))
            assert torch.allclose(got, torch.tensor(values)), mistake


def test_hugging_face_learns_the_same_first_merges_and_encodes_like_apply_merges() -> None:
    lines, _ = experiment.shakespeare_lines(200)
    ours = judge.merges(experiment.word_counts(lines), 15)
    tokenizer = experiment.train_hf_bpe(lines, 15)
    theirs = experiment.hf_merges(tokenizer)
    assert len(theirs) == 15
    assert experiment.compare_merges(ours, theirs)["same_prefix"] >= 10
    for word in experiment.words_of(lines[:20]):
        pieces = experiment.apply_merges(word, theirs)
        assert pieces == tokenizer.encode(word.lstrip(experiment.SPACE)).tokens
    text = lines[:5]
    assert tokenizer.decode(experiment.encode(tokenizer, text).tolist()) == "\n".join(text)


def test_the_compared_models_have_the_same_parameter_count() -> None:
    ns = reference()
    for vocab, d, layers, block in ((366, 64, 4, 64), (80, 16, 2, 16)):
        gpt = ns["GPT"](vocab, d, 4, layers, block)
        d_hid = experiment.matching_d_hid(vocab, d, layers, block)
        layer = torch.nn.TransformerEncoderLayer(d, 4, d_hid, batch_first=True)
        d_count = 2 * vocab * d + vocab + layers * sum(p.numel() for p in layer.parameters())
        gpt_count = sum(p.numel() for p in gpt.parameters())
        assert gpt_count == checks.gpt_parameters(vocab, d, layers, block)
        assert abs(d_count - gpt_count) <= layers * (2 * d + 1), (d_count, gpt_count)


def test_gpt2_init_brings_the_first_loss_near_log_v() -> None:
    ns = reference()
    torch.manual_seed(0)
    model = ns["GPT"](100, 32, 4, 2, 16)
    idx = torch.randint(100, (4, 16))
    _, loss = model(idx, idx)
    assert abs(loss.item() - math.log(100)) < 0.5  # N(0, 1) embeddings: about 6 above


def test_windows_shift_the_targets_by_one() -> None:
    stream = torch.arange(100)
    x, y = experiment.windows(stream, 8, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 8) and torch.equal(y, x + 1)
    x, y = experiment.fixed_windows(stream, 8, 5)
    assert torch.equal(y, x + 1) and x[0, 0] == 0 and y[-1, -1] == 99
