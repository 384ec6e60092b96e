"""Epoch markers: one item per run and plot that paints every epoch's line (and label) itself.

A pyqtgraph InfiniteLine per epoch recomputes its geometry in Python on every range change; with ten
epochs, four runs and six rows that was most of the cost of a pan. This item does one paint call, and keeps
between frames what a pan does not change: the lines as one path in plot units (redrawn by the painter's
transform, rebuilt only when the plot's height in units changes) and, per zoom scale, which row each label
takes (a pan only picks the labels in view, and labels no longer jump between rows while the view moves).
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
        metrics = QtGui.QFontMetricsF(self.font)
        self._ascent, self._line_height = metrics.ascent(), metrics.height()
        self._widths = np.array([metrics.horizontalAdvance(text) for text in self.labels], dtype=np.float64)
        self._texts: dict[int, QtGui.QStaticText] = {}  # laid out once per label, on its first paint
        self._path: tuple[tuple[float, float], QtGui.QPainterPath] | None = None  # (view's y span, lines)
        self._rows: tuple[float, np.ndarray] | None = None  # (pixels per unit of x, each label's row or -1)
        self._rect: QtCore.QRectF | None = None  # boundingRect until the view changes
        self.setZValue(20)

    def __len__(self) -> int:
        """Epochs marked."""
        return int(self.starts.shape[0])

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 - Qt's name
        """The view's rect, kept until the view changes: Qt asks for it some 200 times a frame over 45 items."""
        if self._rect is None:
            rect = self.viewRect()
            self._rect = QtCore.QRectF() if rect is None else rect
        return self._rect

    def viewRangeChanged(self, *args: Any) -> None:  # noqa: N802 - pyqtgraph's name
        self.prepareGeometryChange()
        self._rect = None

    def viewTransformChanged(self) -> None:  # noqa: N802 - pyqtgraph's name
        super().viewTransformChanged()
        self._rect = None

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: Any = None) -> tuple[None, None]:  # noqa: N802,N803
        return None, None  # markers never widen the auto range

    def label_rows(self, px_per_unit: float) -> np.ndarray:
        """Each label's text row at this zoom scale, -1 where it has no room (close epochs keep their lines,
        not their labels): a label goes in the first row whose last label ends LABEL_GAP_PX before it."""
        if self._rows is not None and math.isclose(self._rows[0], px_per_unit, rel_tol=1e-6):  # a pan: same scale
            return self._rows[1]
        rows = np.full(len(self.labels), -1, dtype=np.int64)
        ends = [-math.inf] * LABEL_ROWS  # right end of the last label placed in each row, in pixels
        for i, (x, width) in enumerate(zip((self.starts * px_per_unit).tolist(), self._widths.tolist())):
            x_px = x + LABEL_GAP_PX
            row = next((r for r, end in enumerate(ends) if x_px > end + LABEL_GAP_PX), None)
            if row is not None:
                ends[row] = x_px + width
                rows[i] = row
        self._rows = (px_per_unit, rows)
        return rows

    def paint(self, painter: QtGui.QPainter, *args: Any) -> None:
        rect = self.viewRect()
        if rect is None or not len(self.lines):
            return
        left, right, top, bottom = rect.left(), rect.right(), rect.top(), rect.bottom()
        if self._path is None or self._path[0] != (top, bottom):
            y = np.tile([top, bottom], len(self.lines))
            self._path = ((top, bottom), pg.arrayToQPath(np.repeat(self.lines, 2), y, connect="pairs"))
        painter.setPen(self.pen)
        painter.drawPath(self._path[1])  # one call; the painter clips the lines out of view
        if not self.labels:
            return
        to_device = painter.transform()  # x' = m11 x + dx: the view is never rotated
        rows = self.label_rows(to_device.m11())
        shown = np.flatnonzero((self.starts >= left) & (self.starts <= right) & (rows >= 0))
        if not len(shown):
            return
        y_px = to_device.map(QtCore.QPointF(left, bottom)).y()  # the view's y grows upwards: bottom() is its top
        x_px = self.starts[shown] * to_device.m11() + to_device.dx() + LABEL_GAP_PX
        painter.save()
        painter.resetTransform()  # text in pixels, not in the plot's stretched units
        painter.setPen(self.text_pen)
        painter.setFont(self.font)
        for i, x in zip(shown.tolist(), x_px.tolist()):
            text = self._texts.get(i)
            if text is None:
                text = self._texts[i] = QtGui.QStaticText(self.labels[i])
            painter.drawStaticText(QtCore.QPointF(x, y_px + rows[i] * self._line_height), text)
        painter.restore()
