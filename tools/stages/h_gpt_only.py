"""Assignment H's experiment for the student's GPT alone (reference solutions, full mode).

Runs the code cells of ``source/h_own_gpt/own_gpt.ipynb`` up to the experiment (test cells left
out; the student's merges replaced by Hugging Face's, which the experiment uses anyway), then
trains the GPT for the notebook's 1,000 steps with one thread and prints its validation curve.
``python tools/stages/h_gpt_only.py`` from the repository root printed, on 26 Nov 2026 (2-core
machine, loaded, 350 s)::

    GPT parameters 227584
    val curve [(0, 5.9083), (100, 4.4085), (200, 4.0712), (300, 3.9323), (400, 3.8408),
               (500, 3.7845), (600, 3.709), (700, 3.6652), (800, 3.6305), (900, 3.6107),
               (999, 3.5804)]
    TOKENS_PER_CHAR 0.5026693736371156
"""

import json
import os
import time

import torch

os.environ["COURSE_FAST"] = "0"
torch.set_num_threads(1)


def main() -> None:
    """Run the cells, train the GPT, print its curve."""
    notebook = json.load(open("source/h_own_gpt/own_gpt.ipynb"))
    ns: dict = {}
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or cell["metadata"].get("nbgrader", {}).get("grade"):
            continue
        if source.startswith("torch.manual_seed(0)\ngpt = GPT("):
            break
        source = source.replace("%matplotlib inline", "")
        exec(source.replace("ours = bpe_merges(counts, N_MERGES)", "ours = theirs"), ns)
    torch.manual_seed(0)
    sizes = ("VOCAB", "D_MODEL", "NHEAD", "NLAYERS", "BLOCK", "DROPOUT")
    gpt = ns["GPT"](*(ns[k] for k in sizes))
    start = time.time()
    history = ns["train"](gpt, "your GPT")
    print("GPT parameters", sum(p.numel() for p in gpt.parameters()))
    print(
        "val curve",
        [(s, round(v, 4)) for s, v in zip(history["steps"], history["val"], strict=True)],
    )
    print("TOKENS_PER_CHAR", ns["TOKENS_PER_CHAR"], "seconds", time.time() - start)


if __name__ == "__main__":
    main()
