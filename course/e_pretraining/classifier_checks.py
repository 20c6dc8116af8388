"""Checks of E's classifier: the last real token, the classification head, a frozen base and
the count of trainable parameters. Each raises :class:`GradingError` with a message that names
the mistake; none computes the answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from course.testcells import check, check_tensor, expected_got, fail


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
        got = last_token_states(position_states(batch, length, width), lengths)
    except IndexError as error:
        fail(
            f"{name} raised IndexError ({error}). Off by one? A sequence of length n has its "
            "last real token at position n - 1; the longest one ends at position L - 1."
        )
    diagnose_last_token_result(got, lengths, length, width)


def _last_token_name(lengths: torch.Tensor, length: int, width: int) -> str:
    batch = lengths.numel()
    return (
        f"last_token_states(hidden (B={batch}, L={length}, D={width}), lengths={lengths.tolist()})"
    )


def diagnose_last_token_result(got: object, lengths: torch.Tensor, length: int, width: int) -> None:
    """:func:`diagnose_last_token` on what ``last_token_states`` returned for
    :func:`position_states` ``(B, length, width)`` and ``lengths``."""
    batch = lengths.numel()
    name = _last_token_name(lengths, length, width)
    states = check_tensor(got, name)
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
        diagnose_classifier_output_result(
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


def diagnose_classifier_output_result(
    got: Callable[[str], object],
    record: Callable[[], dict],
    ids: torch.Tensor,
    lengths: torch.Tensor,
    n_classes: int,
) -> None:
    """:func:`diagnose_classifier_output` on the classifier's outputs: ``got(key)`` is its
    output on the input :func:`classifier_inputs` names ``key``, ``record()`` what
    :func:`record_forward` recorded on the batch."""
    batch, length = ids.shape
    logits = check_tensor(got("batch"), "model(ids, lengths)")
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
        torch.allclose(got("more padding"), logits, atol=1e-5),
        "Adding more padding after the sentences changed their scores: a sentence's score "
        "must depend on its real tokens only (the state at position lengths[b] - 1, computed "
        "under the causal mask)." + _cause(seen, lengths, length),
    )
    for b in range(batch):
        check(
            torch.allclose(got(f"alone {b}"), logits[b : b + 1], atol=1e-5),
            f"Sentence {b} classified alone, without padding, got other scores than in the "
            "padded batch: a sentence's score must not depend on the padding or on the other "
            "sentences." + _cause(seen, lengths, length),
        )
    real = torch.arange(length) < lengths.unsqueeze(1)  # (B, L)
    if _other_real_words(ids, real) is None:
        return
    same = (got("changed") - logits).abs().amax(dim=-1) < 1e-6  # (B,)
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
