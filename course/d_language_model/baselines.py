"""Assignment D's two baselines: an LSTM language model and the unigram model.

The LSTM trains with the same loop as the students' Transformer (:func:`course.training.train_lm`);
the unigram model ignores context altogether, the best a model can do without it.
"""

from __future__ import annotations

import torch
from torch import nn


class LSTMModel(nn.Module):
    """A word-level LSTM language model: embedding, LSTM layers, a Linear layer to the vocabulary.

    It takes the same arguments as the Transformer's forward, ``(src (B, L), src_mask)``, and
    ignores the mask: an LSTM reads left to right, so it cannot see the future anyway.
    """

    def __init__(
        self, ntokens: int, d_model: int, d_hid: int, nlayers: int, dropout: float = 0.2
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(ntokens, d_model)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(
            d_model, d_hid, nlayers, batch_first=True, dropout=dropout if nlayers > 1 else 0.0
        )
        self.project = nn.Linear(d_hid, d_model) if d_hid != d_model else nn.Identity()
        self.decoder = nn.Linear(d_model, ntokens)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (B, L) token ids -> logits (B, L, ntokens). ``src_mask`` is ignored."""
        x = self.dropout(self.embedding(src))  # (B, L, d_model)
        h, _ = self.lstm(x)  # (B, L, d_hid)
        return self.decoder(self.dropout(self.project(h)))  # (B, L, ntokens)


def unigram_cross_entropy(
    train_stream: torch.Tensor, val_stream: torch.Tensor, vocab_size: int
) -> float:
    """Mean NLL (nats) of ``val_stream`` under train-set word frequencies, add-one smoothed.

    p(w) = (count_train(w) + 1) / (N_train + V): the best a model can do that ignores context.
    """
    counts = torch.bincount(train_stream, minlength=vocab_size).double() + 1.0  # (V,)
    log_p = counts.log() - counts.sum().log()
    return float(-log_p[val_stream].mean())
