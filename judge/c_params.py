"""Assignment C's verdicts: the four counts and the KV cache, checked on observations.

The true counts of the small sizes come from PyTorch modules built here (as the notebook's tests
build them), those of the sizes too large to build from the closed forms below, which are checked
against PyTorch on every small size first. The KV cache's bytes come from its key and value
tensors built on the meta device (as the notebook's tests build them), checked against
:func:`reference_kv_cache`. The named mistakes are the notebook's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from course.c_params import checks, probe
from course.testcells import check

# ---------------------------------------------------------------- references (trusted side only)


def reference_embedding(ntokens: int, d_model: int) -> int:
    return ntokens * d_model


def reference_layer(d_model: int, nhead: int, d_hid: int) -> int:
    return 4 * d_model * d_model + 4 * d_model + 2 * d_model * d_hid + d_hid + 5 * d_model


def reference_base(ntokens: int, d_model: int, nhead: int, d_hid: int, nlayers: int) -> int:
    return ntokens * d_model + nlayers * reference_layer(d_model, nhead, d_hid)


def reference_head(d_model: int, n_out: int) -> int:
    return d_model * n_out + n_out


REFERENCES = {"embedding": reference_embedding, "head": reference_head}  # one-module counts


def reference_kv_cache(
    nlayers: int, d_model: int, seq_len: int, batch: int, bytes_per_value: int = 2
) -> int:
    return 2 * nlayers * seq_len * batch * d_model * bytes_per_value


def layer_mistakes(d_model: int, nhead: int, d_hid: int) -> dict[str, int]:
    """What each mistake named by the hidden test of count_encoder_layer gives."""
    true = reference_layer(d_model, nhead, d_hid)
    attention = 4 * d_model * d_model + 4 * d_model
    return {
        checks.HARD_CODED: 242_000,
        checks.HEADS: true + (nhead - 1) * attention,
        checks.HEADS_QKV: true + (nhead - 1) * 3 * (d_model * d_model + d_model),
        checks.BIASES: true - 4 * d_model - d_hid - d_model,
        checks.FFN_BIASES: true - d_hid - d_model,
        checks.ALL_BIASES: true - 4 * d_model - d_hid - d_model - 2 * d_model,
        checks.LAYERNORM: true - 4 * d_model,
        checks.ATTENTION_BIASES: true - 4 * d_model,
        checks.LAYERNORM_BIAS: true - 2 * d_model,
        checks.D_HID: reference_layer(d_model, nhead, d_model),
    }


def base_mistakes(
    ntokens: int, d_model: int, nhead: int, d_hid: int, nlayers: int
) -> dict[str, int]:
    """What each mistake named by the hidden test of count_base gives."""
    true = reference_base(ntokens, d_model, nhead, d_hid, nlayers)
    attention = 4 * d_model * d_model + 4 * d_model
    return {
        checks.HARD_CODED: 10_968_200,
        checks.POSITIONAL: true + 5000 * d_model,
        checks.HEADS: true + nlayers * (nhead - 1) * attention,
        checks.HEADS_QKV: true + nlayers * (nhead - 1) * 3 * (d_model * d_model + d_model),
        checks.BIASES: true - nlayers * (5 * d_model + d_hid),
        checks.FFN_BIASES: true - nlayers * (d_model + d_hid),
        checks.ALL_BIASES: true - nlayers * (7 * d_model + d_hid),
        checks.LAYERNORM: true - nlayers * 4 * d_model,
        checks.ATTENTION_BIASES: true - nlayers * 4 * d_model,
        checks.LAYERNORM_BIAS: true - nlayers * 2 * d_model,
        checks.D_HID: reference_base(ntokens, d_model, nhead, d_model, nlayers),
        checks.ONE_LAYER: reference_base(ntokens, d_model, nhead, d_hid, 1),
        checks.NO_EMBEDDING: true - ntokens * d_model,
        checks.EMBEDDING_BIAS: true + d_model,
    }


HEAD_HARD_CODED = f"{checks.HARD_CODED} (10,050,201 is the language model's head.)"


def head_mistakes(d_model: int, n_out: int) -> dict[str, int]:
    """What each mistake named by the hidden test of count_head gives."""
    return {
        checks.HARD_CODED: 402,
        HEAD_HARD_CODED: 10_050_201,
        checks.HEAD_BIAS: d_model * n_out,
        "the bias has n_out entries (one per output), not d_model.": d_model * n_out + d_model,
    }


class Positions(nn.Module):
    """A positional-encoding table as a buffer (as the hidden test's base holds one)."""

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        self.register_buffer("pe", torch.zeros(max_len, d_model))


def real_base(ntokens: int, d_model: int, nhead: int, d_hid: int, nlayers: int) -> nn.Module:
    """The base built with PyTorch: embedding, a buffer of positions, the stack."""
    return nn.ModuleDict(
        {
            "embedding": nn.Embedding(ntokens, d_model),
            "pos_encoder": Positions(d_model),
            "transformer_encoder": nn.TransformerEncoder(
                checks.encoder_layer(d_model, nhead, d_hid), nlayers, enable_nested_tensor=False
            ),
        }
    )


def _listed(got: object, count: int, what: str) -> list:
    check(isinstance(got, list) and len(got) == count, f"not one {what} per size")
    assert isinstance(got, list)
    return got


def _hidden(got: object, heads: bool = False) -> dict:
    assert isinstance(got, dict)
    keys = {"trials", "huge"} | ({"heads"} if heads else set())
    check(set(got) == keys, "the observation of the hidden test is incomplete")
    return got


def _independent_of_heads(got: object, d_model: int, name: str) -> None:
    """As checks.diagnose_independent_of_heads, on the counts observed for each nhead."""
    heads = checks.heads_of(d_model)
    values = _listed(got, len(heads), "count")
    read = {h: checks.as_count(v, name) for h, v in zip(heads, values, strict=True)}
    checks.diagnose_independent_of_heads_result(read, d_model, name)


# ---------------------------------------------------------------- the embedding
def embedding_visible(seed: int, got: object) -> None:
    small, example = _listed(got, 2, "count")
    checks.check_count(
        small,
        checks.parameter_count(nn.Embedding(11, 3)),
        "count_embedding(11, 3)",
        {checks.HARD_CODED: 10_000_200},
    )
    checks.check_count(example, 10_000_200, "count_embedding(50001, 200)")


def _module_counts(seed: int, got: object, name: str, module: type, mistakes: Callable) -> None:
    """The hidden test of ``count_<name>(a, b)`` for a one-module count (the embedding, the
    head): each random size against PyTorch's ``module(a, b)`` (and the reference answer), then
    the huge size. ``mistakes(a, b, true)`` names the wrong counts."""
    seen = _hidden(got)
    sizes = getattr(probe, f"{name}_sizes")(seed)
    reference = REFERENCES[name]
    for (a, b), value in zip(sizes, _listed(seen["trials"], len(sizes), "count"), strict=True):
        true = checks.parameter_count(module(a, b))
        check(true == reference(a, b), f"internal: reference {name}")
        checks.check_count(value, true, f"count_{name}({a}, {b})", mistakes(a, b, true))
    huge = probe.huge_sizes(seed)[name]
    checks.check_count(
        seen["huge"], reference(*huge), f"count_{name}{huge}", mistakes(*huge, reference(*huge))
    )


def embedding_hidden(seed: int, got: object) -> None:
    _module_counts(seed, got, "embedding", nn.Embedding, _embedding_mistakes)


def _embedding_mistakes(ntokens: int, d_model: int, true: int) -> dict:
    return {checks.HARD_CODED: 10_000_200, checks.EMBEDDING_BIAS: true + d_model}


# ---------------------------------------------------------------- one encoder layer
def layer_visible(seed: int, got: object) -> None:
    small, example = _listed(got, 2, "count")
    checks.check_count(
        small,
        checks.parameter_count(checks.encoder_layer(8, 2, 32)),
        "count_encoder_layer(8, 2, 32)",
        {checks.HARD_CODED: 242_000, **checks.layer_mistakes(8, 2, 32)},
    )
    checks.check_count(
        example, 242_000, "count_encoder_layer(200, 2, 200)", checks.layer_mistakes(200, 2, 200)
    )


def layer_hidden(seed: int, got: object) -> None:
    d_model, d_hid = probe.layer_heads_sizes(seed)
    _hidden_counts(
        got,
        "count_encoder_layer",
        probe.layer_sizes(seed),
        lambda *args: checks.parameter_count(checks.encoder_layer(*args)),
        reference_layer,
        layer_mistakes,
        (d_model, f"count_encoder_layer({d_model}, nhead, {d_hid})"),
        probe.huge_sizes(seed)["layer"],
    )


def _hidden_counts(
    got: object,
    function: str,
    sizes: list[tuple],
    real: Callable[..., int],
    reference: Callable[..., int],
    mistakes: Callable[..., dict],
    heads: tuple[int, str],
    huge: tuple,
) -> None:
    """The three parts of a hidden count cell: random sizes against the module PyTorch builds
    (the reference checked against it too), the same count for every nhead, a huge size."""
    seen = _hidden(got, heads=True)
    for args, value in zip(sizes, _listed(seen["trials"], len(sizes), "count"), strict=True):
        true = real(*args)
        check(true == reference(*args), f"internal: reference {function}")
        checks.check_count(value, true, f"{function}{args}", mistakes(*args))
    d_model, name = heads
    _independent_of_heads(seen["heads"], d_model, name)
    checks.check_count(seen["huge"], reference(*huge), f"{function}{huge}", mistakes(*huge))


# ---------------------------------------------------------------- the base
def base_visible(seed: int, got: object) -> None:
    small, example = _listed(got, 2, "count")
    small_base = nn.ModuleDict(
        {
            "embedding": nn.Embedding(13, 8),
            "transformer_encoder": nn.TransformerEncoder(
                checks.encoder_layer(8, 2, 32), 3, enable_nested_tensor=False
            ),
        }
    )
    checks.check_count(
        small,
        checks.parameter_count(small_base),
        "count_base(13, 8, 2, 32, 3)",
        {checks.HARD_CODED: 10_968_200, **checks.base_mistakes(13, 8, 2, 32, 3)},
    )
    checks.check_count(
        example,
        10_968_200,
        "count_base(50001, 200, 2, 200, 4)",
        checks.base_mistakes(50001, 200, 2, 200, 4),
    )


def base_hidden(seed: int, got: object) -> None:
    ntokens, d_model, d_hid, nlayers = probe.base_heads_sizes(seed)
    _hidden_counts(
        got,
        "count_base",
        probe.base_sizes(seed),
        lambda *args: checks.parameter_count(real_base(*args)),
        reference_base,
        base_mistakes,
        (d_model, f"count_base({ntokens}, {d_model}, nhead, {d_hid}, {nlayers})"),
        probe.huge_sizes(seed)["base"],
    )


# ---------------------------------------------------------------- the head
def head_visible(seed: int, got: object) -> None:
    classifier, language_model, small = _listed(got, 3, "count")
    checks.check_count(classifier, 402, "count_head(200, 2)", {checks.HEAD_BIAS: 400})
    checks.check_count(
        language_model,
        10_050_201,
        "count_head(200, 50001)",
        {checks.HEAD_BIAS: 10_000_200, checks.HARD_CODED: 402},
    )
    checks.check_count(
        small,
        checks.parameter_count(nn.Linear(7, 5)),
        "count_head(7, 5)",
        {checks.HEAD_BIAS: 35, checks.HARD_CODED: 402, HEAD_HARD_CODED: 10_050_201},
    )


def head_hidden(seed: int, got: object) -> None:
    _module_counts(seed, got, "head", nn.Linear, lambda d, n, _: head_mistakes(d, n))


# ---------------------------------------------------------------- the KV cache
NHEAD = 2  # the notebook's NHEAD, whose one-head share the tests name
KV_HARD_CODED = 37_748_736  # GPT-2 small's cache for one sequence, the visible test's number


def _true_kv_cache(sizes: tuple[int, ...], per_value: int, nhead: int = 1) -> int:
    """The bytes of a real (meta) cache, checked against the closed form."""
    true = checks.cache_bytes(checks.kv_cache(*sizes, per_value, nhead=nhead))
    check(true == reference_kv_cache(*sizes, per_value), "internal: reference KV cache")
    return true


def _kv_name(sizes: tuple[int, ...], per_value: int | None) -> str:
    if per_value is None:
        return f"kv_cache_bytes{sizes}"
    return f"kv_cache_bytes({', '.join(map(str, sizes))}, bytes_per_value={per_value})"


def kv_cache_visible(seed: int, got: object) -> None:
    small, example = _listed(got, 2, "count")
    checks.check_count(
        small,
        _true_kv_cache((3, 8, 5, 7), 4, nhead=NHEAD),
        _kv_name((3, 8, 5, 7), 4),
        {checks.HARD_CODED: KV_HARD_CODED, **checks.cache_mistakes(3, 8, 5, 7, 4, heads=[NHEAD])},
    )
    check(_true_kv_cache((12, 768, 1024, 1), 2, nhead=12) == KV_HARD_CODED, "internal: GPT-2")
    checks.check_count(
        example,
        KV_HARD_CODED,
        _kv_name((12, 768, 1024, 1), None),
        checks.cache_mistakes(12, 768, 1024, 1, 2, heads=[NHEAD, 12]),
    )


def kv_cache_hidden(seed: int, got: object) -> None:
    seen = _hidden(got)
    trials = probe.kv_sizes(seed)
    for (sizes, per_value, nhead), value in zip(
        trials, _listed(seen["trials"], len(trials), "count"), strict=True
    ):
        per = 2 if per_value is None else per_value
        checks.check_count(
            value,
            _true_kv_cache(sizes, per, nhead=nhead),
            _kv_name(sizes, per_value),
            {
                checks.HARD_CODED: KV_HARD_CODED,
                **checks.cache_mistakes(*sizes, per, heads=[NHEAD, nhead]),
            },
        )
    huge = probe.kv_huge_sizes(seed)
    checks.check_count(
        seen["huge"],
        _true_kv_cache(huge, 2),
        f"kv_cache_bytes{huge}",
        checks.cache_mistakes(*huge, 2, heads=[NHEAD]),
    )
