"""Epoch markers: one item per run and plot that paints every epoch's line (and label) itself.

A pyqtgraph InfiniteLine per epoch recomputes its geometry in Python on every range change; with ten
epochs, four runs and six rows that was most of the cost of a pan. This item does one paint call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from viewer.style import label_font

LABEL_GAP_PX = 3
LABEL_ROWS = 2  # a label that would overlap the one before it goes one line lower


class EpochMarkers(pg.GraphicsObject):
    """Vertical dotted lines at `starts` (and one at `end`), spanning the view; `labels` (one per start, or
    none) are written beside each line from the top of the view, in up to LABEL_ROWS text rows."""

    def __init__(
        self,
        starts: Sequence[float],
        end: float | None,
        colour: str,
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.starts = np.asarray(starts, dtype=np.float64)
        self.lines = np.append(self.starts, end) if end is not None else self.starts
        self.labels = list(labels) if labels else []
        self.pen = pg.mkPen(colour, width=1, style=QtCore.Qt.PenStyle.DotLine)
        self.pen.setCosmetic(True)
        self.text_pen = QtGui.QPen(QtGui.QColor(colour))
        self.font = label_font(8)
        self.setZValue(20)

    def __len__(self) -> int:
        """Epochs marked."""
        return int(self.starts.shape[0])

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 - Qt's name
        rect = self.viewRect()
        return QtCore.QRectF() if rect is None else rect

    def viewRangeChanged(self, *args: Any) -> None:  # noqa: N802 - pyqtgraph's name
        self.prepareGeometryChange()

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: Any = None) -> tuple[None, None]:  # noqa: N802,N803
        return None, None  # markers never widen the auto range

    def paint(self, painter: QtGui.QPainter, *args: Any) -> None:
        rect = self.viewRect()
        if rect is None or not len(self.lines):
            return
        left, right = rect.left(), rect.right()
        seen = (self.lines >= left) & (self.lines <= right)
        if not seen.any():
            return
        painter.setPen(self.pen)
        top, bottom = rect.top(), rect.bottom()
        painter.drawLines([QtCore.QLineF(x, top, x, bottom) for x in self.lines[seen].tolist()])  # one call
        if not self.labels:
            return
        to_device = painter.transform()
        y = bottom  # the view's y grows upwards: bottom() is its highest value, the top of the plot
        painter.save()
        painter.resetTransform()  # text in pixels, not in the plot's stretched units
        painter.setPen(self.text_pen)
        painter.setFont(self.font)
        metrics = QtGui.QFontMetricsF(self.font)
        ends = [-math.inf] * LABEL_ROWS  # right end of the last label written in each row, in pixels
        for x, text in zip(self.starts, self.labels):
            if not left <= x <= right:
                continue
            at = to_device.map(QtCore.QPointF(x, y))
            x_px = at.x() + LABEL_GAP_PX
            row = next((i for i, end in enumerate(ends) if x_px > end + LABEL_GAP_PX), None)
            if row is None:  # no room in any row: close epochs keep their lines, not their labels
                continue
            ends[row] = x_px + metrics.horizontalAdvance(text)
            painter.drawText(QtCore.QPointF(x_px, at.y() + metrics.ascent() + row * metrics.height()), text)
        painter.restore()
