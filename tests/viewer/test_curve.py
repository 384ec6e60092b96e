"""The sample curves keep their picture between frames: a pan scrolls it and paints only the strip it exposes,
and what a user sees after panning is the picture a fresh paint of the same view gives, within a pixel
(`viewer.panels.curve`; the zoom levels behind it: test_pyramid.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from viewer.panels.curve import EnvelopeCurve
from viewer.pyramid import Envelope

N = 400_003
SPAN = N * 0.1
ZOOM = (SPAN * 0.3, SPAN * 0.4)  # 10 % of the run, as the viewer's benchmark zooms
PAN_STEP = 0.01  # of the view's width: a drag step
SIZE = (900, 300)


class PaintRecorder(EnvelopeCurve):
    """An EnvelopeCurve that records the x range of each part Qt asks it to paint."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.painted: list[tuple[float, float]] = []

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem, *args: Any) -> None:
        self.painted.append((option.exposedRect.left(), option.exposedRect.right()))
        super().paint(painter, option, *args)


def _series() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return np.arange(N) * 0.1, np.cumsum(rng.normal(size=N))


def _plot(qtbot: Any, curve: EnvelopeCurve, x_range: tuple[float, float]) -> pg.PlotWidget:
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    widget.resize(*SIZE)
    widget.show()
    widget.addItem(curve)
    widget.setXRange(*x_range, padding=0)
    widget.setYRange(*curve.envelope.y_bounds, padding=0.05)  # fixed, so that only x moves
    widget.grab()
    return widget


def _curve_pixels(widget: pg.PlotWidget) -> np.ndarray:
    """Where the curve's colour is, in the view's own area (axes and margins left out)."""
    image = widget.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    view = widget.getViewBox().sceneBoundingRect().toRect()
    area = pixels[view.top() + 1 : view.bottom() - 1, view.left() + 1 : view.right() - 1, :3]
    return (area[..., 2] > 200) & (area[..., 1] < 80)  # red (BGR order): the curve's pen


def test_a_pan_paints_only_the_strip_it_exposes(qtbot: Any) -> None:
    x, y = _series()
    curve = PaintRecorder(Envelope(x, y), 0.0, pen="r")
    widget = _plot(qtbot, curve, ZOOM)
    width = ZOOM[1] - ZOOM[0]
    for step in range(1, 6):
        curve.painted.clear()
        shift = width * PAN_STEP * step
        widget.setXRange(ZOOM[0] + shift, ZOOM[1] + shift, padding=0)
        widget.grab()
        assert curve.painted, "the newly exposed strip was not painted"
        for left, right in curve.painted:
            assert right - left <= width * 3 * PAN_STEP  # the strip, not the view (the pad and rounding aside)


def test_the_picture_after_pans_is_a_fresh_paint_within_a_pixel(qtbot: Any) -> None:
    """Pans both ways (so that both of the picture's edges are scrolled into view), then the view compared
    with the same view painted afresh: every curve pixel of one is at most a pixel away from the other's."""
    x, y = _series()
    width = ZOOM[1] - ZOOM[0]
    panned = _plot(qtbot, EnvelopeCurve(Envelope(x, y), 0.0, pen="r"), ZOOM)
    offsets = [PAN_STEP * 0.7 * i for i in range(1, 15)] + [PAN_STEP * 0.7 * (14 - i) for i in range(1, 30)]
    for offset in offsets:
        panned.setXRange(ZOOM[0] + width * offset, ZOOM[1] + width * offset, padding=0)
        panned.grab()
    final = (ZOOM[0] + width * offsets[-1], ZOOM[1] + width * offsets[-1])
    fresh = _plot(qtbot, EnvelopeCurve(Envelope(x, y), 0.0, pen="r"), final)
    seen, expected = _curve_pixels(panned), _curve_pixels(fresh)
    assert seen.shape == expected.shape
    columns_drawn = expected.any(axis=0)
    assert columns_drawn.all()  # the series covers the view: a fresh paint draws in every column
    assert seen.any(axis=0).all(), f"columns left blank after panning: {np.flatnonzero(~seen.any(axis=0))}"

    def near(mask: np.ndarray) -> np.ndarray:
        """`mask` grown by one pixel each way: a scrolled picture lies up to half a pixel from a fresh one,
        so a line's pixels may fall one row or column over."""
        out = mask.copy()
        out[:, 1:] |= mask[:, :-1]
        out[:, :-1] |= mask[:, 1:]
        grown = out.copy()
        grown[1:] |= out[:-1]
        grown[:-1] |= out[1:]
        return grown

    assert not (seen & ~near(expected)).any() and not (expected & ~near(seen)).any()


