"""B's checks of multi-head self-attention and cross-attention: the projections, the output
projection, the comparison with PyTorch's ``nn.MultiheadAttention`` given the same weights.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from course.b_attention.attention_checks import (
    K_FROM_DECODER,
    KV_FROM_DECODER,
    NO_OUT_PROJ,
    PROJECTIONS,
    Q_FROM_MEMORY,
    V_FROM_DECODER,
    diagnose_attention_result,
    diagnose_merge_result,
    diagnose_split_result,
)
from course.testcells import (
    GradingError,
    check,
    check_against_reference,
    check_tensor,
    expected_got,
    fail,
    randomise_parameters,
    same_values,
)


# ---------------------------------------------------------------- multi-head self-attention
def diagnose_projections(module: nn.Module, d_model: int) -> None:
    """q_proj, k_proj, v_proj, out_proj must be nn.Linear(d_model, d_model) (with bias); then
    every parameter gets its own random values (:data:`RANDOM_VALUES`), so that the comparisons
    that follow tell one projection, or one bias, from another (an initialisation may give the
    biases equal values)."""
    diagnose_projection_facts(projection_facts(module), d_model)
    randomise_parameters(module, RANDOM_VALUES)


RANDOM_VALUES = 0  # the seed of the values a module's parameters get before it is compared


def linear_facts(layer: object) -> dict[str, object]:
    """What the checks read of a module that should be an nn.Linear: its type, sizes and bias."""
    linear = isinstance(layer, nn.Linear)
    return {
        "linear": linear,
        "type": type(layer).__name__,
        "in": layer.in_features if linear else -1,
        "out": layer.out_features if linear else -1,
        "bias": linear and layer.bias is not None,
    }


def projection_facts(module: nn.Module) -> dict[str, dict[str, object]]:
    """:func:`linear_facts` of the four projections of an attention module."""
    return {part: linear_facts(getattr(module, part, None)) for part in PROJECTIONS}


def diagnose_projection_facts(facts: dict, d_model: int) -> None:
    """:func:`diagnose_projections` on the facts :func:`projection_facts` reads."""
    for part in PROJECTIONS:
        layer = facts[part]
        check(
            layer["linear"] is True,
            f"MultiHeadSelfAttention should have an attribute {part} = nn.Linear(d_model, "
            f"d_model); got {layer['type']}.",
        )
        check(
            (layer["in"], layer["out"]) == (d_model, d_model) and layer["bias"] is True,
            expected_got(
                f"MultiHeadSelfAttention.{part} has the wrong size (one d x d matrix serves all "
                "heads).",
                f"nn.Linear({d_model}, {d_model}, bias=True)",
                f"nn.Linear({layer['in']}, {layer['out']}, bias={layer['bias']})",
            ),
        )


def diagnose_output_projection(module: nn.Module, x: torch.Tensor) -> None:
    """With out_proj set to 0 x + c, every output must be c: the projection is the last step.

    The missing projection is named only when out_proj has no effect at all on the output.
    """
    diagnose_output_projection_result(output_projection_outputs(module, x), tuple(x.shape))


def output_projection_outputs(module: nn.Module, x: torch.Tensor) -> list[object]:
    """The module's outputs on ``x`` with out_proj set to 0 x + c, for the two constants c of
    :func:`projection_constants` (each on a copy of the module, in eval mode)."""
    outputs = []
    for constant in projection_constants(module.out_proj.out_features):
        probe = copy.deepcopy(module).eval()
        with torch.no_grad():
            probe.out_proj.weight.zero_()
            probe.out_proj.bias.copy_(constant.expand_as(probe.out_proj.bias))
            outputs.append(probe(x))
    return outputs


def projection_constants(width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two biases c that :func:`output_projection_outputs` gives out_proj."""
    return torch.linspace(-1.0, 1.0, width), torch.tensor(3.0)


