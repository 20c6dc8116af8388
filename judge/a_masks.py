"""Assignment A's verdicts on observations: the masks, the positional encoding, rotary positions."""

from __future__ import annotations

import math

import torch

from course.a_masks import checks, probe
from course.testcells import check, check_close, check_tensor


def reference_table(max_len: int, width: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same), computed in float64."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    exponent = torch.arange(0, width, 2, dtype=torch.float64) / width  # (D/2,)
    angle = position * torch.exp(-math.log(10000.0) * exponent)  # (max_len, D/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1).float()  # (max_len, D)


def reference_rotary(x: torch.Tensor, base: float) -> torch.Tensor:
    """Pair (x[..., m, 2i], x[..., m, 2i+1]) turned by m * base^(-2i/d), computed in float64."""
    x = x.to(torch.float64)
    length, width = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # (d/2,)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * theta  # (L, d/2)
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def mask_visible(seed: int, got: object) -> None:
    checks.diagnose_causal_mask_result(got, 3)


def mask_hidden(seed: int, got: object) -> None:
    sizes = probe.mask_sizes(seed)
    check(isinstance(got, list) and len(got) == len(sizes), "not one mask per size")
    for size, mask in zip(sizes, got, strict=True):
        checks.diagnose_causal_mask_result(mask, size)


def padding_visible(seed: int, got: object) -> None:
    lengths, max_len = probe.VISIBLE_LENGTHS
    checks.diagnose_padding_mask_result(got, torch.tensor(lengths), max_len)


def padding_hidden(seed: int, got: object) -> None:
    cases = probe.padding_cases(seed)
    check(isinstance(got, list) and len(got) == len(cases), "not one mask per case")
    for (lengths, max_len), mask in zip(cases, got, strict=True):
        checks.diagnose_padding_mask_result(mask, torch.tensor(lengths), max_len)


def _encoding(got: dict, width: int, max_len: int, length: int, x: torch.Tensor) -> None:
    checks.diagnose_encoding_storage_facts(got, max_len, width)
    table = check_tensor(got["table"], "PositionalEncoding table", shape=(1, length, width))[0]
    expected = reference_table(max_len, width)[:length]
    check_close(table, expected, f"PositionalEncoding(d_model={width}) table", atol=1e-4)
    check_close(got["added"], x + expected, "PositionalEncoding(x)", atol=1e-4)


def pe_visible(seed: int, got: object) -> None:
    """As the visible cell: the d_model = 4 table, row 0, the buffer, the output's shape."""
    assert isinstance(got, dict)
    table = check_tensor(got["table"], "PositionalEncoding table", shape=(1, 10, 4))[0]
    checks.diagnose_encoding_table_value(table)
    check_close(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0]), "PE[0] (sin 0 = 0, cos 0 = 1)")
    checks.diagnose_encoding_storage_facts(got, 50, 4)
    check_tensor(got["added"], "PositionalEncoding(x)", shape=(3, 10, 4))


def pe_hidden(seed: int, got: object) -> None:
    assert isinstance(got, dict)
    cases = probe.encoding_cases(seed)
    check(len(got["cases"]) == len(cases), "not one observation per width")
    for (width, max_len, length), seen in zip(cases, got["cases"], strict=True):
        _encoding(seen, width, max_len, length, probe.encoding_input(seed, width, length))
    check(5000 * 8 in got["default"], "max_len should default to 5000.")
    moved = check_tensor(got["moved"], "PositionalEncoding in float64", dtype=torch.float64)
    check_close(moved[0], reference_table(5, 8).double(), "the table after .to(float64)", atol=1e-6)
    dropped = check_tensor(got["dropped"], "dropout(x + PE)", shape=(4, 64, 16))
    zero_share = (dropped == 0).float().mean().item()
    check(0.4 < zero_share < 0.6, f"dropout=0.5 zeroed {zero_share:.2f} of the outputs")
    kept = dropped != 0
    expected = 2 * (1 + reference_table(64, 16)).expand(4, 64, 16)
    check_close(dropped[kept], expected[kept], "dropout(x + PE) in training mode", atol=1e-4)


def rotary_visible(seed: int, got: object) -> None:
    """As the visible cell: the named mistakes, then the values for d = 4, L = 3."""
    x = torch.tensor(probe.ROTARY_VISIBLE)
    checks.diagnose_rotary_result(got, x, 10000.0)
    check_close(got, reference_rotary(x, 10000.0).float(), "apply_rotary(x)", atol=1e-4)


def rotary_hidden(seed: int, got: object) -> None:
    cases = probe.rotary_cases(seed)
    check(isinstance(got, list) and len(got) == len(cases), "not one output per case")
    for index, ((shape, base, dtype), seen) in enumerate(zip(cases, got, strict=True)):
        x = probe.rotary_input(seed, index, shape, dtype)
        left = check_tensor(seen["x"], "x after apply_rotary", shape=tuple(shape), dtype=dtype)
        check(torch.equal(left, x), "apply_rotary changed its input x in place.")
        used = 10000.0 if base is None else base
        checks.diagnose_rotary_result(seen["out"], x, used)
        expected = reference_rotary(x, used).to(dtype)
        check_close(seen["out"], expected, f"apply_rotary(x of shape {shape})", atol=1e-4)
