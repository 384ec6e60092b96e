"""`tracer runs` and `tracer show` on the H100 fixtures: load, GPU, learning and ranking (issue 24 items 1, 10, 11)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_tracer

H100 = "NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0"


def test_runs_fills_load_and_gpu_and_marks_the_diverged_run(shared_fixtures: Path) -> None:
    result = run_tracer("runs", "--runs", str(shared_fixtures / "gpu-h100"))
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│ 2026" in line}
    assert len(rows) == 12
    for run_id, line in rows.items():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        assert cells[9].endswith("% other"), cells  # quiet machine: the load is a number, not blank
        assert cells[10] == "H100 80GB HBM3, 580.159.04, CUDA 13.0", cells
        assert ("not ranked" in cells[8]) == run_id.endswith("3950"), cells
        assert (cells[6] == "diverged") == run_id.endswith("3950"), cells


def test_show_prints_gpu_learning_memory_and_why_a_run_is_not_ranked(shared_fixtures: Path) -> None:
    nan_run = run_tracer("show", str(shared_fixtures / "gpu-h100/20261125-000310-pytorch-alexnet-big-gpu-b1-3950"))
    assert nan_run.returncode == 0, nan_run.stderr
    text = " ".join(nan_run.stdout.split())
    assert "diverged (loss nan at epoch 2" in text and "lr 0.001" in text
    assert "speed not ranked beside other runs: the run ended diverged" in text
    assert "last loss, accuracy loss nan" in text
    assert f"GPU {H100}" in text
    assert "NVML, the process: 1510 MiB; the framework's own: not recorded" in text
    healthy = run_tracer("show", str(shared_fixtures / "gpu-h100/20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"))
    text = " ".join(healthy.stdout.split())
    assert "not ranked" not in text and "last loss, accuracy loss 1.0" in text
