"""The viewer with GPU rows, as a person reads it (issue #28 item 1), on three real H100 runs of one job
traced three ways (nsys, CUPTI, none: tests/data/fixtures/gpu-h100): no panel squeezed below a readable
height (the window scrolls), no two tick labels on each other (measured where pyqtgraph draws them),
lane groups named by framework, model, batch and trace backend and unique, units alike in titles and
axes, legend entries whole."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from viewer.data import METRIC_BY_KEY
from viewer.panels.threads import CALLS
from viewer.panels.timeline import PLOT_MIN_PX
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]
RUNS = {"cf98": "nsys", "a266": "cupti", "85cf": ""}  # run id end -> its trace backend ("": untraced)


@pytest.fixture(scope="module")
def gpu_runs(real_fixtures: Path) -> list[Path]:
    folder = real_fixtures / "gpu-h100"
    return [next(folder.glob(f"*-{end}")) for end in RUNS]


def _tick_rects(axis: object) -> list[tuple[QtCore.QRectF, str]]:
    """Where an axis draws each tick label: pyqtgraph's own layout of them (generateDrawSpecs)."""
    image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)  # type: ignore[attr-defined]
    finally:
        painter.end()
    return [] if specs is None else [(rect, text) for rect, _, text in specs[2]]


def _overlaps(rects: list[tuple[QtCore.QRectF, str]]) -> list[tuple[str, str]]:
    return [(a, b) for i, (ra, a) in enumerate(rects) for rb, b in rects[i + 1 :] if ra.intersects(rb)]


@pytest.mark.parametrize("height", [1000, 600])
def test_panels_keep_their_height_and_ticks_never_overprint(
    open_window: Opener, gpu_runs: list[Path], height: int
) -> None:
    window = open_window(gpu_runs)
    window.resize(1400, height)
    for _ in range(3):
        QtWidgets.QApplication.processEvents()
    plots = list(window.timeline.plots.values())
    assert len(plots) == 9  # CPU, RSS, threads, GPU util, memory, power, and the step split
    for plot in plots:
        assert plot.getViewBox().height() >= PLOT_MIN_PX - 1  # the window scrolls instead
        rects = _tick_rects(plot.getAxis("left"))
        assert len(rects) >= 2 and not _overlaps(rects), [t for _, t in rects]
    bottom = _tick_rects(window.threads.plot.getAxis("bottom"))
    assert len(bottom) >= 2 and not _overlaps(bottom)
    lanes = window.threads.label_rects()
    assert len(lanes) == len(window.threads.all_ticks)  # every lane keeps its label
    assert not any(a.intersects(b) for i, a in enumerate(lanes) for b in lanes[i + 1 :])
    if height == 600:
        assert window.panel_scroll.verticalScrollBar().maximum() > 0


def test_lane_groups_are_named_by_framework_model_batch_and_trace(open_window: Opener, gpu_runs: list[Path]) -> None:
    window = open_window(gpu_runs)
    headers = [text for _, text, header in window.threads.all_ticks if header]
    assert len(headers) == len(set(headers)) == 3
    for header, trace in zip(headers, RUNS.values()):
        words = header.removeprefix("▼ ").split()
        assert words[:4] == ["pytorch", "alexnet", "b100", "gpu"] and words[4:] == ([trace] if trace else [])
    legend = [label.text for _, label in window.threads.legend.items]  # type: ignore[union-attr]
    assert any(text.startswith(CALLS) and text.endswith("2 s)") for text in legend), legend  # whole, not cut


def test_titles_and_axes_name_the_same_unit(open_window: Opener, gpu_runs: list[Path]) -> None:
    window = open_window(gpu_runs)
    for (key, _), plot in window.timeline.plots.items():
        metric = METRIC_BY_KEY[key]
        title = window.timeline.title_text(key)
        axis = plot.getAxis("left")
        axis_unit = re.sub(r"<[^>]*>", "", axis.labelString()).strip().strip("()").strip()  # the axis's HTML
        if metric.unit == "s":  # the axis scales seconds ("(ms)"): the title names no unit of its own
            assert "[s]" not in title and axis_unit in ("s", "ms", "µs", "ns"), axis_unit
        else:
            assert f"[{metric.unit}]" in title and axis_unit == metric.unit, (title, axis_unit)