def diagnose_output_projection_result(got: list, shape: tuple[int, ...]) -> None:
    """:func:`diagnose_output_projection` on the outputs :func:`output_projection_outputs`
    returns for an input of ``shape``."""
    seen = []
    for out, constant in zip(got, projection_constants(shape[-1]), strict=True):
        out = check_tensor(out, "MultiHeadSelfAttention(x)", shape=shape)
        seen.append((out.detach().float(), constant.expand(out.shape[-1])))
    (first, constant), (second, _) = seen
    if torch.allclose(first, constant.expand_as(first), atol=1e-6):
        return
    if torch.allclose(first, second, atol=1e-6):
        fail(
            f"MultiHeadSelfAttention: {NO_OUT_PROJ}. Changing out_proj did not change the "
            "output: after merging the heads, apply self.out_proj (it mixes what the heads "
            "found)."
        )
    fail(
        "MultiHeadSelfAttention: out_proj is used, but it is not the last step. With out_proj "
        "set to 0 x + c every output should be exactly c; yours is not. Return "
        "self.out_proj(merge_heads(...)) and nothing after it."
    )


def torch_attention_like(module: nn.Module, nhead: int) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention (batch_first) holding the weights of the student's module."""
    d_model = module.q_proj.in_features
    twin = nn.MultiheadAttention(d_model, nhead, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(
            torch.cat([module.q_proj.weight, module.k_proj.weight, module.v_proj.weight])
        )
        twin.in_proj_bias.copy_(
            torch.cat([module.q_proj.bias, module.k_proj.bias, module.v_proj.bias])
        )
        twin.out_proj.weight.copy_(module.out_proj.weight)
        twin.out_proj.bias.copy_(module.out_proj.bias)
    return twin.eval()


def torch_attention_output(
    twin: nn.MultiheadAttention, x: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """PyTorch's self-attention output for x (B, L, D) with an optional additive float mask."""
    return twin(x, x, x, attn_mask=mask, need_weights=False)[0]


# ---------------------------------------------------------------- cross-attention
def diagnose_cross_attention_result(
    got: object,
    module: nn.Module,
    nhead: int,
    x: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor | None = None,
    name: str = "MultiHeadCrossAttention(x, memory)",
) -> torch.Tensor:
    """Compare ``got`` (what ``module(x, memory)`` returned) with
    ``nn.MultiheadAttention(x, memory, memory)`` holding the weights of ``module``; name the
    mistakes whose output it equals. Returns ``got``.

    A mistake is named only when the mistaken code could run on these inputs and its output
    (computed by PyTorch's module, the inputs moved to other roles) equals ``got``.
    """
    twin, bare = torch_attention_like(module, nhead), _bare_like(module, nhead)
    b, lq, d = x.shape
    with torch.no_grad():
        expected = _cross(twin, x, (memory, memory), mask)
        if _queries_from_memory(got, twin, x, memory, mask):
            fail(f"{name}: {Q_FROM_MEMORY}.")
        mistakes = _cross_attention_mistakes(twin, bare, x, memory, mask)
    if isinstance(got, torch.Tensor) and tuple(got.shape) != (b, lq, d):
        fail(
            expected_got(
                f"{name} has the wrong shape: one output per decoder position (the queries "
                "come from x).",
                (b, lq, d),
                tuple(got.shape),
            )
        )
    check_against_reference(got, expected, name, mistakes, atol=1e-5)
    assert isinstance(got, torch.Tensor)
    return got


def _cross(
    attn: nn.MultiheadAttention,
    q: torch.Tensor,
    kv: tuple[torch.Tensor, torch.Tensor],
    mask: torch.Tensor | None,
) -> torch.Tensor:
    """PyTorch's attention output for the queries ``q`` and the keys and values ``kv``."""
    return attn(q, kv[0], kv[1], attn_mask=mask, need_weights=False)[0]


def _queries_from_memory(
    got: object,
    twin: nn.MultiheadAttention,
    x: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor | None,
) -> bool:
    """Whether ``got`` has one output per memory position and equals attention with the queries
    taken from the memory (told apart only without a mask and when the lengths differ)."""
    b, lq, d = x.shape
    lk = memory.shape[1]
    return (
        isinstance(got, torch.Tensor)
        and tuple(got.shape) == (b, lk, d)
        and lq != lk
        and any(
            same_values(got, _cross(twin, memory, kv, mask), 1e-5, 1e-5)
            for kv in ((x, x), (memory, memory))
            if mask is None
        )
    )


def _bare_like(module: nn.Module, nhead: int) -> nn.MultiheadAttention:
    """:func:`torch_attention_like` with an identity out_proj: attention without it."""
    bare = torch_attention_like(module, nhead)
    with torch.no_grad():
        bare.out_proj.weight.copy_(torch.eye(bare.out_proj.in_features))
        bare.out_proj.bias.zero_()
    return bare


def _cross_attention_mistakes(
    twin: nn.MultiheadAttention,
    bare: nn.MultiheadAttention,
    x: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """The outputs of the mistakes that can run on these inputs, by message (``bare``: the
    attention without out_proj). With equal lengths (``square``) the mask fits every
    arrangement of the inputs."""
    square = x.shape[1] == memory.shape[1]
    mistakes = {}
    if mask is None or square:
        mistakes[KV_FROM_DECODER] = _cross(twin, x, (x, x), mask)
    if square:
        mistakes[Q_FROM_MEMORY] = _cross(twin, memory, (x, x), mask)
        mistakes[Q_FROM_MEMORY + " (and so do the keys and values)"] = _cross(
            twin, memory, (memory, memory), mask
        )
        mistakes[K_FROM_DECODER] = _cross(twin, x, (x, memory), mask)
        mistakes[V_FROM_DECODER] = _cross(twin, x, (memory, x), mask)
    mistakes[NO_OUT_PROJ] = _cross(bare, x, (memory, memory), mask)
    return mistakes


@contextmanager
def explain_parts(
    sdpa: Callable | None = None,
    split: Callable | None = None,
    merge: Callable | None = None,
    self_attn: nn.Module | None = None,
) -> Iterator[None]:
    """On a failed check, add what is wrong in the parts the code under test may rely on."""
    try:
        yield
    except GradingError as error:
        notes = _part_problems(sdpa, split, merge, self_attn)
        if not notes:
            raise
        joined = "\n".join(f"- {note}" for note in notes)
        raise GradingError(
            f"{error}\nThe parts it may be built from have known mistakes; fix them first:\n"
            f"{joined}"
        ) from None


def _part_problems(
    sdpa: Callable | None,
    split: Callable | None,
    merge: Callable | None,
    self_attn: nn.Module | None,
) -> list[str]:
    gen = torch.Generator().manual_seed(0)
    notes = []
    trials: list[tuple[str, Callable[[], None]]] = []
    if sdpa is not None:
        q, k, v = (torch.randn(2, 5, 4, generator=gen) for _ in range(3))
        causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
        for mask in (None, causal):
            trials.append(
                (
                    "scaled_dot_product_attention",
                    lambda m=mask: diagnose_attention_result(sdpa(q, k, v, m), q, k, v, m),
                )
            )
    if split is not None:
        numbered = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
        trials.append(
            ("split_heads", lambda: diagnose_split_result(split(numbered, 2), numbered, 2))
        )
    if merge is not None:
        heads = torch.arange(2 * 2 * 3 * 4, dtype=torch.float32).reshape(2, 2, 3, 4)
        trials.append(("merge_heads", lambda: diagnose_merge_result(merge(heads), heads)))
    if self_attn is not None:
        tokens = torch.randn(2, 3, self_attn.q_proj.in_features, generator=gen)
        trials.append(("self_attn", lambda: diagnose_output_projection(self_attn, tokens)))
    seen = set()
    for part, trial in trials:
        if part in seen:
            continue
        try:
            trial()
        except GradingError as error:
            notes.append(str(error).splitlines()[0])
            seen.add(part)
        except Exception as error:  # the part itself crashes: say so, briefly
            notes.append(f"{part} raised {type(error).__name__}: {error}")
            seen.add(part)
    return notes
