"""The viewer with three real runs: lane labels never on top of each other (measured from where they are
drawn), the wheel zooms time only and y follows the curves in view, a mouse drag pans time only, Reset
zoom shows every run whole, and the run browser is filled at open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtTest import QTest

from tracer.core.runfolder import RunFolder
from viewer.browser import COLUMNS


@pytest.fixture
def three_runs(tiny_pytorch_run: RunFolder, second_pytorch_run: RunFolder, failed_run: RunFolder) -> list[Path]:
    return [tiny_pytorch_run.path, second_pytorch_run.path, failed_run.path]


def test_lane_labels_do_not_overlap(open_window: Callable[..., object], three_runs: list[Path]) -> None:
    window = open_window(three_runs)
    panel = window.threads  # type: ignore[attr-defined]
    for height in (1000, 600):  # a shorter window leaves fewer labels, never overlapping ones
        window.resize(1400, height)  # type: ignore[attr-defined]
        QtWidgets.QApplication.processEvents()
        rects = panel.label_rects()
        headers = [t for _, t, header in panel.all_ticks if header]
        shown = [t for _, t in panel.shown_ticks]
        assert len(headers) == 3 and all(h in shown for h in headers)  # every run keeps its header
        for i, a in enumerate(rects):
            for b in rects[i + 1 :]:
                assert not a.intersects(b), (a, b)


def _wheel(widget: QtWidgets.QGraphicsView, plot: object, steps: int) -> None:
    """A real wheel event at the centre of `plot`, as a mouse sends it."""
    vb = plot.getViewBox()  # type: ignore[attr-defined]
    centre = widget.mapFromScene(vb.mapToScene(vb.boundingRect().center()))
    pos = QtCore.QPointF(centre)
    event = QtGui.QWheelEvent(
        pos,
        QtCore.QPointF(widget.viewport().mapToGlobal(centre)),
        QtCore.QPoint(0, 0),
        QtCore.QPoint(0, 120 * steps),
        QtCore.Qt.MouseButton.NoButton,
        QtCore.Qt.KeyboardModifier.NoModifier,
        QtCore.Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QtWidgets.QApplication.sendEvent(widget.viewport(), event)
    QtWidgets.QApplication.processEvents()


def test_wheel_zooms_time_only_and_reset_shows_all(open_window: Callable[..., object], three_runs: list[Path]) -> None:
    window = open_window(three_runs)
    timeline = window.timeline  # type: ignore[attr-defined]
    plot = timeline.plots[("rss_mib", 0)]
    full = timeline.full_x_range()
    (x0, x1), _ = plot.viewRange()
    _wheel(timeline, plot, 3)
    (z0, z1), (y0, y1) = plot.viewRange()
    assert z1 - z0 < 0.9 * (x1 - x0)  # zoomed in time
    for run in window.runs:  # type: ignore[attr-defined]
        anchor = run.anchor_ns(timeline.align)
        for s in run.series["rss_mib"]:
            t = (s.t_ns.astype(np.int64) - anchor) / 1e9
            seen = s.y[(t >= z0) & (t <= z1)]
            seen = seen[np.isfinite(seen)]
            if len(seen):
                assert y0 <= seen.min() and seen.max() <= y1  # y follows what is in view: nothing clipped
    window.reset_zoom()  # type: ignore[attr-defined]
    QtWidgets.QApplication.processEvents()
    (r0, r1), _ = plot.viewRange()
    (t0, t1), _ = window.threads.plot.viewRange()  # type: ignore[attr-defined]
    span = full[1] - full[0]
    assert r0 <= full[0] and r1 >= full[1] and (r1 - r0) < 1.1 * span
    assert abs(t0 - r0) < 1e-6 * span + 1e-9 and abs(t1 - r1) < 1e-6 * span + 1e-9


def test_run_browser_is_filled_at_open(
    qtbot: object, open_window: Callable[..., object], tiny_pytorch_run: RunFolder
) -> None:
    window = open_window([tiny_pytorch_run.path], out_dir=tiny_pytorch_run.path.parent)
    browser = window.browser  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: browser.visible_rows() == 1 and not browser.loading, timeout=30_000)  # type: ignore[attr-defined]
    assert browser.proxy.index(0, COLUMNS.index("id")).data() == tiny_pytorch_run.run_id


def test_column_mode_rows_share_a_range_that_holds_every_run(
    open_window: Callable[..., object], three_runs: list[Path]
) -> None:
    window = open_window(three_runs, layout_mode="columns")
    timeline = window.timeline  # type: ignore[attr-defined]
    for key in ("threads", "rss_mib"):
        ranges = [timeline.y_range(key, col) for col in range(3)]
        assert all(r == pytest.approx(ranges[0]) for r in ranges)
        for run in window.runs:  # type: ignore[attr-defined]
            for s in run.series.get(key, []):
                lo, hi = s.envelope.y_bounds
                assert ranges[0][0] <= lo and hi <= ranges[0][1]


def test_dragging_pans_time_only(open_window: Callable[..., object], three_runs: list[Path]) -> None:
    """A press, moves and a release of the left button on a time panel's viewport, then on the lanes':
    x moves by the drag (the linked panels with it); the drag's vertical part moves nothing (a time panel's
    y follows the curves in view, so it is what the same x range set without the mouse gives)."""
    window = open_window(three_runs)
    timeline = window.timeline  # type: ignore[attr-defined]
    rss = timeline.plots[("rss_mib", 0)]
    _drag_pans(timeline, rss, y_follows_data=True)
    (a0, a1), _ = rss.viewRange()
    (b0, b1), _ = window.threads.plot.viewRange()  # type: ignore[attr-defined]
    assert (b0, b1) == pytest.approx((a0, a1))
    _drag_pans(window.threads, window.threads.plot)  # type: ignore[attr-defined]


def _drag_pans(widget: QtWidgets.QGraphicsView, plot: object, y_follows_data: bool = False) -> None:
    vb = plot.getViewBox()  # type: ignore[attr-defined]
    (x0, x1), (y0, y1) = vb.viewRange()
    centre = widget.mapFromScene(vb.mapToScene(vb.boundingRect().center()))
    dx = 120
    viewport = widget.viewport()
    QTest.mousePress(viewport, QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier, centre)
    for step in range(1, 7):
        QTest.mouseMove(viewport, centre + QtCore.QPoint(step * dx // 6, 5 * step), 10)
    QTest.mouseRelease(
        viewport,
        QtCore.Qt.MouseButton.LeftButton,
        QtCore.Qt.KeyboardModifier.NoModifier,
        centre + QtCore.QPoint(dx, 30),
    )
    QtWidgets.QApplication.processEvents()
    (n0, n1), (m0, m1) = vb.viewRange()
    per_px = (x1 - x0) / vb.width()
    assert n0 - x0 == pytest.approx(-dx * per_px, rel=0.05)  # content follows the mouse to the right
    assert n1 - n0 == pytest.approx(x1 - x0, rel=1e-6)
    if y_follows_data:
        vb.setXRange(x0, x1, padding=0)
        vb.setXRange(n0, n1, padding=0)
        QtWidgets.QApplication.processEvents()
        (y0, y1) = vb.viewRange()[1]
    assert (m0, m1) == pytest.approx((y0, y1))
