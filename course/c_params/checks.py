"""Checks for assignment C (counting parameters): exact counts, and the usual mistakes named.

The true count always comes from PyTorch itself: a module is built and its parameters are
summed. The mistakes are read from the same module (its biases, its LayerNorms, its attention),
so nothing here computes the closed forms the students write. The KV cache is counted the same
way: its key and value tensors are built on PyTorch's ``meta`` device (a shape, a dtype and a
size in bytes, no memory) and their ``nbytes`` summed; each mistake is read from such tensors.
"""

from __future__ import annotations

import operator
import signal
import time
from collections.abc import Callable, Mapping

import torch
from torch import nn

from course.testcells import check, expected_got, fail

# The misconceptions of the syllabus, named once; the tests use these messages.
HEADS = (
    "the count grows with the number of heads. The query, key, value and output projections "
    "are d_model x d_model matrices shared by all heads: splitting into heads reshapes their "
    "output and adds no weights, so the attention must not be counted once per head."
)
HEADS_QKV = (
    "the count grows with the number of heads: each head got its own d_model x d_model query, "
    "key and value matrices. One d_model x d_model matrix per role serves all the heads (each "
    "head uses a d_model / nhead slice of it)."
)
BIASES = (
    "a bias is missing. nn.MultiheadAttention has biases (in_proj_bias: 3 x d_model, "
    "out_proj.bias: d_model) and so do the two Linear layers of the feed-forward block "
    "(d_hid and d_model)."
)
FFN_BIASES = (
    "the biases of the feed-forward block are missing: linear1 has a bias of size d_hid, "
    "linear2 one of size d_model."
)
ALL_BIASES = (
    "every bias is missing (attention, feed-forward and the LayerNorm biases): an nn.Linear "
    "and a LayerNorm have a bias unless told otherwise."
)
LAYERNORM = (
    "the LayerNorm parameters are missing: a layer has two LayerNorms, each with a weight and "
    "a bias of size d_model (4 x d_model in all)."
)
ATTENTION_BIASES = (
    "the attention biases are missing: nn.MultiheadAttention has in_proj_bias (3 x d_model) "
    "and out_proj.bias (d_model), 4 x d_model in all."
)
HEADS_CHANGE = (
    "the count changes with the number of heads. The query, key, value and output projections "
    "are d_model x d_model matrices whatever nhead is: the heads only cut their outputs into "
    "slices of width d_model / nhead, so nhead must not appear in the count."
)
LAYERNORM_BIAS = (
    "half of the LayerNorm parameters are missing: each LayerNorm has a weight (gamma) AND a "
    "bias (beta) of size d_model."
)
D_HID = (
    "d_hid was taken equal to d_model: the feed-forward block is Linear(d_model, d_hid) then "
    "Linear(d_hid, d_model), and d_hid is its own argument."
)
POSITIONAL = (
    "the positional encoding was counted. Its sinusoidal table (max_len x d_model) is a buffer "
    "registered with register_buffer, not a parameter: it adds 0 to the count."
)
HEAD_BIAS = "the bias of the Linear is missing: nn.Linear(d_model, n_out) has n_out biases."
HARD_CODED = (
    "this is the reference configuration's number, returned for other sizes: the answer looks "
    "hard-coded. Write a formula in the arguments."
)
ONE_LAYER = "only one encoder layer was counted: the stack has nlayers copies of it."
NO_EMBEDDING = "the embedding is missing: the base is embedding + positional encoding + stack."
EMBEDDING_BIAS = "an nn.Embedding is a lookup table (ntokens x d_model): it has no bias."

# The mistakes of the KV cache (exercise 5).
KV_KEYS_ONLY = (
    "only the keys were counted: every layer caches the keys AND the values of each position "
    "(two tensors of the same size, a factor 2)."
)
KV_QUERIES = (
    "the queries were cached too (a factor 3 instead of 2): a position's query is used only at "
    "its own step, so the cache keeps the keys and the values, not the queries."
)
KV_NUMBERS = (
    "this counts numbers, not bytes: each number takes bytes_per_value bytes (2 in float16, "
    "4 in float32), so multiply by bytes_per_value."
)
KV_ONE_LAYER = (
    "only one layer's cache was counted: each of the nlayers attention layers keeps its own "
    "keys and values."
)
KV_NO_BATCH = (
    "the batch is missing: each of the batch sequences keeps its own keys and values, so the "
    "cache grows with the batch."
)
KV_BATCH_TWICE = (
    "the batch was counted twice (batch x batch sequences): each sequence keeps one set of keys "
    "and values, so the batch enters the count once."
)
KV_ONE_POSITION = (
    "only one position was counted: the cache keeps the keys and values of all seq_len "
    "positions, so it grows with the length of the sequence."
)
KV_ONE_HEAD = (
    "this is one head's share of the cache (d_model / nhead numbers per position): the nhead "
    "heads side by side hold d_model numbers per position for the keys and as many for the "
    "values, so d_model already counts every head."
)


# ---------------------------------------------------------------- counting with PyTorch
def parameter_count(module: nn.Module) -> int:
    """The number PyTorch reports: sum(p.numel() for p in module.parameters())."""
    return sum(p.numel() for p in module.parameters())


