"""Checks for assignment E (from a language model to a classifier): they name the usual mistakes.

Each function checks a property that SYLLABUS E states (the representation of the last real
token, a head of n_classes outputs in place of the LM head, a frozen base, trainable parameters
only, BERT's 80/10/10 corruption) and raises :class:`GradingError` with a message that names the
mistake. None of them computes the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from course.testcells import check, check_tensor, expected_got, fail, same_values

IGNORE = -100  # the label that nn.functional.cross_entropy skips by default


# ---------------------------------------------------------------- the last real token
def position_states(batch: int, length: int, width: int) -> torch.Tensor:
    """Hidden states (batch, length, width) whose values say where they come from.

    Every entry of ``states[b, t]`` equals ``1000 * b + t``: the position a representation was
    taken from can be read off its values.
    """
    b = torch.arange(batch, dtype=torch.float32).view(batch, 1, 1)
    t = torch.arange(length, dtype=torch.float32).view(1, length, 1)
    return (1000 * b + t).expand(batch, length, width).clone()


def diagnose_last_token(
    last_token_states: Callable[..., object], lengths: torch.Tensor, length: int, width: int
) -> None:
    """Check ``last_token_states`` on :func:`position_states` ``(B, length, width)``."""
    batch, name = lengths.numel(), _last_token_name(lengths, length, width)
    try:
        result = last_token_states(position_states(batch, length, width), lengths)
    except IndexError as error:
        fail(
            f"{name} raised IndexError ({error}). Off by one? A sequence of length n has its "
            "last real token at position n - 1; the longest one ends at position L - 1."
        )
    diagnose_last_token_result(result, lengths, length, width)


def _last_token_name(lengths: torch.Tensor, length: int, width: int) -> str:
    batch = lengths.numel()
    return (
        f"last_token_states(hidden (B={batch}, L={length}, D={width}), lengths={lengths.tolist()})"
    )


def diagnose_last_token_result(
    result: object, lengths: torch.Tensor, length: int, width: int
) -> None:
    """:func:`diagnose_last_token` on what ``last_token_states`` returned for
    :func:`position_states` ``(B, length, width)`` and ``lengths``."""
    batch = lengths.numel()
    name = _last_token_name(lengths, length, width)
    states = check_tensor(result, name)
    check(
        tuple(states.shape) == (batch, width),
        expected_got(
            f"{name} should give one vector per sequence.", (batch, width), tuple(states.shape)
        ),
    )
    took = states[:, 0] - 1000 * torch.arange(batch, dtype=states.dtype)  # (B,) positions taken
    wanted = (lengths - 1).to(states.dtype)
    if torch.equal(took, wanted):
        check(
            bool((states == states[:, :1]).all()),
            f"{name}: the vectors are not whole rows of hidden (all D features of one position).",
        )
        return
    if bool((took == length - 1).all()):
        fail(
            f"{name}: you took the last position of the padded tensor (index -1) for every "
            "sequence. In a shorter sequence that position is padding. Take position "
            "lengths[b] - 1 of row b: its last REAL token."
        )
    if bool((took == 0).all()):
        fail(
            f"{name}: you took the first position. Under a causal mask the first token has seen "
            "only itself; the last real token (position lengths[b] - 1) is the only one that has "
            "seen the whole sentence."
        )
    if torch.equal(took, wanted / 2):
        fail(
            f"{name}: you averaged the real positions (mean pooling). That is a fair method, but "
            "this exercise asks for the state at the last real token, position lengths[b] - 1."
        )
    if torch.equal(took, (length - 1) / 2 * torch.ones_like(took)):
        fail(
            f"{name}: you averaged over all L positions, padding included. This exercise asks "
            "for the state at the last real token, position lengths[b] - 1."
        )
    if torch.equal(took, wanted + 1):
        fail(
            f"{name}: off by one: you took position lengths[b], the first padding position. A "
            "sequence of length n has its last token at position n - 1."
        )
    fail(expected_got(f"{name} took the wrong positions.", wanted.tolist(), took.tolist()))


# ---------------------------------------------------------------- the classification head
def diagnose_head(model: nn.Module, d_model: int, vocab: int, n_classes: int) -> None:
    """Check that ``model.lm.decoder`` is a new head ``Linear(d_model, n_classes)``."""
    diagnose_head_facts(head_facts(model), d_model, vocab, n_classes)


def head_facts(model: object) -> dict:
    """What :func:`diagnose_head` reads from a classifier: whether ``model.lm.decoder`` is a
    Linear, its (in_features, out_features), and every Linear's name and sizes."""
    lm = getattr(model, "lm", None)
    head = getattr(lm, "decoder", None)
    linears = []
    if isinstance(model, nn.Module):
        linears = [
            [name, module.in_features, module.out_features]
            for name, module in model.named_modules()
            if isinstance(module, nn.Linear)
        ]
    return {
        "has_head": lm is not None and isinstance(head, nn.Linear),
        "head": [head.in_features, head.out_features] if isinstance(head, nn.Linear) else None,
        "linears": linears,
    }


