"""What a pan or zoom paints: the time panels once per range change (pyqtgraph's deferred range work is done
before the paint, not inside it), and epoch labels that never overlap at any zoom."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets

from tracer.core.runfolder import RunFolder
from viewer.panels.markers import LABEL_GAP_PX, LABEL_ROWS, EpochMarkers

Opener = Callable[..., object]


class PaintCounter(QtCore.QObject):
    def __init__(self) -> None:
        super().__init__()
        self.paints = 0

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QtCore.QEvent.Type.Paint:
            self.paints += 1
        return False


def settle(qtbot: object) -> None:
    for _ in range(5):
        QtWidgets.QApplication.processEvents()
        qtbot.wait(50)  # type: ignore[attr-defined]


def test_a_pan_paints_the_time_panels_once(open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder) -> None:
    window = open_window([tiny_pytorch_run.path])
    timeline = window.timeline  # type: ignore[attr-defined]
    settle(qtbot)
    counter = PaintCounter()
    timeline.viewport().installEventFilter(counter)
    (x0, x1), _ = timeline.master.viewRange()
    for shift in (0.1, 0.2):  # a pan, then a zoom
        counter.paints = 0
        timeline.master.setXRange(x0 + (x1 - x0) * shift, x1 - (x1 - x0) * shift * (shift > 0.15), padding=0)
        settle(qtbot)
        assert counter.paints == 1


def test_epoch_labels_never_overlap(qtbot: object) -> None:
    """Epochs 1 s apart at scales from 2 to 200 px a second: each row's labels keep LABEL_GAP_PX apart, and a
    label left out is one no row had room for."""
    starts = np.arange(40, dtype=np.float64)
    markers = EpochMarkers(starts, 40.0, "#0072b2", [f"E{i + 1} 1.0 s" for i in range(40)])
    for px_per_s in (2.0, 20.0, 200.0):
        rows = markers.label_rows(px_per_s)
        x = starts * px_per_s + LABEL_GAP_PX
        for row in range(LABEL_ROWS):
            mine = np.flatnonzero(rows == row)
            assert np.all(x[mine][1:] >= x[mine][:-1] + markers._widths[mine][:-1] + LABEL_GAP_PX)
        if px_per_s == 200.0:
            assert (rows == 0).all()  # room for every label in the first row
        else:
            assert (rows == -1).any() or LABEL_ROWS > 1


def _scroll_to(window: object, bottom: bool, qtbot: object) -> None:
    bar = window.panel_scroll.verticalScrollBar()  # type: ignore[attr-defined]
    bar.setValue(bar.maximum() if bottom else 0)
    settle(qtbot)


def test_lanes_out_of_view_are_drawn_only_once_seen(
    open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder
) -> None:
    """The thread lanes scrolled out below the time panels build no image on a pan or zoom; scrolled into view
    they are drawn once, for the view then shown; `current()` draws them on demand for a reader."""
    window = open_window([tiny_pytorch_run.path])
    window.resize(1400, 520)  # the time panels fill the visible part; the lanes are below it
    settle(qtbot)
    _scroll_to(window, False, qtbot)
    threads, master = window.threads, window.timeline.master  # type: ignore[attr-defined]
    assert threads.lanes and threads.viewport().visibleRegion().isEmpty()
    (x0, x1), _ = master.viewRange()
    before = threads.redraws
    for k in range(1, 4):  # three pans
        master.setXRange(x0 + (x1 - x0) * 0.05 * k, x1 + (x1 - x0) * 0.05 * k, padding=0)
        settle(qtbot)
    assert threads.redraws == before and threads.stale
    _scroll_to(window, True, qtbot)
    assert not threads.viewport().visibleRegion().isEmpty()
    assert threads.redraws == before + 1 and not threads.stale
    (image,) = [lanes.image for lanes in threads.lanes.values()]
    rect = image.mapRectToView(image.boundingRect())  # the image covers the view shown, the last pan's
    (v0, v1), _ = threads.plot.viewRange()
    assert (rect.left(), rect.right()) == pytest.approx((v0, v1))
    _scroll_to(window, False, qtbot)
    master.setXRange(x0, x1, padding=0)
    settle(qtbot)
    assert threads.stale and threads.current().redraws == before + 2 and not threads.stale


def test_a_pan_draws_the_lanes_on_screen_once(open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder) -> None:
    window = open_window([tiny_pytorch_run.path])
    _scroll_to(window, True, qtbot)
    threads, master = window.threads, window.timeline.master  # type: ignore[attr-defined]
    assert threads.lanes and not threads.viewport().visibleRegion().isEmpty()
    counter = PaintCounter()
    threads.viewport().installEventFilter(counter)
    (x0, x1), _ = master.viewRange()
    for shift in (0.1, 0.2):
        counter.paints, before = 0, threads.redraws
        master.setXRange(x0 + (x1 - x0) * shift, x1 + (x1 - x0) * shift, padding=0)
        settle(qtbot)
        assert counter.paints == 1 and threads.redraws == before + 1 and not threads.stale