def encoder_layer(d_model: int, nhead: int, d_hid: int) -> nn.TransformerEncoderLayer:
    """The encoder layer of the course's model (batch-first, the default post-norm)."""
    return nn.TransformerEncoderLayer(d_model, nhead, d_hid, batch_first=True)


def _numel(module: nn.Module, keep: Callable[[str], bool]) -> int:
    return sum(p.numel() for name, p in module.named_parameters() if keep(name))


# ---------------------------------------------------------------- comparing counts
def as_count(value: object, name: str) -> int:
    """Check that ``value`` is an integer (int, numpy or torch integer); return it as int."""
    check(
        not isinstance(value, bool),
        expected_got(f"{name} should be an integer count.", "int", "bool"),
    )
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        hint = (
            "use // (not /) for divisions, or int(...) around a float."
            if isinstance(value, float)
            else ""
        )
        fail(expected_got(f"{name} should be an integer count.", "int", type(value).__name__, hint))


def check_count(
    got: object, expected: int, name: str, mistakes: Mapping[str, int] | None = None
) -> int:
    """Compare a count exactly; when it is wrong, name the mistake whose count it equals.

    When several known mistakes give this same count, the message lists them all: the count
    alone cannot tell which one the code made.
    """
    value = as_count(got, name)
    if value == expected:
        return value
    matches = [m for m, wrong in (mistakes or {}).items() if wrong != expected and value == wrong]
    if len(matches) == 1:
        fail(f"{name} = {value:,}, expected {expected:,}: {matches[0]}")
    if matches:
        listed = " OR ".join(f"({k}) {m}" for k, m in enumerate(matches, start=1))
        fail(
            f"{name} = {value:,}, expected {expected:,}. Several mistakes give exactly this "
            f"count, check each: {listed}"
        )
    fail(
        expected_got(
            f"{name} is wrong.", f"{expected:,}", f"{value:,} (off by {value - expected:+,})"
        )
    )


def layer_mistakes(d_model: int, nhead: int, d_hid: int) -> dict[str, int]:
    """What each known mistake gives for one encoder layer, read from a real layer."""
    layer = encoder_layer(d_model, nhead, d_hid)
    total = parameter_count(layer)
    attention = _numel(layer, lambda n: n.startswith("self_attn"))
    in_proj = _numel(layer, lambda n: n.startswith("self_attn.in_proj"))
    norms = _numel(layer, lambda n: n.startswith("norm"))
    norm_biases = _numel(layer, lambda n: n.startswith("norm") and n.endswith("bias"))
    biases = _numel(layer, lambda n: n.endswith("bias") and not n.startswith("norm"))
    ffn_biases = _numel(layer, lambda n: n.startswith("linear") and n.endswith("bias"))
    return {
        HEADS: total + (nhead - 1) * attention,
        HEADS_QKV: total + (nhead - 1) * in_proj,
        BIASES: total - biases,
        FFN_BIASES: total - ffn_biases,
        ALL_BIASES: total - biases - norm_biases,
        LAYERNORM: total - norms,
        ATTENTION_BIASES: total
        - _numel(layer, lambda n: n.startswith("self_attn") and n.endswith("bias")),
        LAYERNORM_BIAS: total - norm_biases,
        D_HID: parameter_count(encoder_layer(d_model, nhead, d_model)),
    }


def base_mistakes(
    ntokens: int, d_model: int, nhead: int, d_hid: int, nlayers: int
) -> dict[str, int]:
    """What each known mistake gives for embedding + positional encoding + stack."""
    embedding = parameter_count(nn.Embedding(ntokens, d_model))
    layer = parameter_count(encoder_layer(d_model, nhead, d_hid))
    total = embedding + nlayers * layer
    mistakes = {
        message: embedding + nlayers * wrong
        for message, wrong in layer_mistakes(d_model, nhead, d_hid).items()
    }
    mistakes[POSITIONAL] = total + 5000 * d_model
    for max_len in (512, 1000, 1024, 2048, 10000):
        mistakes[f"{POSITIONAL} (Here max_len = {max_len}.)"] = total + max_len * d_model
    mistakes[ONE_LAYER] = embedding + layer
    mistakes[NO_EMBEDDING] = nlayers * layer
    mistakes[EMBEDDING_BIAS] = total + d_model
    return mistakes


def diagnose_independent_of_heads(
    count: Callable[..., object], d_model: int, name: str, *args: int, **kwargs: int
) -> None:
    """Call ``count(d_model, nhead, *args)`` for every nhead dividing d_model: one number."""
    values = {h: as_count(count(d_model, h, *args, **kwargs), name) for h in heads_of(d_model)}
    diagnose_independent_of_heads_result(values, d_model, name)


def heads_of(d_model: int) -> list[int]:
    """The numbers of heads (1 to 8) that divide ``d_model``: those the checks try."""
    return [h for h in range(1, min(d_model, 8) + 1) if d_model % h == 0]


