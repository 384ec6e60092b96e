"""Zoom levels of the sample curves: what the time panels draw must show every peak, while handing Qt about
as many points as the plot has pixels (the lanes' index: tests/analyzers/timeline/test_lane_index.py)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from viewer.panels.curve import EnvelopeCurve
from viewer.pyramid import Envelope

N = 1_000_003  # not a multiple of the bucket factor: the last bucket is short


@pytest.fixture(scope="module")
def series() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = np.arange(N) * 0.1
    y = rng.normal(size=N)
    y[777_777] = 50.0  # one spike a full view must not lose
    y[5_000:5_010] = np.nan  # a gap in the samples
    return x, y


@pytest.mark.parametrize(
    "window", [(0.0, N * 0.1), (1_000.0, 2_000.0), (77_700.0, 77_800.0), (99_990.0, 1e9), (-50.0, 3.0)]
)
def test_envelope_keeps_every_extreme_in_view(
    series: tuple[np.ndarray, np.ndarray], window: tuple[float, float]
) -> None:
    x, y = series
    env = Envelope(x, y)
    x0, x1 = window
    xs, ys = env.view(x0, x1, 1600)
    inside = (x >= x0) & (x <= x1)
    assert np.nanmax(ys) >= np.nanmax(y[inside]) and np.nanmin(ys) <= np.nanmin(y[inside])
    assert xs[0] <= max(x0, x[0]) and xs[-1] >= min(x1, x[-1]) - env.level_for(x0, x1, 1600)[0] * 0.1
    assert len(xs) <= 2 * 4 * 1600 + 8  # about two points per pixel, at most one level finer than needed


def test_envelope_shows_samples_when_zoomed_in(series: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = series
    xs, ys = Envelope(x, y).view(100.05, 110.05, 1600)
    # every sample in view, plus the one before and the one after so the line reaches both edges
    assert np.array_equal(xs, x[1000:1102]) and np.array_equal(ys, y[1000:1102], equal_nan=True)


def test_curve_hands_qt_about_a_point_per_pixel(qtbot: object, series: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = series
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)  # type: ignore[attr-defined]
    widget.resize(900, 300)
    widget.show()
    curve = EnvelopeCurve(Envelope(x, y), offset=10.0)
    widget.addItem(curve)
    widget.getPlotItem().setXRange(10.0, 10.0 + N * 0.1, padding=0)
    pixels = widget.getViewBox().width()
    drawn_x, drawn_y = curve.getData()
    assert len(curve) == N and 0 < len(drawn_x) <= 8 * pixels + 8
    assert np.nanmax(drawn_y) == 50.0
    assert curve.dataBounds(0) == pytest.approx((10.0, 10.0 + (N - 1) * 0.1))
    widget.getPlotItem().setXRange(110.0, 111.0, padding=0)
    drawn_x, _ = curve.getData()
    assert drawn_x[0] <= 110.0 and drawn_x[-1] >= 111.0 and len(drawn_x) <= 14


def test_a_wide_view_hands_qt_two_points_per_pixel_column(series: tuple[np.ndarray, np.ndarray]) -> None:
    """Wider than the samples' pixels, the view is drawn per pixel column: its min and max, the spike kept."""
    x, y = series
    for x0, x1 in ((0.0, N * 0.1), (20_000.0, 90_000.0)):
        xs, ys = Envelope(x, y).view(x0, x1, 1600)
        assert len(xs) <= 2 * 1600 + 4
        assert np.all(np.diff(xs) >= 0)  # left to right
        inside = (x >= x0) & (x <= x1)
        assert np.nanmax(ys) == np.nanmax(y[inside]) and np.nanmin(ys) == np.nanmin(y[inside])


@pytest.mark.parametrize(
    "part", [(32_000.0, 32_500.0), (30_000.0, 45_000.0), (41_000.0, 43_000.0), (31_000.0, 32_100.0)]
)
def test_a_part_is_drawn_as_the_whole_view_draws_it(
    series: tuple[np.ndarray, np.ndarray], part: tuple[float, float]
) -> None:
    """A strip that a pan exposes (inside the view, or reaching beyond it) gets the view's level and pixel
    columns: inside both, its points are the view's points; it covers the strip and keeps its extremes."""
    x, y = series
    env = Envelope(x, y)
    x0, x1, pixels = 32_000.3, 42_000.7, 1303.0
    whole_x, whole_y = env.view(x0, x1, pixels)
    part_x, part_y = env.view(x0, x1, pixels, part=part)
    inside_both = (max(x0, part[0]) + 20.0, min(x1, part[1]) - 20.0)  # a few columns in from either edge
    keep_whole = (whole_x >= inside_both[0]) & (whole_x <= inside_both[1])
    keep_part = (part_x >= inside_both[0]) & (part_x <= inside_both[1])
    assert keep_whole.sum() > 2 and np.array_equal(whole_x[keep_whole], part_x[keep_part])
    assert np.array_equal(whole_y[keep_whole], part_y[keep_part], equal_nan=True)
    assert part_x[0] <= part[0] and part_x[-1] >= part[1] - env.level_for(x0, x1, pixels)[0] * 0.1
    inside = (x >= part[0]) & (x <= part[1])
    assert np.nanmax(part_y) >= np.nanmax(y[inside]) and np.nanmin(part_y) <= np.nanmin(y[inside])
