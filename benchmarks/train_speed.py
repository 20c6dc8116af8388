"""Training throughput of the course's language-model loop, and the share of the machine it uses.

    python benchmarks/train_speed.py [--seconds 20] [--vocab 5000] [--seq-len 32] [--batch 32]

Trains, with ``course.training.train_lm`` (the loop of assignment D), the reference-size models
of the notebook for a fixed time each on a random token stream:

- the Transformer LM of assignment E (``TransformerLM`` of E's read-only cell: embedding * sqrt(d),
  sinusoidal positions, nn.TransformerEncoder with the causal mask, a Linear decoder), the same
  computation as the notebook's TransformerModel of assignment D;
- D's LSTMModel (``course.d_language_model.baselines``) of the same width and depth.

It prints tokens per second and the model FLOPs per second they achieve, as a fraction of this
machine's float32 matmul FLOP/s, measured in the same run on a large square torch.matmul.

Model FLOPs per training token (forward + backward = 3 x forward, a multiply-add = 2 FLOPs):

    6 * P_matmul  +  12 * nlayers * L * d_model       (Transformer)
    6 * P_matmul                                        (LSTM)

P_matmul counts the weights used in matrix products: per encoder layer 4 d^2 (Q, K, V, output
projections) + 2 d d_hid (feed-forward); per LSTM layer 4 h (input + h); and the decoder d V.
The embedding is a lookup (no FLOPs); biases, norms, softmax and activations are left out. The
attention term counts Q K^T and (weights) V over all L x L pairs (forward 4 L d per token and
layer), as the dense kernel computes them, masked or not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tools/

from course.d_language_model.baselines import LSTMModel  # noqa: E402
from course.training import train_lm  # noqa: E402
from tools.pretrain_review_lm import given_lm  # noqa: E402

GIVEN = given_lm()  # D's model as E's notebook gives it: TransformerLM, causal_mask


def matmul_flops_per_second(n: int = 2048, seconds: float = 3.0) -> float:
    """Best float32 FLOP/s of an n x n by n x n torch.matmul (2 n^3 FLOPs each)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)  # warm-up
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        torch.matmul(a, b)
        best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best


def transformer_flops_per_token(
    vocab: int, d: int, d_hid: int, nlayers: int, seq_len: int
) -> tuple[int, float]:
    """(P_matmul, training FLOPs per token) of the Transformer LM (formula in the docstring)."""
    p_matmul = nlayers * (4 * d * d + 2 * d * d_hid) + d * vocab
    return p_matmul, 6 * p_matmul + 12 * nlayers * seq_len * d


def lstm_flops_per_token(vocab: int, d: int, h: int, nlayers: int) -> tuple[int, float]:
    """(P_matmul, training FLOPs per token) of the LSTM LM."""
    p_matmul = sum(4 * h * ((d if i == 0 else h) + h) for i in range(nlayers)) + d * vocab
    return p_matmul, 6 * p_matmul


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="training time per model")
    parser.add_argument("--vocab", type=int, default=5000)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--nhead", type=int, default=4)
    parser.add_argument("--d-hid", type=int, default=256)
    parser.add_argument("--nlayers", type=int, default=2)
    args = parser.parse_args()
    V, L, d = args.vocab, args.seq_len, args.d_model

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    peak = matmul_flops_per_second()
    print(f"float32 matmul 2048^3: {peak / 1e9:.1f} GFLOP/s (best of 3 s)\n")

    stream = torch.randint(0, V, (400_000,), generator=torch.Generator().manual_seed(0))
    n = (len(stream) - 1) // L
    x, y = stream[: n * L].view(n, L), stream[1 : n * L + 1].view(n, L)
    torch.manual_seed(0)
    models = {
        "Transformer": (
            GIVEN.TransformerLM(V, d, args.nhead, args.d_hid, args.nlayers, dropout=0.2),
            transformer_flops_per_token(V, d, args.d_hid, args.nlayers, L),
        ),
        "LSTM": (
            LSTMModel(V, d, d, args.nlayers, dropout=0.2),
            lstm_flops_per_token(V, d, d, args.nlayers),
        ),
    }
    columns = ("params", "P_matmul", "MFLOP/tok", "tokens/s", "GFLOP/s", "of matmul")
    header = f"{'model':<12}" + "".join(f" {c:>10}" for c in columns)
    rows = []
    for name, (model, (p_matmul, flops_per_token)) in models.items():
        train_lm(
            model,
            x,
            y,
            x[:8],
            y[:8],
            causal_mask=GIVEN.causal_mask,
            batch_size=args.batch,
            max_steps=3,
            time_budget_s=None,
            progress=False,
        )
        history = train_lm(
            model, x, y, x[:8], y[:8], causal_mask=GIVEN.causal_mask, batch_size=args.batch,
            time_budget_s=args.seconds,
            eval_every=10**9, progress=False,
        )  # fmt: skip
        rate = history.tokens_per_second
        achieved = rate * flops_per_token
        rows.append(
            f"{name:<12} {sum(p.numel() for p in model.parameters()):>10,} {p_matmul:>10,} "
            f"{flops_per_token / 1e6:>10.2f} {rate:>10,.0f} {achieved / 1e9:>10.2f} "
            f"{achieved / peak:>10.1%}"
        )
    print(
        f"batch {args.batch} x seq_len {L}, V = {V}, d_model = {d}, "
        f"{args.nlayers} layers, {args.seconds:g} s of training each"
    )
    print(header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
