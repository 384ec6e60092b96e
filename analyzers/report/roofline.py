"""The report's roofline figure: the runs' points (analyzers.summaries.roofline) under their device's compute
and memory ceilings, one chart for the runs of one device and dtype (the most runs' when they differ)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from analyzers.figures.utilisation import flops_text
from analyzers.render import palette
from analyzers.report import charts
from analyzers.run.run import Run
from analyzers.summaries.roofline import STEP, Roofline, run_points

TITLE = "Roofline"
MARKERS = {STEP: "o", "convolution kernels": "s", "matrix-multiply kernels": "^"}


def roofline_figure(title: str, roof: Roofline, points: Sequence[Roofline]) -> Figure:
    """Log-log: the memory roof (bandwidth x intensity) up to the ridge, the compute roof after it; a point
    per run and what (whole step, kernel class), coloured by framework."""
    fig = charts._figure(7.2, 4.6)
    ax = fig.add_subplot()
    peak, bandwidth = roof.peak.flops_per_s or 1.0, roof.peak.memory_bytes_per_s or 1.0
    found = [p for r in points for p in r.points]
    low = min([p.intensity for p in found] + [peak / bandwidth]) / 4
    high = max([p.intensity for p in found] + [peak / bandwidth]) * 4
    x = np.geomspace(low, high, 200)
    ax.plot(x, np.minimum(peak, bandwidth * x), color="#333333", linewidth=1.6)
    ax.annotate(
        f"{roof.peak.dtype} peak {flops_text(peak, 'FLOP/s')}", (high, peak), ha="right", va="bottom", fontsize=8.5
    )
    ax.annotate(
        f"memory {bandwidth / 1e12:.3g} TB/s", (low * 1.3, bandwidth * low * 1.3), rotation=0, va="bottom", fontsize=8.5
    )
    seen: set[tuple[str, str]] = set()
    for p in found:
        key = (p.framework, p.what)
        ax.scatter(
            p.intensity,
            p.flops_per_s,
            marker=MARKERS.get(p.what, "o"),
            color=palette.colour(p.framework),
            edgecolor="black",
            linewidth=0.5,
            s=42,
            zorder=3,
            label=f"{palette.label(p.framework)}, {p.what}" if key not in seen else None,
        )
        seen.add(key)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte of compulsory traffic)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def write(
    runs: Sequence[Run], out: Path, formats: Sequence[str] = charts.FORMATS
) -> tuple[str, list[Path], str] | None:
    """The figure's title, files and caption for the report; None where no run has FLOPs, a peak and a bandwidth."""
    found = [r for r in (run_points(run) for run in runs) if r is not None]
    if not found:
        return None
    source, _ = Counter(r.peak.source for r in found).most_common(1)[0]
    chosen = [r for r in found if r.peak.source == source]
    roof = chosen[0]
    left = len(found) - len(chosen)
    fig = roofline_figure(f"{TITLE}: {source.split(':')[0]}", roof, chosen)
    files = charts.save(fig, out / "fig-roofline", formats)
    caption = (
        f"Ceilings: {roof.peak.source}. FLOPs: training FLOPs of the model's convolutions and fully-connected"
        " layers (multiply-add = 2, backward = 2 x forward); bytes: those layers' compulsory traffic (each"
        " tensor read or written once), so a point's intensity is an upper bound. Whole step: every steady"
        " step; kernel classes: a run traced whole, over its steady epochs."
        + (f" {left} run(s) on another device or dtype are left out." if left else "")
    )
    return f"{TITLE}: {source.split(':')[0]}", files, caption
