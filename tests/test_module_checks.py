"""The checks of a graded module give its parameters their own random values before they compare
(issue 43): at initialisation two LayerNorms, or two biases, are equal, and a module that used
one in place of the other would pass a comparison made with them."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from course.b_attention import checks as b_checks
from course.d_language_model import checks as d_checks
from course.testcells import randomise_parameters


def assert_all_distinct(tensors: dict[str, torch.Tensor]) -> None:
    for (a, x), (b, y) in itertools.combinations(tensors.items(), 2):
        if x.shape == y.shape:
            assert not torch.equal(x, y), f"{a} and {b} hold the same values"


class Attention(nn.Module):
    """B's projections, the biases started at 0 as nn.MultiheadAttention starts them."""

    def __init__(self, width: int) -> None:
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(width, width))
            nn.init.zeros_(getattr(self, name).bias)


class Layer(nn.Module):
    """B's TransformerLayer's parts."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.self_attn = Attention(width)
        self.linear1, self.linear2 = nn.Linear(width, hidden), nn.Linear(hidden, width)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)


def test_randomise_parameters_draws_each_tensor_once_and_repeats_with_its_seed() -> None:
    model = nn.Sequential(nn.Embedding(7, 4), nn.LayerNorm(4), nn.LayerNorm(4), nn.Linear(4, 7))
    model[3].weight = model[0].weight  # tied
    randomise_parameters(model, 3)
    assert model[3].weight is model[0].weight
    assert_all_distinct(dict(model.named_parameters()))
    first = [p.clone() for p in model.parameters()]
    randomise_parameters(model, 3)
    assert all(torch.equal(a, b) for a, b in zip(first, model.parameters(), strict=True))
    randomise_parameters(model, 4)
    assert not torch.equal(first[0], model[0].weight)


def test_b_checks_give_projections_and_norms_their_own_values() -> None:
    attention = Attention(8)
    b_checks.diagnose_projections(attention, 8)
    assert_all_distinct(dict(attention.named_parameters()))
    layer = Layer(8, 16)
    b_checks.diagnose_layer_parts(layer, 8, 16)
    assert_all_distinct(dict(layer.named_parameters()))


class TinyLM(nn.Module):
    """D's model's interface: embedding and decoder (its bias started at 0), no encoder."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding, self.decoder = nn.Embedding(9, 4), nn.Linear(4, 9)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, src: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(self.embedding(src))


def test_d_run_model_gives_the_same_random_values_at_every_call() -> None:
    model, src = TinyLM(), torch.randint(9, (2, 3))
    first = d_checks.run_model(model, src, None)
    assert model.decoder.bias.abs().min() > 0
    assert torch.equal(first, d_checks.run_model(model, src, None))