def diagnose_head_facts(facts: dict, d_model: int, vocab: int, n_classes: int) -> None:
    """:func:`diagnose_head` on the facts :func:`head_facts` reads."""
    check(
        bool(facts["has_head"]),
        "The classifier should keep the language model as `self.lm` and put the new head in "
        "its place: `self.lm.decoder = nn.Linear(...)`.",
    )
    in_features, out_features = facts["head"]
    if out_features == vocab:
        fail(
            f"self.lm.decoder still has {vocab} outputs, one per word: the LM head was not "
            f"replaced. A sentiment classifier needs n_classes = {n_classes} outputs."
        )
    check(
        (in_features, out_features) == (d_model, n_classes),
        expected_got(
            "The head should map a hidden state to one score per class.",
            f"Linear(in_features={d_model}, out_features={n_classes})",
            f"Linear(in_features={in_features}, out_features={out_features})",
            hint=(
                "a head that reads the word scores (Linear(V, n_classes)) keeps the LM head: "
                "replace the LM head instead."
                if in_features == vocab
                else ""
            ),
        ),
    )
    too_wide = [name for name, fan_in, fan_out in facts["linears"] if vocab in (fan_out, fan_in)]
    check(
        not too_wide,
        f"The classifier still holds a layer of vocabulary size ({', '.join(too_wide)}): the LM "
        "head should be replaced, not kept under a new head.",
    )


def _is_causal(mask: object, length: int) -> bool:
    """True when ``mask`` (L, L) hides exactly the positions after each query (float or bool)."""
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape[-2:]) != (length, length):
        return False
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    m = mask.reshape(-1, length, length)[0]
    if m.dtype == torch.bool:
        return torch.equal(m, future)
    hidden = m < -1e4  # -inf, or a large negative number
    return torch.equal(hidden, future) and bool((m[~future] == 0).all())


def record_forward(model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor) -> dict:
    """Run ``model(ids, lengths)`` and record what it did: the mask given to the encoder stack,
    the stack's output states (B, L, D) and the input of the head (B, D). Entries the model did
    not produce (another route through the modules) are missing."""
    seen: dict = {}
    encoder = model.lm.transformer_encoder

    def before_encoder(module, args, kwargs):
        seen["mask"] = kwargs["mask"] if "mask" in kwargs else (args[1] if len(args) > 1 else None)

    def after_encoder(module, args, output):
        seen["states"] = output

    def before_head(module, args):
        seen["head_input"] = args[0]

    hooks = [
        encoder.register_forward_pre_hook(before_encoder, with_kwargs=True),
        encoder.register_forward_hook(after_encoder),
        model.lm.decoder.register_forward_pre_hook(before_head),
    ]
    try:
        model(ids, lengths)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def _positions_read(seen: dict) -> list[int | None] | None:
    """For each sentence, the position whose state the head received (None: no single one)."""
    states, head_input = seen.get("states"), seen.get("head_input")
    if not isinstance(states, torch.Tensor) or not isinstance(head_input, torch.Tensor):
        return None
    if states.dim() != 3 or tuple(head_input.shape) != (states.size(0), states.size(2)):
        return None
    read = []
    for b in range(states.size(0)):
        close = (states[b] - head_input[b]).abs().amax(dim=-1) < 1e-6  # (L,)
        read.append(int(close.nonzero()[0]) if int(close.sum()) == 1 else None)
    return read


def _cause(seen: dict, lengths: torch.Tensor, length: int) -> str:
    """What the code did wrong, when the recorded forward pass shows it; else an empty string."""
    if "mask" in seen and seen["mask"] is None:
        return (
            " The base ran without a mask: the language model was pretrained under the causal "
            "mask, and without it every real token attends to the padding after it. Pass "
            "causal_mask(L) to self.lm.encode."
        )
    if "mask" in seen and not _is_causal(seen["mask"], length):
        return (
            " The mask given to the encoder is not the causal mask (L, L) (-inf above the "
            "diagonal, 0 elsewhere): pass causal_mask(L) to self.lm.encode."
        )
    read = _positions_read(seen)
    if read is None:
        return ""
    wanted = (lengths - 1).tolist()
    if read == [length - 1] * len(read) and read != wanted:
        return (
            " The head received the state at index -1, the last position of the padded batch, "
            "which is padding in a shorter sentence. Take position lengths[b] - 1 of row b."
        )
    if read == [0] * len(read) and read != wanted:
        return (
            " The head received the state of the first position, which under the causal mask has "
            "seen only the first word. Take the last real token, position lengths[b] - 1."
        )
    wrong = [(b, r, w) for b, (r, w) in enumerate(zip(read, wanted, strict=True)) if r != w]
    if wrong and all(r is not None for _, r, _ in wrong):
        b, r, w = wrong[0]
        return (
            f" The head received the state at position {r} of sentence {b}, whose last real "
            f"token is at position {w} (lengths[{b}] - 1)."
        )
    return ""


