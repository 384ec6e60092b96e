"""The report's kernel-class figure and its "why frameworks differ" section, on the real H100 runs of the
SimpleBig case: the traced PyTorch AlexNet (CUPTI, a266) draws the classes; the untraced PyTorch (85cf)
and JAX (a504) runs are the like-with-like pair the diff compares (a traced run is never set beside an
untraced one, analyzers.report.like)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from analyzers.figures.step_parts import decompose
from analyzers.report import collect_runs, write_report
from analyzers.report.classes import DIFF_STEM, case_diff_lines
from tracer.core.runfolder import RunFolder


def test_kernel_classes_and_the_diff_against_the_fastest(real_fixtures: Path, tmp_path: Path) -> None:
    folders = [next((real_fixtures / "gpu-h100").glob(f"*-{s}")) for s in ("85cf", "a504", "a266")]
    runs, _ = collect_runs(folders)
    out = tmp_path / "report"
    write_report(runs, out, formats=("png",))
    png = out / "fig-kernel-classes-SimpleBig-gpu-b100.png"
    pixels = np.asarray(Image.open(png).convert("RGB"))
    matmul_blue = np.array([0x1F, 0x77, 0xB4])
    assert (np.abs(pixels.astype(int) - matmul_blue).sum(axis=2) < 10).sum() > 500  # the matmul segment is drawn
    said = (out / f"{DIFF_STEM}.md").read_text()
    assert "JAX against PyTorch" in said and "more per image waiting for data" in said
    page = (out / "index.html").read_text()
    assert "GPU time per image by kernel class" in page and "left in class &#x27;other&#x27;: PyTorch 0.0 %" in page
    # The section says what `tracer diff` says: the fastest (PyTorch) as A, JAX as B.
    lines = case_diff_lines(runs)
    gap = decompose(RunFolder(folders[1])).measured_s - decompose(RunFolder(folders[0])).measured_s  # type: ignore[operator]
    assert len(lines) == 1 and lines[0].startswith("JAX against PyTorch: B (jax") and gap > 0