def diagnose_independent_of_heads_result(got: Mapping[int, int], d_model: int, name: str) -> None:
    """:func:`diagnose_independent_of_heads` on the counts it read (nhead -> count)."""
    if len(set(got.values())) > 1:
        shown = ", ".join(f"nhead={h}: {v:,}" for h, v in got.items())
        fail(f"{name}: {HEADS_CHANGE} Your counts for d_model={d_model}: {shown}.")


# ---------------------------------------------------------------- the KV cache
# The dtype of a cached number, by its size in bytes: an 8-bit cache, float16, float32, float64.
CACHE_DTYPES = {1: torch.int8, 2: torch.float16, 4: torch.float32, 8: torch.float64}


def kv_cache(
    nlayers: int,
    d_model: int,
    seq_len: int,
    batch: int,
    bytes_per_value: int = 2,
    *,
    nhead: int = 1,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The keys and values that ``nlayers`` attention layers cache, on the ``meta`` device.

    One ``(keys, values)`` pair per layer, each of shape ``(batch, nhead, seq_len, d_model //
    nhead)`` and of the dtype whose numbers take ``bytes_per_value`` bytes: tensors with a size
    in bytes (``nbytes``) and no memory, so any size can be built.
    """
    if bytes_per_value not in CACHE_DTYPES:
        raise ValueError(f"bytes_per_value must be one of {sorted(CACHE_DTYPES)}")
    if d_model % nhead:
        raise ValueError("nhead must divide d_model")
    shape = (batch, nhead, seq_len, d_model // nhead)
    dtype = CACHE_DTYPES[bytes_per_value]
    return [
        (
            torch.empty(shape, dtype=dtype, device="meta"),
            torch.empty(shape, dtype=dtype, device="meta"),
        )
        for _ in range(nlayers)
    ]


def cache_bytes(cache: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    """The bytes the cache's tensors take: the sum of their ``nbytes``."""
    return sum(keys.nbytes + values.nbytes for keys, values in cache)


def cache_mistakes(
    nlayers: int,
    d_model: int,
    seq_len: int,
    batch: int,
    bytes_per_value: int = 2,
    heads: list[int] | tuple[int, ...] = (),
) -> dict[str, int]:
    """What each known mistake gives for the KV cache, read from real (meta) cache tensors.

    ``heads``: the numbers of heads whose one-head share is named (those a student could have
    used, such as the notebook's NHEAD); one that does not divide d_model is skipped.
    """
    sizes = (nlayers, d_model, seq_len, batch, bytes_per_value)
    cache = kv_cache(*sizes)
    total = cache_bytes(cache)
    keys = sum(k.nbytes for k, _ in cache)
    mistakes = {
        KV_KEYS_ONLY: keys,
        KV_QUERIES: total + keys,  # a query tensor per layer, of the keys' shape
        KV_NUMBERS: sum(k.numel() + v.numel() for k, v in cache),
        KV_ONE_LAYER: cache_bytes(cache[:1]),
        KV_NO_BATCH: cache_bytes(kv_cache(nlayers, d_model, seq_len, 1, bytes_per_value)),
        KV_BATCH_TWICE: batch * total,  # batch x batch sequences (too many numbers to build)
        KV_ONE_POSITION: cache_bytes(kv_cache(nlayers, d_model, 1, batch, bytes_per_value)),
    }
    for nhead in heads:
        if nhead > 1 and d_model % nhead == 0:
            per_head = kv_cache(*sizes, nhead=nhead)
            share = sum(k[:, :1].nbytes + v[:, :1].nbytes for k, v in per_head)
            mistakes[f"{KV_ONE_HEAD} (Here nhead = {nhead}.)"] = share
    return mistakes


# ---------------------------------------------------------------- closed forms only
class _TooSlow(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TooSlow


def call_quickly(
    count: Callable[..., object],
    args: tuple[int, ...],
    name: str,
    seconds: float = 2.0,
    built: str = "the modules and count their parameters",
) -> object:
    """Call ``count(*args)`` for sizes far too large to build; fail if it builds or loops.

    A closed form returns at once. Building the modules fails (the memory does not exist) and
    a loop over the sizes does not end in ``seconds``: both are named. ``built`` says what a
    count that builds would have built ("did it build {built}?").
    """
    closed_form = (
        f"{name} must be a closed form (a formula in the sizes): it should return at once for "
        "sizes far too large to build a model with."
    )
    timer = getattr(signal, "SIGALRM", None)
    previous = signal.signal(timer, _alarm) if timer is not None else None
    start = time.perf_counter()
    try:
        if timer is not None:
            signal.setitimer(signal.ITIMER_REAL, seconds)
        value = count(*args)
    except NotImplementedError:
        raise
    except _TooSlow:
        fail(f"{closed_form} It was still running after {seconds:g} s (a loop over the sizes?).")
    except (RuntimeError, MemoryError, OverflowError) as error:
        first = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
        fail(
            f"{closed_form} It raised {type(error).__name__} ({first}): did it build {built}? "
            "Count with the formula instead."
        )
    finally:
        if timer is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(timer, previous if previous is not None else signal.SIG_DFL)
    elapsed = time.perf_counter() - start
    check(elapsed < seconds, f"{closed_form} It took {elapsed:.1f} s.")
    return value