def _other_real_words(ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor | None:
    """``ids`` with every real token replaced by another word of the batch (no pad id)."""
    words = ids[real].unique()  # sorted
    if words.numel() < 2:
        return None
    index = torch.searchsorted(words, ids.clamp(max=int(words[-1])))
    shifted = words[(index + 1) % words.numel()]
    return torch.where(real, shifted, ids)


def diagnose_classifier_output(
    model: nn.Module, ids: torch.Tensor, lengths: torch.Tensor, n_classes: int, pad_id: int
) -> None:
    """Shape of the logits, and that a sentence's scores depend on its real tokens only.

    ``ids`` (B, L) must be right-padded with ``pad_id`` (the contract of the exercise): every
    input fed here keeps the padding positions at ``pad_id`` and the real ones at real words.
    """
    model.eval()
    inputs = classifier_inputs(ids, lengths, pad_id)
    with torch.no_grad():
        diagnose_classifier_outputs(
            lambda key: model(*inputs[key]),
            lambda: record_forward(model, ids, lengths),
            ids,
            lengths,
            n_classes,
        )


def classifier_inputs(
    ids: torch.Tensor, lengths: torch.Tensor, pad_id: int
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The inputs :func:`diagnose_classifier_output` runs the classifier on, by name: the batch,
    the batch with more padding, each sentence alone, and (when the batch holds two words or
    more) the batch with another real word at each sentence's last real position."""
    batch, length = ids.shape
    inputs = {"batch": (ids, lengths)}
    inputs["more padding"] = (torch.cat([ids, torch.full_like(ids, pad_id)], dim=1), lengths)
    for b in range(batch):
        inputs[f"alone {b}"] = (ids[b : b + 1, : int(lengths[b])], lengths[b : b + 1])
    real = torch.arange(length) < lengths.unsqueeze(1)  # (B, L)
    other = _other_real_words(ids, real)
    if other is not None:
        rows, last = torch.arange(batch), lengths - 1
        changed = ids.clone()
        changed[rows, last] = other[rows, last]  # another real word at the last real position
        inputs["changed"] = (changed, lengths)
    return inputs


def diagnose_classifier_outputs(
    output: Callable[[str], object],
    record: Callable[[], dict],
    ids: torch.Tensor,
    lengths: torch.Tensor,
    n_classes: int,
) -> None:
    """:func:`diagnose_classifier_output` on the classifier's outputs: ``output(key)`` is its
    output on the input :func:`classifier_inputs` names ``key``, ``record()`` what
    :func:`record_forward` recorded on the batch."""
    batch, length = ids.shape
    logits = check_tensor(output("batch"), "model(ids, lengths)")
    check(
        tuple(logits.shape) == (batch, n_classes),
        expected_got(
            "The classifier should give one score per class for each sentence.",
            (batch, n_classes),
            tuple(logits.shape),
            hint="take one position per sentence (the last real token) before the head.",
        ),
    )
    seen = record()
    check(
        torch.allclose(output("more padding"), logits, atol=1e-5),
        "Adding more padding after the sentences changed their scores: a sentence's score "
        "must depend on its real tokens only (the state at position lengths[b] - 1, computed "
        "under the causal mask)." + _cause(seen, lengths, length),
    )
    for b in range(batch):
        check(
            torch.allclose(output(f"alone {b}"), logits[b : b + 1], atol=1e-5),
            f"Sentence {b} classified alone, without padding, got other scores than in the "
            "padded batch: a sentence's score must not depend on the padding or on the other "
            "sentences." + _cause(seen, lengths, length),
        )
    real = torch.arange(length) < lengths.unsqueeze(1)  # (B, L)
    if _other_real_words(ids, real) is None:
        return
    same = (output("changed") - logits).abs().amax(dim=-1) < 1e-6  # (B,)
    if bool(same.any()):
        b = int(same.nonzero()[0])
        fail(
            f"Changing the last real word of sentence {b} did not change its scores: the "
            "representation does not depend on the last word, although the state at "
            "position lengths[b] - 1 has seen it." + _cause(seen, lengths, length)
        )


# ---------------------------------------------------------------- freezing and counting
def diagnose_frozen(model: nn.Module) -> None:
    """After ``freeze_base(model)``: only the head (``model.lm.decoder``) requires a gradient."""
    diagnose_frozen_facts(frozen_facts(model))


def frozen_facts(model: nn.Module) -> dict:
    """What :func:`diagnose_frozen` reads from a classifier: the names of the head's parameters,
    whether each parameter requires a gradient (by name) and the submodules in eval mode."""
    head = {id(p) for p in model.lm.decoder.parameters()}
    named = list(model.named_parameters())
    return {
        "head": [n for n, p in named if id(p) in head],
        "n_head": len(head),
        "requires_grad": {n: bool(p.requires_grad) for n, p in named},
        "in_eval": [name for name, module in model.named_modules() if name and not module.training],
    }


def diagnose_frozen_facts(facts: dict) -> None:
    """:func:`diagnose_frozen` on the facts :func:`frozen_facts` reads."""
    head, requires_grad = set(facts["head"]), facts["requires_grad"]
    frozen_head = [n for n, grad in requires_grad.items() if n in head and not grad]
    trainable_base = [n for n, grad in requires_grad.items() if n not in head and grad]
    if frozen_head:
        fail(
            f"The head is frozen too ({', '.join(frozen_head)}): nothing would learn. Freeze "
            "the base (embedding, positions, encoder) and leave the new head trainable."
        )
    if trainable_base and len(trainable_base) == len(requires_grad) - facts["n_head"]:
        in_eval = facts["in_eval"]
        if in_eval:
            fail(
                f"No parameter of the base was frozen; {in_eval[0]} was switched to eval mode "
                "instead. `eval()` does not freeze anything (it only switches dropout off): set "
                "`requires_grad = False` on every parameter of the base."
            )
        fail(
            "No parameter of the base was frozen: every parameter still requires a gradient. "
            "Set `requires_grad = False` on every parameter of the base."
        )
    check(
        not trainable_base,
        f"Part of the base is still trainable: {', '.join(trainable_base[:4])}"
        + (" ..." if len(trainable_base) > 4 else "")
        + ". Freeze every parameter except the head's.",
    )


class _Counted(nn.Module):
    """A module with a known answer: 16 trainable numbers, 25 frozen ones, a buffer of 1000."""

    def __init__(self) -> None:
        super().__init__()
        self.trained = nn.Linear(3, 4)  # 3 * 4 + 4 = 16
        self.frozen = nn.Linear(4, 5)  # 4 * 5 + 5 = 25
        self.frozen.requires_grad_(False)
        self.register_buffer("table", torch.zeros(10, 100))  # 1000 numbers, not parameters


def counting_example() -> nn.Module:
    """The module :func:`diagnose_count` counts: 16 trainable numbers (see :class:`_Counted`)."""
    return _Counted()


def diagnose_count(count: Callable[[nn.Module], object]) -> None:
    """Check ``count_trainable_parameters`` on a module whose answer is known (16)."""
    diagnose_count_value(count(counting_example()))


def diagnose_count_value(got: object) -> None:
    """:func:`diagnose_count` on what the count gave for :func:`counting_example`."""
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    check(
        isinstance(got, int) and not isinstance(got, bool),
        expected_got("The count should be a Python int.", "int", type(got).__name__),
    )
    named = {
        41: "you counted the frozen parameters too; count only those with requires_grad.",
        1016: "you counted a buffer (state_dict holds buffers such as the positional table): "
        "count model.parameters() with requires_grad.",
        1041: "you counted every tensor of the state_dict, buffers and frozen parameters "
        "included: count model.parameters() with requires_grad.",
        2: "you counted parameter tensors, not the numbers in them (use p.numel()).",
        4: "you counted parameter tensors, not the numbers in them (use p.numel()).",
    }
    if got != 16 and got in named:
        fail(f"count_trainable_parameters gave {got} where 16 numbers are trainable: {named[got]}")
    check(
        got == 16,
        expected_got(
            "count_trainable_parameters on Linear(3, 4) trainable + Linear(4, 5) frozen + a "
            "buffer of 1000 numbers is wrong.",
            16,
            got,
        ),
    )


# ---------------------------------------------------------------- BERT's corruption
def mlm_shares(
    original: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor, mask_token_id: int
) -> dict[str, float]:
    """What ``mask_tokens`` did: share of positions chosen, and how the chosen were corrupted."""
    chosen = labels != IGNORE
    n = max(1, int(chosen.sum()))
    masked = chosen & (inputs == mask_token_id)
    kept = chosen & (inputs == original)
    return {
        "chosen": float(chosen.float().mean()),
        "mask": int(masked.sum()) / n,
        "random": int((chosen & ~masked & ~kept).sum()) / n,
        "kept": int(kept.sum()) / n,
    }


MASK_ID = 3  # the mask id of the checks; their input ids are drawn from 4 .. vocab_size - 1


def mask_tokens_input(
    vocab_size: int, seed: int, shape: tuple[int, ...] = (64, 512)
) -> torch.Tensor:
    """The ids :func:`diagnose_mask_tokens` corrupts: random, never the mask id."""
    return torch.randint(4, vocab_size, shape, generator=torch.Generator().manual_seed(seed))


def diagnose_mask_tokens(
    mask_tokens: Callable[..., object], vocab_size: int = 1000, seed: int = 0
) -> dict[str, float]:
    """Statistical checks of ``mask_tokens`` on 32,768 positions; return the measured shares.

    The input ids avoid the mask id, so that a position equal to the mask id was masked.
    """
    original = mask_tokens_input(vocab_size, seed)  # (B, L), no mask id
    ids = original.clone()
    result = mask_tokens(ids, MASK_ID, vocab_size, 0.15, torch.Generator().manual_seed(1))
    return diagnose_mask_result(result, ids, original, vocab_size)


def diagnose_mask_result(
    result: object, ids: torch.Tensor, original: torch.Tensor, vocab_size: int
) -> dict[str, float]:
    """:func:`diagnose_mask_tokens` on what ``mask_tokens(ids, MASK_ID, vocab_size, 0.15, ...)``
    returned, ``ids`` as the call left it, and ``original``, the ids before the call."""
    mask_id, shape = MASK_ID, tuple(original.shape)
    name = f"mask_tokens(input_ids {shape}, ...)"
    check(
        isinstance(result, (tuple, list)) and len(result) == 2,
        expected_got(f"{name} should return a pair.", "(inputs, labels)", type(result).__name__),
    )
    inputs = check_tensor(result[0], f"inputs of {name}", shape=shape, dtype=torch.long)
    labels = check_tensor(result[1], f"labels of {name}", shape=shape, dtype=torch.long)
    check(
        torch.equal(ids, original),
        f"{name} changed the tensor it was given. Corrupt a copy (input_ids.clone()): the "
        "caller may still need the original ids.",
    )
    if bool((labels == 0).float().mean() > 0.5):
        fail(
            f"labels of {name}: the positions that were not chosen hold 0, a real token id. "
            f"Use {IGNORE}, the value that cross_entropy ignores, so that they cost nothing."
        )
    chosen = labels != IGNORE
    if bool(chosen.all()):
        fail(
            f"labels of {name} are never {IGNORE}: the loss would be computed at every position. "
            f"Only the chosen positions (15%) get a label (the original id); the others get "
            f"{IGNORE}."
        )
    if not torch.equal(labels[chosen], original[chosen]):
        corrupted = torch.equal(labels[chosen], inputs[chosen])
        fail(
            f"labels of {name}: at a chosen position the label must be the ORIGINAL id (what the "
            "model has to recover)"
            + (", not the corrupted input." if corrupted else "; some labels are other ids.")
        )
    check(
        torch.equal(inputs[~chosen], original[~chosen]),
        f"inputs of {name} changed positions that were not chosen (label {IGNORE}). Only the "
        "chosen 15% are corrupted; the model must be told the answer at each corrupted position.",
    )
    shares = mlm_shares(original, inputs, labels, mask_id)
    check(
        0.14 < shares["chosen"] < 0.16,
        expected_got(
            f"{name} chose the wrong share of positions.",
            "about 0.15 (mlm_probability)",
            f"{shares['chosen']:.3f}",
        ),
    )
    if shares["mask"] > 0.97:
        fail(
            f"{name} replaced every chosen position by the mask token. BERT's rule: of the "
            "chosen positions, 80% become the mask token, 10% a random token, 10% stay as they "
            "are (so the model cannot assume that only [MASK] positions matter)."
        )
    check(
        0.77 < shares["mask"] < 0.83,
        expected_got(
            f"{name}: wrong share of chosen positions replaced by the mask token.",
            "about 0.80",
            f"{shares['mask']:.3f}",
        ),
    )
    if shares["random"] < 0.05:
        fail(
            f"{name}: only {shares['random']:.1%} of the chosen positions got a random token; "
            "BERT gives a random token to 10% of them, that is HALF of the 20% left after the "
            "80% masked (a probability of 0.1 applied to the rest gives only 2%)."
        )
    check(
        0.08 < shares["random"] < 0.12 and 0.08 < shares["kept"] < 0.12,
        expected_got(
            f"{name}: wrong shares of random and unchanged tokens among the chosen positions.",
            "about 0.10 random and 0.10 unchanged",
            f"{shares['random']:.3f} random and {shares['kept']:.3f} unchanged",
        ),
    )
    replaced = inputs[chosen & (inputs != mask_id) & (inputs != original)]
    check(
        bool((replaced >= 0).all() and (replaced < vocab_size).all()),
        f"{name}: random tokens must be ids in [0, vocab_size).",
    )
    mean = float(replaced.float().mean())
    check(
        0.4 * vocab_size < mean < 0.6 * vocab_size,
        expected_got(
            f"{name}: the random tokens are not drawn uniformly from the vocabulary.",
            f"a mean id near {vocab_size / 2:.0f}",
            f"{mean:.0f}",
        ),
    )
    return shares


GENERATOR_SEEDS = (11, 11, 12, None)  # the runs of diagnose_mask_generator: None is no generator


def generator_input() -> torch.Tensor:
    """The ids (8, 64) that :func:`diagnose_mask_generator` corrupts."""
    return torch.randint(4, 500, (8, 64), generator=torch.Generator().manual_seed(5))


def diagnose_mask_generator(mask_tokens: Callable[..., object]) -> None:
    """The corruption is reproducible with a generator, varies with its seed, works without one."""
    ids = generator_input()

    def run(index: int) -> object:
        seed = GENERATOR_SEEDS[index]
        return mask_tokens(ids, 3, 500, 0.15, None if seed is None else _generator(seed))

    diagnose_generator_runs(run)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def diagnose_generator_runs(output: Callable[[int], object]) -> None:
    """:func:`diagnose_mask_generator` on the outputs of ``mask_tokens``: ``output(i)`` is what
    it returned on :func:`generator_input` for the generator seed ``GENERATOR_SEEDS[i]``."""

    def run(index: int) -> tuple[torch.Tensor, torch.Tensor]:
        out = output(index)
        return out[0], out[1]

    first, again, other = run(0), run(1), run(2)
    check(
        torch.equal(first[0], again[0]) and torch.equal(first[1], again[1]),
        "mask_tokens gave different results for two generators with the same seed: draw every "
        "random number from `generator` (torch.rand(..., generator=generator), "
        "torch.randint(..., generator=generator)).",
    )
    check(
        not torch.equal(first[1], other[1]),
        "mask_tokens gave the same choice for two different generator seeds: the choice must "
        "be random.",
    )
    plain = run(3)
    check(
        tuple(plain[0].shape) == tuple(generator_input().shape)
        and bool((plain[1] != IGNORE).any()),
        "mask_tokens should also work with generator=None (the global random generator).",
    )


# ---------------------------------------------------------------- the KV cache
KV_NOT_UPDATED = "the cache was not updated"
KV_FRONT = "the new key and value were put at the front of the cache"
KV_SWAPPED = "the keys and values of the cache are swapped"
KV_NO_SCALE = "the scores are not scaled (divide q.k by sqrt(dh))"
KV_SCALE_KEYS = (
    "the scores are divided by sqrt(T), the square root of the number of keys, instead of "
    "sqrt(dh), the size of one head's vectors"
)
KV_SCALE_DH = "the scores are divided by dh instead of sqrt(dh)"
KV_WRONG_AXIS = "softmax over the wrong axis"
KV_NEW_KEY_LEFT_OUT = "the new key was left out: the query attended to the cache only"
KV_CACHE_LEFT_OUT = "the cache was left out: the query attended to the new key only"
KV_MASKED = "a causal mask hid the cached keys"


def readable_step_inputs(
    batch: int, heads: int, cached: int, width: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """Inputs ``(q, k_new, v_new, cache)`` of ``attention_step`` whose output can be read.

    Queries and keys are random (float64). Value number j is the one-hot vector e_j: the cached
    values are e_0 .. e_{T-1} and the new value e_T (T = ``cached``), so that the first T + 1
    entries of the output are the attention weights themselves (old keys first, the new key
    last) and the other entries are 0. ``cache`` is None when ``cached`` is 0. Needs
    ``width >= cached + 2``, so that sqrt(dh) differs from sqrt(T), sqrt(T + 1) and 1.
    """
    if width < cached + 2:
        raise ValueError(f"width {width} is too small for {cached} cached positions")
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, 1, width, generator=gen, dtype=torch.float64)
    keys = torch.randn(batch, heads, cached + 1, width, generator=gen, dtype=torch.float64)
    values = torch.eye(cached + 1, width, dtype=torch.float64).expand(batch, heads, -1, -1)
    cache = None if cached == 0 else (keys[:, :, :cached].clone(), values[:, :, :cached].clone())
    return q, keys[:, :, cached:].clone(), values[:, :, cached:].clone(), cache


def diagnose_attention_step(
    attention_step: Callable[..., object],
    batch: int,
    heads: int,
    cached: int,
    width: int,
    seed: int = 0,
) -> None:
    """One call of ``attention_step`` on :func:`readable_step_inputs`: the output's shape, the
    cache it returns (one position longer, old first, new last) and the attention weights read
    from the output (probabilities over the keys, the new key included, at temperature
    sqrt(dh))."""
    q, k_new, v_new, cache = readable_step_inputs(batch, heads, cached, width, seed)
    old = None if cache is None else (cache[0].clone(), cache[1].clone())
    result = attention_step(q.clone(), k_new.clone(), v_new.clone(), old)
    diagnose_step_result(result, q, k_new, v_new, cache)


def _pair(value: object, name: str, form: str) -> tuple[object, object]:
    check(
        isinstance(value, (tuple, list)) and len(value) == 2,
        expected_got(f"{name} should return a pair.", form, type(value).__name__),
    )
    assert isinstance(value, (tuple, list))
    return value[0], value[1]


def _step_name(q: torch.Tensor, cached: int) -> str:
    cache = "cache=None" if cached == 0 else f"a cache of T={cached} positions"
    return f"attention_step(q {tuple(q.shape)}, k_new, v_new, {cache})"


def diagnose_step_result(
    result: object,
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor] | None,
) -> None:
    """:func:`diagnose_attention_step` on what ``attention_step`` returned for the inputs of
    :func:`readable_step_inputs`."""
    batch, heads, _, width = q.shape
    cached = 0 if cache is None else int(cache[0].size(2))
    name = _step_name(q, cached)
    out, new_cache = _pair(result, name, "(out, (k, v))")
    out = check_tensor(out, f"the output of {name}")
    if cached > 0 and tuple(out.shape) == (batch, heads, cached + 1, width):
        fail(
            f"the output of {name} has {cached + 1} rows, one per key, where there is one new "
            "query. Was a causal mask added? A mask of shape (T + 1, T + 1) added to the scores "
            "(B, H, 1, T + 1) broadcasts them to T + 1 queries. No mask is needed: the new "
            "query is the last position, and every cached key is in its past."
        )
    check(
        tuple(out.shape) == (batch, heads, 1, width),
        expected_got(
            f"the output of {name} has the wrong shape: one vector per head for the new query.",
            (batch, heads, 1, width),
            tuple(out.shape),
        ),
    )
    diagnose_new_cache(new_cache, name, k_new, v_new, cache)
    keys = k_new if cache is None else torch.cat([cache[0], k_new], dim=2)  # (B, H, T + 1, dh)
    _diagnose_step_weights(out.detach().to(torch.float64)[:, :, 0], q, keys, name)


def _concatenated(
    got: torch.Tensor, old: torch.Tensor | None, new: torch.Tensor, new_first: bool = False
) -> bool:
    """True when ``got`` holds ``old`` then ``new`` along the positions (or ``new`` first)."""
    parts = [new] if old is None else ([new, old] if new_first else [old, new])
    return same_values(got, torch.cat(parts, dim=2), 1e-6, 1e-6)


def diagnose_new_cache(
    new_cache: object,
    name: str,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor] | None,
) -> None:
    """The cache returned by a step: a pair (k, v), one position longer than ``cache``, the old
    keys and values first and the new ones last."""
    cached = 0 if cache is None else int(cache[0].size(2))
    if new_cache is None:
        fail(
            f"{name}: {KV_NOT_UPDATED}: it returned None as the cache. Return (out, (k, v)) "
            "with k and v holding the T + 1 keys and values (the cached ones, then the new "
            "one), or the next step will not see this token."
        )
    k, v = _pair(new_cache, f"the cache returned by {name}", "(k, v)")
    k = check_tensor(k, f"the keys of the cache returned by {name}")
    v = check_tensor(v, f"the values of the cache returned by {name}")
    if cache is not None and same_values(k, cache[0], 0, 0) and same_values(v, cache[1], 0, 0):
        fail(
            f"{name}: {KV_NOT_UPDATED}: it returned the cache it was given ({cached} positions), "
            "without the new key and value. The next step would not see this token: return "
            "the concatenated (k, v), one position longer."
        )
    expected = (*k_new.shape[:2], cached + 1, k_new.size(-1))
    for tensor, what in [(k, "keys"), (v, "values")]:
        check(
            tuple(tensor.shape) == expected,
            expected_got(
                f"the {what} of the cache returned by {name} have the wrong shape. The cache "
                "grows by one position per step: the T cached positions plus the new one.",
                expected,
                tuple(tensor.shape),
            ),
        )
    old_k, old_v = (None, None) if cache is None else cache
    if _concatenated(k, old_k, k_new) and _concatenated(v, old_v, v_new):
        return
    if _concatenated(k, old_k, k_new, new_first=True) and _concatenated(
        v, old_v, v_new, new_first=True
    ):
        fail(
            f"{name}: {KV_FRONT}. Attention itself ignores the order of the keys (this step's "
            "output is not affected), but the cache is read by position: index t must hold "
            "the key and value of position t, as the full model computes them, so that it can "
            "be cut, inspected or shared by position. Append: torch.cat([cached, new], dim=2)."
        )
    if _concatenated(k, old_v, v_new) and _concatenated(v, old_k, k_new):
        fail(f"{name}: {KV_SWAPPED}: return (k, v), the keys first.")
    fail(
        expected_got(
            f"the cache returned by {name} does not hold the old keys and values followed by "
            "the new ones.",
            "(torch.cat([cached k, k_new], dim=2), torch.cat([cached v, v_new], dim=2))",
            "other values",
        )
    )


