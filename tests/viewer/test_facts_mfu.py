"""The viewer's run facts end with the run's FLOPs, peak and MFU (the H100 fixture's VGG16 at batch 100)."""

from __future__ import annotations

from pathlib import Path

from viewer.data import load_run


def test_the_run_facts_show_mfu(real_fixtures: Path) -> None:
    facts = dict(load_run(real_fixtures / "gpu-h100" / "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0").facts())
    assert facts["MFU (steady)"].startswith("12 %: 60.4 TFLOP/s")
    assert facts["peak FLOP/s"].startswith("495 TFLOP/s (H100 SXM tf32")
    assert facts["FLOPs per step (training)"].startswith("9.26 TFLOP (92.6 GFLOP an image)")
