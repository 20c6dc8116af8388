"""Loading the pretrained checkpoints that ship with the course (assignments E and G).

A checkpoint is a dict saved by an instructor's script in ``tools/``: "config" (the arguments of
the notebook's model class), "state_dict" (float16 weights, without the buffers the constructor
rebuilds) and what made them (seed, data hash, budget, losses, the vocabulary).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

COMPUTED = ("pos_encoder.pe",)  # buffers rebuilt by the model's constructor, not stored


def load_weights(
    model_class: type[nn.Module], path: str | Path, shipped: Path, script: str
) -> tuple[nn.Module, dict]:
    """Build ``model_class(**config)`` from the checkpoint at ``path`` and load its weights.

    Returns (model in float32 and eval mode, the checkpoint without its weights). ``shipped``
    (the course's own checkpoint) and ``script`` (the instructor's script that makes it) are
    named when the file is missing.
    """
    path = Path(path)
    if not path.is_file():
        in_repo = shipped.resolve().relative_to(Path(__file__).resolve().parents[1])
        raise FileNotFoundError(
            f"No pretrained checkpoint at {path}. It ships with the course (restore it with "
            f"`git checkout {in_repo}`), or an instructor makes one with `python {script}`."
        )
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = model_class(**checkpoint["config"])
    weights = {k: v.float() for k, v in checkpoint["state_dict"].items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if set(missing) - set(COMPUTED) or unexpected:
        raise ValueError(
            f"{path} does not fit {model_class.__name__}: missing {missing}, unexpected "
            f"{unexpected}. Is it the model given in the notebook?"
        )
    model.eval()
    return model, {k: v for k, v in checkpoint.items() if k != "state_dict"}


def pretrained_loader(
    shipped: Path, script: str, vocab_key: str, vocab_class: Callable
) -> Callable[..., tuple[nn.Module, object, dict]]:
    """The ``load_pretrained(model_class, path=shipped)`` of an assignment (E's, G's).

    Its vocabulary is ``vocab_class`` built on the checkpoint's ``vocab_key`` entry.
    """

    def load_pretrained(
        model_class: type[nn.Module], path: str | Path = shipped
    ) -> tuple[nn.Module, object, dict]:
        """Build ``model_class(**config)`` and load the checkpoint's weights into it.

        Returns (model in float32 and eval mode, vocabulary, info), where ``info`` is the
        checkpoint without its weights and vocabulary (config, seed, data hash, budget, losses).
        """
        model, checkpoint = load_weights(model_class, path, shipped, script)
        vocab = vocab_class(checkpoint.pop(vocab_key))
        return model, vocab, checkpoint

    return load_pretrained
