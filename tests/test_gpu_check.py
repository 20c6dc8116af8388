"""tools/gpu_check.py, the script a session with a GPU runs: it executes a notebook in full mode on
the device asked for and reports the device line, the times and the printed numbers (checked here
on the CPU, with a small notebook)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools import gpu_check


def small_notebook(path: Path, last: str) -> Path:
    setup = nbformat.v4.new_code_cell(
        "from course.device import pick_device\nfrom course.mode import is_grading\n"
        "DEVICE = pick_device()\nFULL = not is_grading()"
    )
    setup.metadata["nbgrader"] = {"grade_id": "setup", "locked": True}
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        setup,
        nbformat.v4.new_code_cell("PRETRAIN_STEPS = 15_000\nprint('no number here')"),
        nbformat.v4.new_code_cell(last),
    ]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def full_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu_check's environment for this test only (monkeypatch restores it)."""
    monkeypatch.setenv("COURSE_FAST", "1")
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    gpu_check.full_mode_on("cpu")


def test_a_notebook_runs_in_full_mode_on_the_device_asked(tmp_path: Path, full_mode) -> None:
    source = small_notebook(
        tmp_path / "n.ipynb",
        "print(f'full mode {FULL}, steps {PRETRAIN_STEPS}')\nprint('accuracy 41.6%')",
    )
    (tmp_path / "out").mkdir()
    summary = gpu_check.run_notebook(source, 1500, 120, tmp_path / "out")
    assert summary["error"] is None
    assert summary["device_line"] == "training on cpu: chosen by COURSE_DEVICE"
    assert summary["numbers"] == ["full mode True, steps 1500", "accuracy 41.6%"]
    assert len(summary["slowest_cells"]) == 3 and summary["seconds"] > 0
    assert (tmp_path / "out" / "n.ipynb").is_file()


def test_a_failing_notebook_is_reported(tmp_path: Path, full_mode) -> None:
    source = small_notebook(tmp_path / "n.ipynb", "raise ValueError('out of memory')")
    summary = gpu_check.run_notebook(source, 1500, 120, tmp_path)
    assert "out of memory" in summary["error"]


def test_graphs_are_asked_of_the_kernels_only_with_the_option(monkeypatch, full_mode) -> None:
    monkeypatch.setenv("COURSE_CUDA_GRAPHS", "1")  # left from an earlier run; restored after
    gpu_check.full_mode_on("cpu")
    assert "COURSE_CUDA_GRAPHS" not in gpu_check.os.environ
    gpu_check.full_mode_on("cpu", graphs=True)
    assert gpu_check.os.environ["COURSE_CUDA_GRAPHS"] == "1"


def test_a_notebook_that_trained_elsewhere_fails_the_run() -> None:
    """The GPU run's own check: a setup line on another device, or none, is a failure."""
    on = {"device_line": "training on cuda (NVIDIA H100 80GB HBM3): the GPU found"}
    assert gpu_check.wrong_device(on, "cuda") is None
    cpu = {"device_line": "training on cpu: no GPU here"}
    assert "trained elsewhere" in gpu_check.wrong_device(cpu, "cuda")
    assert "no 'training on' line" in gpu_check.wrong_device({"device_line": None}, "cuda")
    assert "trained elsewhere" in gpu_check.wrong_device(on, "cu")  # a whole word, not a prefix


def test_the_gpu_run_says_what_only_it_proves(monkeypatch, capsys) -> None:
    """Asked for cuda where there is none, it says so; the facts it alone proves are listed."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check.sys, "argv", ["gpu_check.py", "--only", "h"])
    assert gpu_check.main() == 2
    assert "no CUDA GPU here" in capsys.readouterr().err
    facts = " ".join(gpu_check.ONLY_ON_A_GPU)
    for fact in ("pick_device", "CUDA graphs", "bfloat16", "times"):
        assert fact in facts, fact