def _diagnose_step_weights(
    row: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, name: str
) -> None:
    """The weights read from one output row (B, H, dh) of :func:`readable_step_inputs`."""
    batch, heads, n_keys, width = keys.shape
    cached = n_keys - 1
    weights, rest = row[..., :n_keys], row[..., n_keys:]  # (B, H, T + 1), (B, H, dh - T - 1)
    check(
        not bool(torch.isnan(row).any()) and not bool(torch.isinf(row).any()),
        f"{name}: the output holds NaN or infinite values. A division by zero? With cache=None "
        "there are no cached positions (T = 0): the scale is sqrt(dh), not sqrt(T).",
    )
    first_only = ((weights[..., 0] - 1).abs() < 1e-6) & (weights[..., 1:].abs() < 1e-6).all(-1)
    if cached > 0 and bool(first_only.all()):
        fail(
            f"{name}: {KV_MASKED}: the new query attended to the first key only. A causal mask "
            "made for one query and T + 1 keys (is_causal=True, or tril of a (1, T + 1) matrix) "
            "is aligned top-left: it lets query 0 see key 0 only. But the new query is the LAST "
            "position: it may see every cached key and itself. No mask is needed here."
        )
    sums = weights.sum(dim=-1)  # (B, H)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
        if torch.allclose(weights, torch.ones_like(weights), atol=1e-6):
            fail(
                f"{name}: {KV_WRONG_AXIS}: every weight is 1 (the output is the sum of the "
                "values). The softmax ran over an axis of length 1, such as the query axis "
                "(dim=-2), which holds the single new query. Take it over the keys (dim=-1)."
            )
        for axis, what in [(1, "heads (dim=1)"), (0, "batch (dim=0)")]:
            across = weights.sum(dim=axis)
            if weights.size(axis) > 1 and torch.allclose(across, torch.ones_like(across)):
                fail(
                    f"{name}: {KV_WRONG_AXIS}: the weights sum to 1 over the {what}, not over "
                    "the keys. Take the softmax over the last axis (dim=-1)."
                )
        fail(
            expected_got(
                f"{name}: the attention weights of each head should sum to 1 over the T + 1 "
                "keys. (In this check value j is the one-hot vector e_j, so the output's first "
                "T + 1 entries are the weights.)",
                1.0,
                round(float(sums.flatten()[0]), 6),
                "softmax over the keys (the last axis of the scores (B, H, 1, T + 1)).",
            )
        )
    check(
        bool((weights >= -1e-9).all()) and bool((rest.abs() < 1e-6).all()),
        f"{name}: the output is not a weighted average of the values (here value j is the "
        "one-hot vector e_j: the output should hold the weights, between 0 and 1, in its first "
        "T + 1 entries and 0 after them). Return softmax(scores) @ v.",
    )
    if cached > 0 and bool((weights[..., cached].abs() < 1e-12).all()):
        fail(
            f"{name}: {KV_NEW_KEY_LEFT_OUT}. The new token attends to itself too: concatenate "
            "the new key and value to the cache first, then attend over all T + 1 positions."
        )
    if cached > 0 and bool((weights[..., :cached].abs() < 1e-12).all()):
        fail(
            f"{name}: {KV_CACHE_LEFT_OUT}. The cache holds the earlier positions, which the new "
            "token must see: attend over the T cached keys and the new one."
        )
    _diagnose_step_temperature(weights, q, keys, name)


