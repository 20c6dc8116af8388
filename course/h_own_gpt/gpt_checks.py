"""Checks of assignment H's GPT: its parts, its logits by value, causality, the loss, the init.

The kernel builds the student's GPT under a seed, reads the spread of every parameter as
``__init__`` left it (:mod:`course.h_own_gpt.init_checks`), gives every parameter its own random
values and records the weights, the logits and the loss on token ids drawn from a seed, the
logits when the tokens from one position on change, and the chain of hidden states that the
model's own blocks give when run in order on the embeddings (:func:`observe_gpt`).

The verdict (:func:`judge_gpt`) rebuilds the logits from the recorded weights alone with
PyTorch's operations (:func:`gpt_from`: the embeddings, every block by
:func:`course.h_own_gpt.block_checks.block_from`, ``ln_f``, the tied head), on models of 0 to 3
blocks, and names the mistakes of ``forward`` (the blocks skipped, run once, in reverse order,
``ln_f`` misplaced...). When the logits match the reference, the logits before the changed
position must not have changed (causality). When they do not, but they are exactly the right
composition of the student's own blocks (the recorded chain, whose first state must be the
reference embeddings), the GPT passes: the mistake is in Block or CausalSelfAttention, whose
own tests cost the points, so that one mistake costs the tests of one exercise.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course.h_own_gpt.block_checks import (
    block_from,
    module_weights,
    norm_from,
    observed,
    part,
)
from course.h_own_gpt.init_checks import initial_spreads, judge_initialisation
from course.probing import attempt, integer
from course.testcells import (
    GradingError,
    check,
    check_against_reference,
    check_close,
    expected_got,
    fail,
    randomise_parameters,
    same_values,
)

# ---------------------------------------------------------------- the mistakes, named
NO_LN_F = "there is no final LayerNorm: apply ln_f to the last block's output before the head."
EMB_SCALED = (
    "the token embedding is multiplied by sqrt(d_model) (D's habit); GPT adds the token and "
    "position embeddings as they are."
)
LOSS_SHIFTED = (
    "the loss shifts the targets inside the model (logits[:, :-1] against targets[:, 1:]). The "
    "data step already shifted them: compare the logits at every position with targets at the "
    "same position."
)
NO_POSITIONS = (
    "the position embeddings are not added: without pos_emb(0..T-1) the model cannot tell the "
    "order of the tokens. x = tok_emb(idx) + pos_emb(torch.arange(T))."
)
BLOCKS_SKIPPED = (
    "forward never runs the blocks: the logits come from the embeddings alone. Run every block "
    "in order, each on the previous one's output (for block in self.blocks: x = block(x)), "
    "then ln_f and the head."
)
FIRST_BLOCK_ONLY = (
    "only the first block runs (a return or break inside the loop, or self.blocks[0](x)): every "
    "block must run, in order, each on the previous one's output."
)
LAST_BLOCK_ONLY = (
    "only the last block's output reaches the head: each block was given the embeddings, not the "
    "previous block's output. Chain them: x = block(x)."
)
BLOCKS_REVERSED = (
    "the blocks run in reverse order: blocks[0] takes the embeddings, blocks[-1] gives ln_f "
    "its input."
)
BLOCKS_ORDER = (
    "the blocks run in another order ({order}): blocks[0] takes the embeddings, then each block "
    "the previous one's output, in the order of self.blocks."
)
LN_F_FIRST = (
    "ln_f is applied before the blocks. It is the final LayerNorm: it normalises the last "
    "block's output, just before the head."
)
LN_F_EACH = (
    "ln_f is applied after every block. It runs once, after the last block (inside, each block "
    "normalises its branches' inputs with ln1 and ln2)."
)
BLOCK_RESIDUAL = (
    "each block's output is added to its input (x = x + block(x)), but the block already adds "
    "its branches to the stream: x = block(x)."
)
HEAD_FIRST = "the head is applied before ln_f: the logits are head(ln_f(x)), not ln_f(head(x))."
BLOCK_HINT = (
    "inside this GPT, your blocks give other values than H's Block on the same weights: fix "
    "Block (and CausalSelfAttention) first, their tests say what is wrong."
)


# ---------------------------------------------------------------- inputs drawn from a seed
def _sizes(gen: torch.Generator) -> list[tuple[int, int, int, int, int]]:
    """(vocab, d_model, nhead, nlayers, block_size) of the hidden GPTs: 0 to 3 blocks, then
    one wide enough (D * D >= 1024) for the initial spreads to tell 0.02 from the scaled std."""
    sizes = []
    for nlayers in range(4):
        nhead = integer(gen, 1, 4)
        low = max(2, -(-6 // nhead))  # D >= 6: ln_f of 2 features gives only +-1 whatever comes
        width = nhead * integer(gen, low, low + 4)
        sizes.append((integer(gen, 5, 41), width, nhead, nlayers, integer(gen, 4, 11)))
    nhead = integer(gen, 1, 5)
    width = nhead * -(-integer(gen, 32, 49) // nhead)
    sizes.append((integer(gen, 40, 101), width, nhead, integer(gen, 1, 4), integer(gen, 8, 17)))
    return sizes


def gpt_cases(seed: int, hidden: bool) -> list[dict]:
    """Sizes, module seed, token ids, targets and changed ids of each GPT checked.

    Visible: GPT(11, 8, 2, 0, 6), GPT(13, 8, 2, 2, 6) and GPT(64, 32, 2, 2, 16). Hidden: 0, 1,
    2 and 3 blocks (the 3-block one on T = block_size), then a wide one of 1 to 3 blocks. The
    changed ids are the ids with every token from a position ``change_from`` on replaced."""
    gen = torch.Generator().manual_seed(seed if hidden else 3)
    sizes = _sizes(gen) if hidden else [(11, 8, 2, 0, 6), (13, 8, 2, 2, 6), (64, 32, 2, 2, 16)]
    cases = []
    for vocab, d, nhead, nlayers, block in sizes:
        length = block - 1
        if hidden:
            length = block if len(cases) == 3 else integer(gen, 2, block + 1)
        batch = integer(gen, 1, 4) if hidden else 2
        idx = torch.randint(vocab, (batch, length), generator=gen)
        start = integer(gen, 1, length)
        changed = idx.clone()
        changed[:, start:] = (idx[:, start:] + torch.randint(1, vocab, (1,), generator=gen)) % vocab
        cases.append(
            {
                "vocab_size": vocab,
                "d_model": d,
                "nhead": nhead,
                "nlayers": nlayers,
                "block_size": block,
                "seed": integer(gen, 0, 10_001),
                "idx": idx,
                "targets": torch.randint(vocab, (batch, length), generator=gen),
                "changed": changed,
                "change_from": start,
            }
        )
    return cases


# ---------------------------------------------------------------- observing
def _chain(model: nn.Module, idx: torch.Tensor) -> list[torch.Tensor]:
    """The embeddings, then what each of the model's blocks gives in turn (eval, no grad)."""
    states = [model.tok_emb(idx) + model.pos_emb(torch.arange(idx.size(1)))]
    for block in model.blocks:
        states.append(block(states[-1]))
    return states


