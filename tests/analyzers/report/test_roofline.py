"""The roofline of the H100 run folders: every point under both ceilings, the three trace backends of one
AlexNet setting agreeing on the convolution kernels' rate, and the report's figure written."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.report.build import plan_report
from analyzers.report.roofline import write
from analyzers.run.run import Run
from analyzers.summaries.roofline import STEP, run_points

TRACED = {
    "nsys": "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98",
    "torch": "20261125-001123-pytorch-alexnet-big-gpu-b100-a9b3",
    "cupti": "20261125-001502-pytorch-alexnet-big-gpu-b100-a266",
}


def runs(root: Path) -> list[Run]:
    return [Run.open(p) for p in sorted((root / "gpu-h100").iterdir()) if (p / "run.json").exists()]


def test_every_point_lies_under_the_roofs(real_fixtures: Path) -> None:
    found = [r for r in (run_points(run) for run in runs(real_fixtures)) if r is not None]
    assert len(found) == 12
    for roof in found:
        peak, bandwidth = roof.peak.flops_per_s, roof.peak.memory_bytes_per_s
        assert peak and bandwidth
        for p in roof.points:
            assert p.flops_per_s <= min(peak, bandwidth * p.intensity), p


def test_three_trace_backends_agree_on_the_convolution_kernels(real_fixtures: Path) -> None:
    rates = {}
    for backend, name in TRACED.items():
        roof = run_points(Run.open(real_fixtures / "gpu-h100" / name))
        assert roof is not None
        whats = {p.what: p for p in roof.points}
        assert {STEP, "convolution kernels", "matrix-multiply kernels"} <= set(whats), (backend, whats)
        conv = whats["convolution kernels"]
        assert conv.flops_per_s > whats[STEP].flops_per_s  # the kernels run faster than the step as a whole
        rates[backend] = conv.flops_per_s
    assert max(rates.values()) / min(rates.values()) == pytest.approx(1.0, abs=0.05), rates


def test_the_report_draws_it(real_fixtures: Path, tmp_path: Path) -> None:
    made = write(runs(real_fixtures), tmp_path, ("png",))
    assert made is not None
    title, files, caption = made
    assert title == "Roofline: H100 SXM tf32" and files == [tmp_path / "fig-roofline.png"]
    assert files[0].stat().st_size > 10_000 and "NVIDIA H100" in caption
    assert any(s.description == "drawing the roofline" for s in plan_report(runs(real_fixtures), tmp_path))