def _diagnose_step_temperature(
    weights: torch.Tensor, q: torch.Tensor, keys: torch.Tensor, name: str
) -> None:
    """Read the factor the scores q.k were divided by from the log-ratios of the weights."""
    n_keys, width = keys.size(2), keys.size(3)
    scores = (q.to(torch.float64) @ keys.to(torch.float64).transpose(-2, -1))[:, :, 0]
    usable = weights > 1e-30
    count = usable.sum(dim=-1, keepdim=True).clamp_min(1)
    logits = torch.where(usable, weights.clamp_min(1e-300).log(), 0.0)
    x = torch.where(usable, scores - (scores * usable).sum(-1, keepdim=True) / count, 0.0)
    y = torch.where(usable, logits - (logits * usable).sum(-1, keepdim=True) / count, 0.0)
    spread = float((x * x).sum())
    if spread < 1e-6:
        return
    slope = float((x * y).sum()) / spread  # log-weights = scores / factor + a constant per row
    if slope <= 0:
        return  # not a temperature; the comparison over a whole sequence says what is wrong
    factor = 1.0 / slope
    if math.isclose(factor, math.sqrt(width), rel_tol=1e-3):
        return
    if math.isclose(factor, 1.0, rel_tol=1e-3):
        fail(f"{name}: {KV_NO_SCALE}, with dh = {width} the last dimension of q and k.")
    if any(math.isclose(factor, math.sqrt(n), rel_tol=1e-3) for n in (n_keys, n_keys - 1)):
        fail(
            f"{name}: {KV_SCALE_KEYS}. The scale keeps the scores of order 1 whatever the size "
            f"of the vectors (here dh = {width}): it does not change with the number of "
            f"positions (here T + 1 = {n_keys} keys)."
        )
    if math.isclose(factor, width, rel_tol=1e-3):
        fail(f"{name}: {KV_SCALE_DH} (dh = {width}).")
    fail(
        expected_got(
            f"{name}: the softmax temperature is wrong: the scores q.k are divided by about "
            f"{factor:.4g}.",
            f"sqrt(dh) = {math.sqrt(width):.4g}",
            f"{factor:.4g}",
        )
    )


