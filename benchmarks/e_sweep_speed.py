"""E's label-count experiment: one run at a time against the runs of a setup trained together.

    python benchmarks/e_sweep_speed.py [--device cuda] [--runs 15] [--steps 50] [--profile]
    python benchmarks/e_sweep_speed.py --graphs --alone 1 --steps 150   # on a GPU: CUDA graphs

E's notebook trains, per setup, 15 classifiers (3 seeds x 5 label counts) for 200 steps of 8
reviews each. This script times one such setup, the classifier fine-tuned whole (E's
TransformerLM of the shipped configuration, a head on the last real token), on random reviews
of the real lengths' range: ``finetune.train_classifier`` run after run, and
``together.train_together`` for all of them at once. It prints milliseconds per optimizer step
(per run, and per batched step) and the speed-up; with ``--profile`` the operations that took
the most time in the batched steps.

With ``--graphs`` it also times the runs together with every batch of one width, once as it is
and once captured in a CUDA graph (``train_together(..., cuda_graph=True)``; on a CPU nothing is
captured). E's given model keeps its step on the device, so the graph holds the whole step. Each
line gives the runs' mean training loss, so that they are seen to train alike (with batches of
one width, dropout draws other numbers).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tools/

from course.e_pretraining import finetune, together  # noqa: E402
from course.e_pretraining.checkpoint import SHIPPED  # noqa: E402
from tools.pretrain_review_lm import given_lm  # noqa: E402

GIVEN = given_lm()  # TransformerLM and causal_mask as E's notebook gives them


class LastTokenClassifier(nn.Module):
    """E's SentimentClassifier: the language model's head replaced, read at the last token."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm
        self.lm.decoder = nn.Linear(lm.d_model, 2)

    def forward(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        hidden = self.lm.encode(src, GIVEN.causal_mask(src.size(1)))  # (B, L, D)
        rows = torch.arange(src.size(0), device=src.device)  # as the reference last_token_states
        return self.lm.decoder(hidden[rows, lengths - 1])  # (B, 2)


def reviews(n: int, vocab: int, seed: int) -> finetune.Labelled:
    """``n`` random right-padded reviews of 5 to 64 tokens (E's cut), random labels."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(5, 65, (n,), generator=generator)
    ids = torch.randint(4, vocab, (n, 64), generator=generator)
    ids[torch.arange(64) >= lengths.unsqueeze(1)] = 0
    return finetune.Labelled(ids, lengths, torch.randint(0, 2, (n,), generator=generator))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=15, help="runs of one setup (E: 15)")
    parser.add_argument("--steps", type=int, default=50, help="optimizer steps per run (E: 200)")
    parser.add_argument("--alone", type=int, default=3, help="runs timed one at a time")
    parser.add_argument("--profile", action="store_true", help="the batched steps' top operations")
    parser.add_argument("--graphs", action="store_true", help="also in a CUDA graph")
    args = parser.parse_args()
    device = torch.device(args.device)
    config = torch.load(SHIPPED, map_location="cpu", weights_only=False)["config"]
    trains = [reviews(400, config["ntokens"], seed) for seed in range(args.runs)]

    def models(count: int) -> list[nn.Module]:
        torch.manual_seed(0)
        return [LastTokenClassifier(GIVEN.TransformerLM(**config)).to(device) for _ in range(count)]

    train_args = {"steps": args.steps, "batch_size": 8, "lr": 5e-4}
    together.train_together(models(2), trains[:2], [0, 1], **{**train_args, "steps": 3})  # warm-ups
    alone_models = models(args.alone)
    finetune.train_classifier(alone_models[0], trains[0], None, **{**train_args, "steps": 3})
    synchronize(device)
    start = time.perf_counter()
    for seed, model in enumerate(alone_models):
        finetune.train_classifier(model, trains[seed], None, seed=seed, **train_args)
    synchronize(device)
    alone = (time.perf_counter() - start) / (args.alone * args.steps)
    batched, loss = timed_together(models(args.runs), trains, train_args)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"{name}, torch {torch.__version__}, {args.runs} runs of {args.steps} steps of 8")
    print(f"one run at a time: {1000 * alone:.1f} ms a step ({args.alone} runs timed)")
    print(f"{args.runs} runs together: {1000 * batched:.1f} ms a batched step (loss {loss:.3f})")
    print(f"speed-up for {args.runs} runs: {args.runs * alone / batched:.1f} x")
    if args.graphs:
        graphed = {**train_args, "cuda_graph": True}
        seconds, loss = timed_together(models(args.runs), trains, graphed)
        how = "in a CUDA graph" if device.type == "cuda" else "no graph on a CPU"
        print(
            f"{args.runs} runs together, batches of one width, {how}: {1000 * seconds:.1f} ms a "
            f"batched step (loss {loss:.3f})"
        )
    if args.profile:
        from torch.profiler import profile

        with profile() as prof:
            together.train_together(models(args.runs), trains, list(range(args.runs)), **train_args)
            synchronize(device)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def timed_together(batch: list[nn.Module], trains: list, train_args: dict) -> tuple[float, float]:
    """Seconds a batched step of ``train_together`` on ``batch`` (capture included), and the
    runs' mean training loss."""
    device = next(batch[0].parameters()).device
    synchronize(device)
    start = time.perf_counter()
    histories = together.train_together(batch, trains, list(range(len(batch))), **train_args)
    synchronize(device)
    seconds = (time.perf_counter() - start) / train_args["steps"]
    return seconds, sum(h.train_loss[-1] for h in histories) / len(histories)


if __name__ == "__main__":
    main()
