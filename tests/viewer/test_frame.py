"""What a pan or zoom paints: the time panels once per range change (pyqtgraph's deferred range work is done
before the paint, not inside it), and epoch labels that never overlap at any zoom."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
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
