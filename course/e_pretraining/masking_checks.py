"""Checks of E's BERT corruption (``mask_tokens``): the 80/10/10 shares, the labels, the use of
the generator. Each raises :class:`GradingError` with a message that names the mistake.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from course.testcells import check, check_tensor, expected_got, fail

IGNORE = -100  # the label that nn.functional.cross_entropy skips by default


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
    got = mask_tokens(ids, MASK_ID, vocab_size, 0.15, torch.Generator().manual_seed(1))
    return diagnose_mask_tokens_result(got, ids, original, vocab_size)


def diagnose_mask_tokens_result(
    got: object, ids: torch.Tensor, original: torch.Tensor, vocab_size: int
) -> dict[str, float]:
    """:func:`diagnose_mask_tokens` on what ``mask_tokens(ids, MASK_ID, vocab_size, 0.15, ...)``
    returned, ``ids`` as the call left it, and ``original``, the ids before the call."""
    shape = tuple(original.shape)
    name = f"mask_tokens(input_ids {shape}, ...)"
    check(
        isinstance(got, (tuple, list)) and len(got) == 2,
        expected_got(f"{name} should return a pair.", "(inputs, labels)", type(got).__name__),
    )
    inputs = check_tensor(got[0], f"inputs of {name}", shape=shape, dtype=torch.long)
    labels = check_tensor(got[1], f"labels of {name}", shape=shape, dtype=torch.long)
    check(
        torch.equal(ids, original),
        f"{name} changed the tensor it was given. Corrupt a copy (input_ids.clone()): the "
        "caller may still need the original ids.",
    )
    _diagnose_labels(inputs, labels, original, name)
    shares = mlm_shares(original, inputs, labels, MASK_ID)
    _diagnose_shares(shares, name)
    chosen = labels != IGNORE
    replaced = inputs[chosen & (inputs != MASK_ID) & (inputs != original)]
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


def _diagnose_labels(
    inputs: torch.Tensor, labels: torch.Tensor, original: torch.Tensor, name: str
) -> None:
    """The labels: the original id at the chosen positions, IGNORE elsewhere, where the inputs
    are left as they were."""
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


def _diagnose_shares(shares: dict[str, float], name: str) -> None:
    """The shares of :func:`mlm_shares`: 15% chosen; of those 80% masked, 10% random, 10% kept."""
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

    diagnose_mask_generator_result(run)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def diagnose_mask_generator_result(got: Callable[[int], object]) -> None:
    """:func:`diagnose_mask_generator` on the outputs of ``mask_tokens``: ``got(i)`` is what it
    returned on :func:`generator_input` for the generator seed ``GENERATOR_SEEDS[i]``."""

    def run(index: int) -> tuple[torch.Tensor, torch.Tensor]:
        out = got(index)
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
