"""Interactive explorers (ipywidgets) used in the notebooks.

While nbgrader runs a notebook headless (:func:`course.mode.under_nbgrader`) an explorer draws
its first view as a plain figure and returns None: nobody moves the sliders of an autograded
notebook, and widget messages only slow the grading kernel down.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from course.mode import under_nbgrader


def positional_encoding_explorer(table: torch.Tensor) -> widgets.interactive | None:
    """Sliders over position and dimension of a positional-encoding table ``(max_len, D)``.

    Left: the encoding vector of the chosen position. Right: the chosen dimension as a function
    of position (a sine or cosine wave whose wavelength grows with the dimension), with the
    chosen position marked.
    """
    table = table.detach().cpu()
    length, width = table.shape

    def draw(position: int, dimension: int) -> None:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), layout="constrained")
        left.bar(range(width), table[position].numpy(), color="tab:blue")
        left.set_title(f"PE[{position}, :] (the vector added at position {position})")
        left.set_xlabel("dimension")
        left.set_ylim(-1.1, 1.1)
        right.plot(range(length), table[:, dimension].numpy(), color="tab:orange")
        right.axvline(position, color="black", linestyle="--", linewidth=1)
        wave = "sin" if dimension % 2 == 0 else "cos"
        right.set_title(f"PE[:, {dimension}] ({wave}) over positions")
        right.set_xlabel("position")
        right.set_ylim(-1.1, 1.1)
        plt.show()

    if under_nbgrader():
        draw(0, 0)
        return None
    return widgets.interactive(
        draw,
        position=widgets.IntSlider(value=0, min=0, max=length - 1, description="position"),
        dimension=widgets.IntSlider(value=0, min=0, max=width - 1, description="dimension"),
    )