def test_the_clip_of_the_painted_columns_changes_no_pixel(
    open_window: Any, real_fixtures: Any, monkeypatch: Any
) -> None:
    """A curve clips its painting to the columns it paints, for speed: the time panels, whole and zoomed, are
    the panels painted unclipped, pixel for pixel, on three real H100 runs (a clip to the painted rect in y
    moved 237 pixels of the whole window and 592 of a zoom, where lines meet a plot's edge).

    Both pictures come from one window, once it has settled, repainted whole with the clip and without it,
    and are compared inside the plots' data areas, where a curve paints: a plot's title moved by a row
    between two pictures of one window, one time in ten (CI, 28 Nov)."""
    runs = sorted((real_fixtures / "gpu-h100").glob("2026*"))[:3]
    window = open_window(runs)
    window.resize(1600, 1100)  # the size of the benchmark's window
    whole = _settled(window)
    (lo, hi), _ = window.timeline.master.viewRange()
    window.timeline.master.setXRange(lo + (hi - lo) * 0.3, lo + (hi - lo) * 0.4, padding=0)
    zoomed = _settled(window)
    monkeypatch.setattr(QtGui.QPainter, "setClipRect", lambda *args: None)
    zoomed_unclipped = _repainted(window)
    window.timeline.master.setXRange(lo, hi, padding=0)
    whole_unclipped = _repainted(window)
    data = _data_areas(window)[: whole.shape[0], : whole.shape[1]]  # the panels are cut at the window's edge
    assert data.sum() > 0.5 * data.size  # the plots' data areas are most of the panels
    for clipped, unclipped in ((whole, whole_unclipped), (zoomed, zoomed_unclipped)):
        assert clipped.shape[0] > 500 and clipped.shape[1] > 1000  # the panels as the window shows them
        moved = np.argwhere((clipped != unclipped).any(axis=2) & data)
        assert not len(moved), f"{len(moved)} pixels moved, within rows/columns {moved.min(0)}-{moved.max(0)}"


def _settled(window: Any, tries: int = 20) -> np.ndarray:
    """The time panels once two grabs in a row are the same picture (the layout and ranges have settled)."""
    QtWidgets.QApplication.processEvents()
    last = _time_panels(window)
    for _ in range(tries):
        QtCore.QThread.msleep(50)
        QtWidgets.QApplication.processEvents()
        now = _time_panels(window)
        if now.shape == last.shape and np.array_equal(now, last):
            return now
        last = now
    raise AssertionError(f"the time panels kept changing over {tries} grabs")


def _data_areas(window: Any) -> np.ndarray:
    """Where the time panels' plots show their data (each view box, its edges included), as a mask
    of the pixels `_time_panels` returns."""
    panel = window.timeline
    mask = np.zeros((panel.height(), panel.width()), bool)
    for plot in panel.plots.values():
        box = panel.mapFromScene(plot.getViewBox().sceneBoundingRect()).boundingRect()
        top_left = panel.viewport().mapTo(panel, box.topLeft())
        y, x = top_left.y(), top_left.x()
        mask[max(y, 0) : y + box.height() + 1, max(x, 0) : x + box.width() + 1] = True
    return mask


def _repainted(window: Any) -> np.ndarray:
    """The time panels painted afresh: every item's cached picture dropped first."""
    for item in window.timeline.scene().items():
        item.update()
    return _settled(window)


def _time_panels(window: Any) -> np.ndarray:
    """What the window shows of its time panels (the status bar and the tabs vary between two windows)."""
    image = window.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    panel = window.timeline
    top_left = panel.mapTo(window, panel.rect().topLeft())
    y0, x0 = top_left.y(), top_left.x()
    return pixels[y0 : y0 + panel.height(), x0 : x0 + panel.width()].copy()  # cut at the window's edge