def sequence_inputs(
    batch: int,
    heads: int,
    length: int,
    width: int,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random queries, keys and values (B, H, L, dh) of a whole sequence."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, heads, length, width)
    q, k, v = (torch.randn(shape, generator=gen, dtype=dtype) for _ in range(3))
    return q, k, v


def step_through(
    attention_step: Callable[..., object], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> list[object]:
    """Feed a sequence (B, H, L, dh) to ``attention_step`` one position at a time.

    The first call gets ``cache=None``, each later call the cache the previous one returned.
    Returns what every call returned; it stops early when a call returns no ``(out, (k, v))``
    pair of tensors, whose cache could not be fed to the next call.
    """
    results: list[object] = []
    cache = None
    for t in range(q.size(2)):
        now = slice(t, t + 1)
        result = attention_step(
            q[:, :, now].clone(), k[:, :, now].clone(), v[:, :, now].clone(), cache
        )
        results.append(result)
        cache = _returned_cache(result)
        if cache is None:
            break
    return results


def _returned_cache(result: object) -> object:
    """The (k, v) pair of tensors that a step returned, or None."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        pair = result[1]
        if isinstance(pair, (tuple, list)) and len(pair) == 2:
            if all(isinstance(x, torch.Tensor) for x in pair):
                return pair
    return None


def diagnose_steps(
    results: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """What :func:`step_through` returned: every step's output (B, H, 1, dh) and its cache,
    one position longer each step, holding the keys and values of the positions so far in
    order. Returns the outputs of all the steps side by side (B, H, L, dh)."""
    batch, heads, length, width = q.shape
    check(isinstance(results, list) and results, "step_through returned no step.")
    assert isinstance(results, list)
    outputs = []
    for t, result in enumerate(results):
        name = f"attention_step at step {t} of a sequence of {length} positions"
        if t == 0:
            name += " (cache=None)"
        out, new_cache = _pair(result, name, "(out, (k, v))")
        out = check_tensor(out, f"the output of {name}", shape=(batch, heads, 1, width))
        old = None if t == 0 else (k[:, :, :t], v[:, :, :t])
        diagnose_new_cache(new_cache, name, k[:, :, t : t + 1], v[:, :, t : t + 1], old)
        outputs.append(out)
    check(
        len(outputs) == length,
        f"attention_step stopped returning a cache after {len(outputs)} of {length} steps.",
    )
    return torch.cat(outputs, dim=2)