def _gpt_facts(model: nn.Module) -> dict:
    head, emb = getattr(model, "head", None), getattr(model, "tok_emb", None)
    pos = getattr(model, "pos_emb", None)
    return {
        "tied": head is not None and emb is not None and head.weight is emb.weight,
        "head_bias": getattr(head, "bias", None) is not None,
        "pos": list(pos.weight.shape) if isinstance(pos, nn.Embedding) else None,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def observe_gpt(cls: Callable[..., nn.Module], case: dict) -> dict:
    """Build ``cls(vocab_size, d_model, nhead, nlayers, block_size)``; observe it."""
    torch.manual_seed(case["seed"])
    keys = ("vocab_size", "d_model", "nhead", "nlayers", "block_size")
    model = cls(*(case[k] for k in keys))
    spreads = initial_spreads(model)  # before the values are replaced
    randomise_parameters(model, case["seed"])
    got: dict = {
        "spreads": spreads,
        "facts": _gpt_facts(model),
        "weights": module_weights(model, gpt_weight_names(case["nlayers"])),
    }
    model.eval()
    idx, targets = case["idx"], case["targets"]
    with torch.no_grad():
        got["logits"], got["loss"] = model(idx, targets)
        _, got["loss_none"] = model(idx)
        got["changed"] = model(case["changed"])[0]
        got["chain"] = attempt(_chain, model, idx)
    return got


def gpt_weight_names(nlayers: int) -> tuple[str, ...]:
    """The names of the weights the verdict rebuilds a GPT of ``nlayers`` blocks from."""
    names = ["tok_emb.weight", "pos_emb.weight", "ln_f.weight", "ln_f.bias"]
    for i in range(nlayers):
        for sub in ("ln1", "ln2", "attn.qkv", "attn.proj", "mlp.0", "mlp.2"):
            names += [f"blocks.{i}.{sub}.weight", f"blocks.{i}.{sub}.bias"]
    return tuple(names)


# ---------------------------------------------------------------- the logits from the weights
def embed_from(weights: dict, idx: torch.Tensor, scale: float = 1.0, positions: bool = True):
    """The token embeddings (times ``scale``) plus the position embeddings: (B, T, D)."""
    x = weights["tok_emb.weight"][idx] * scale
    return x + weights["pos_emb.weight"][: idx.size(1)] if positions else x


def blocks_from(weights: dict, x: torch.Tensor, nhead: int, order: list[int]) -> torch.Tensor:
    """x through the blocks numbered ``order``, in that order, each on the previous output."""
    for i in order:
        x = block_from(part(weights, f"blocks.{i}."), x, nhead)
    return x


def head_from(weights: dict, x: torch.Tensor, final: bool = True) -> torch.Tensor:
    """ln_f (unless not ``final``), then the tied head: (B, T, V)."""
    if final:
        x = norm_from(weights, "ln_f", x)
    return x @ weights["tok_emb.weight"].T


def gpt_from(weights: dict, idx: torch.Tensor, nhead: int, nlayers: int) -> torch.Tensor:
    """H's GPT's logits from its weights alone."""
    x = blocks_from(weights, embed_from(weights, idx), nhead, list(range(nlayers)))
    return head_from(weights, x)


def _gpt_mistakes(weights: dict, idx: torch.Tensor, case: dict) -> dict[str, torch.Tensor]:
    """What each named mistake of GPT.forward gives (with H's blocks on the same weights)."""
    nhead, nlayers, d = case["nhead"], case["nlayers"], case["d_model"]
    order = list(range(nlayers))
    h0 = embed_from(weights, idx)
    out = blocks_from(weights, h0, nhead, order)
    mistakes = {
        NO_POSITIONS: head_from(
            weights, blocks_from(weights, embed_from(weights, idx, 1.0, False), nhead, order)
        ),
        EMB_SCALED: head_from(
            weights, blocks_from(weights, embed_from(weights, idx, math.sqrt(d)), nhead, order)
        ),
        NO_LN_F: head_from(weights, out, final=False),
    }
    if nlayers >= 1:
        mistakes[BLOCKS_SKIPPED] = head_from(weights, h0)
        normed = norm_from(weights, "ln_f", h0)
        mistakes[LN_F_FIRST] = head_from(weights, blocks_from(weights, normed, nhead, order), False)
        x = h0
        for i in order:
            x = x + blocks_from(weights, x, nhead, [i])
        mistakes[BLOCK_RESIDUAL] = head_from(weights, x)
    if nlayers >= 2:
        mistakes[FIRST_BLOCK_ONLY] = head_from(weights, blocks_from(weights, h0, nhead, [0]))
        mistakes[LAST_BLOCK_ONLY] = head_from(weights, blocks_from(weights, h0, nhead, order[-1:]))
        mistakes[BLOCKS_REVERSED] = head_from(weights, blocks_from(weights, h0, nhead, order[::-1]))
        for other in itertools.permutations(order):
            if list(other) not in (order, order[::-1]):
                said = BLOCKS_ORDER.format(order=", ".join(f"blocks[{i}]" for i in other))
                mistakes[said] = head_from(weights, blocks_from(weights, h0, nhead, list(other)))
        x = h0
        for i in order:
            x = norm_from(weights, "ln_f", blocks_from(weights, x, nhead, [i]))
        mistakes[LN_F_EACH] = head_from(weights, x, final=False)
    if case["vocab_size"] == d:
        mistakes[HEAD_FIRST] = norm_from(weights, "ln_f", head_from(weights, out, final=False))
    return mistakes


# ---------------------------------------------------------------- judging the observations
def gpt_parameters(vocab: int, d: int, nlayers: int, block: int) -> int:
    """The parameters of a GPT with a tied head (C's formulas, each matrix counted once)."""
    per_block = 12 * d * d + 13 * d  # qkv, proj, two MLP matrices and their biases, two norms
    return vocab * d + block * d + nlayers * per_block + 2 * d


def _gpt_name(case: dict) -> str:
    keys = ("vocab_size", "d_model", "nhead", "nlayers", "block_size")
    return "GPT(" + ", ".join(f"{k}={case[k]}" for k in keys) + ")"


def _judge_facts(facts: dict, case: dict, name: str) -> None:
    """Tying, the head's bias, learned positions and the number of parameters."""
    vocab, d, nlayers, block = (case[k] for k in ("vocab_size", "d_model", "nlayers", "block_size"))
    check(
        facts["tied"],
        f"{name}: head.weight is not tok_emb.weight. Tie them (self.head.weight = "
        "self.tok_emb.weight): one tensor, not a copy of its values.",
    )
    check(not facts["head_bias"], f"{name}: the head has a bias; use nn.Linear(D, V, bias=False).")
    check(
        facts["pos"] == [block, d],
        expected_got(
            f"{name}: pos_emb should be nn.Embedding(block_size, d_model), learned positions.",
            [block, d],
            facts["pos"],
        ),
    )
    count = gpt_parameters(vocab, d, nlayers, block)
    check(
        facts["parameters"] == count,
        expected_got(f"{name} has the wrong number of parameters.", count, facts["parameters"]),
    )


ATOL = RTOL = 1e-4  # the logits of up to 3 blocks, computed in another order of operations


def _own_blocks_composed(got: dict, weights: dict, case: dict) -> bool:
    """Whether the logits are ln_f and the head on the last state of the recorded chain of the
    student's own blocks, whose first state is the reference embeddings."""
    chain, logits = got.get("chain"), got["logits"]
    if not isinstance(chain, list) or len(chain) != case["nlayers"] + 1:
        return False
    h0 = embed_from(weights, case["idx"])
    if not all(isinstance(s, torch.Tensor) and s.shape == h0.shape for s in chain):
        return False
    return same_values(chain[0], h0, ATOL, RTOL) and same_values(
        logits, head_from(weights, chain[-1]), ATOL, RTOL
    )


def _blocks_differ(got: dict, weights: dict, case: dict) -> bool:
    """Whether the student's blocks, in the recorded chain, give other values than H's Block."""
    chain = got.get("chain")
    if not isinstance(chain, list) or len(chain) != case["nlayers"] + 1:
        return False
    for i, (before, after) in enumerate(zip(chain, chain[1:], strict=False)):
        expected = blocks_from(weights, before, case["nhead"], [i])
        if isinstance(after, torch.Tensor) and not same_values(after, expected, ATOL, RTOL):
            return True
    return False


def _judge_logits(got: dict, case: dict, name: str) -> None:
    """The logits against the reference from the weights (mistakes named), then causality."""
    weights, idx, logits = got["weights"], case["idx"], got["logits"]
    missing = [n for n in gpt_weight_names(case["nlayers"]) if n not in weights]
    check(
        not missing,
        f"{name} has no {missing[:3]}: keep the names tok_emb, pos_emb, blocks, ln_f, and in "
        "each block ln1, attn (qkv, proj), ln2, mlp.",
    )
    with torch.no_grad():
        reference = gpt_from(weights, idx, case["nhead"], case["nlayers"])
        if not same_values(logits, reference, ATOL, RTOL):
            if _own_blocks_composed(got, weights, case):
                return  # the blocks' mistake: their own tests cost the points
            mistakes = _gpt_mistakes(weights, idx, case)
            try:
                check_against_reference(
                    logits, reference, f"{name}: the logits", mistakes, ATOL, RTOL
                )
            except GradingError as error:
                if _blocks_differ(got, weights, case):
                    fail(f"{error}\nHint: {BLOCK_HINT}")
                raise
    start = case["change_from"]
    check_close(
        got["changed"][:, :start],
        logits[:, :start],
        f"{name}: the logits at positions before {start} when only the tokens from position "
        f"{start} on change",
        ATOL,
        RTOL,
        hint="position t may see the tokens 0..t only (causality): the blocks' attention masks "
        "the future, and nothing else in forward mixes positions.",
    )


def judge_gpt(got: object, case: dict) -> None:
    """Tying, the positions, the logits by value (causality too when they are the reference's),
    the loss and the initialisation of GPT."""
    name = _gpt_name(case)
    got = observed(got, name)
    _judge_facts(got["facts"], case, name)
    idx, targets, vocab = case["idx"], case["targets"], case["vocab_size"]
    logits = got["logits"]
    shape = (*idx.shape, vocab)
    check(
        isinstance(logits, torch.Tensor) and tuple(logits.shape) == shape,
        expected_got(f"{name}: the logits have the wrong shape.", shape, _shape(logits)),
    )
    _judge_logits(got, case, name)
    check(got["loss_none"] is None, f"{name}(idx) without targets should return loss None.")
    loss = got["loss"]
    check(
        isinstance(loss, torch.Tensor) and loss.dim() == 0,
        expected_got(f"{name}: the loss should be a scalar tensor.", "shape ()", _shape(loss)),
    )
    with torch.no_grad():
        flat = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        shifted = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), targets[:, 1:].reshape(-1))
    check_against_reference(
        loss, flat, f"{name}: the loss", {LOSS_SHIFTED: shifted}, atol=1e-5, rtol=1e-4
    )
    judge_initialisation(got["spreads"], case)


def _shape(value: object) -> object:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__


def diagnose_gpt(cls: Callable[..., nn.Module], cases: list[dict]) -> None:
    """Build, observe and judge GPT on each case (a test cell)."""
    for case in cases:
        judge_gpt(observe_gpt(cls, case), case)
