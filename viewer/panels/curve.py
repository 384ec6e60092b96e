"""A curve that draws from a precomputed min/max pyramid (`viewer.pyramid.Envelope`): it paints only the
visible slice of the level with about one bucket per pixel, so a pan or zoom over a run of millions of samples
paints a few thousand points, and nothing is downsampled on the GUI thread.

It is not a pyqtgraph PlotCurveItem: that item takes new data on every range change (bounds, geometry and the
view's auto-range recomputed in Python for each of the 45 curves of five runs). This one keeps the whole
series' bounds as its own, so a range change only asks for a repaint; the slice and its path are made at paint
time, for curves on screen only, and kept while the view shows the same slice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from viewer.pyramid import Envelope

FALLBACK_PIXELS = 2000  # before the curve is in a sized view
BOUNDS_PAD = 0.01  # of the series' span: Qt skips an item whose bounding rect is empty (a constant series)


class EnvelopeCurve(pg.GraphicsObject):
    """`envelope` x plus `offset` seconds is the position on the plot's x axis."""

    def __init__(self, envelope: Envelope, offset: float, pen: Any = None, name: str | None = None) -> None:
        super().__init__()
        self.envelope = envelope
        self.offset = offset
        self.pen = pg.mkPen(pen if pen is not None else pg.getConfigOption("foreground"))
        self.pen.setCosmetic(True)
        self._name = name
        self._connect = "all" if envelope.finite else "finite"
        self._shown: tuple[int, int, int] | None = None
        self._data: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))
        self._path: QtGui.QPainterPath | None = None
        x0, x1 = envelope.x_bounds
        self._bounds = ((x0 + offset, x1 + offset), envelope.y_bounds)
        (a, b), (c, d) = self._bounds
        dx, dy = (b - a) * BOUNDS_PAD or 1.0, (d - c) * BOUNDS_PAD or 1.0
        self._rect = QtCore.QRectF(a - dx, c - dy, b - a + 2 * dx, d - c + 2 * dy)

    def __len__(self) -> int:
        """Samples the curve stands for (not the points drawn now)."""
        return len(self.envelope)

    def name(self) -> str | None:
        return self._name

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: Any = None) -> tuple[float, float]:  # noqa: N802,N803
        """The whole series' bounds, not the slice drawn now, so auto-range and linked axes see the run."""
        return self._bounds[ax]

    def pixelPadding(self) -> float:  # noqa: N802 - pyqtgraph's name
        """The pen's half width the y auto-range adds around the curves, as for pyqtgraph's own curves."""
        return self.pen.widthF() * 0.7072

    def boundingRect(self) -> QtCore.QRectF:  # noqa: N802 - Qt's name
        return self._rect

    def viewRangeChanged(self, *args: Any) -> None:  # noqa: N802 - pyqtgraph's name
        self.update()  # the slice for the new range is picked when (and if) the curve is painted

    def getData(self) -> tuple[np.ndarray, np.ndarray]:  # noqa: N802 - pyqtgraph's name
        """The points drawn for the current view."""
        self._pick()
        return self._data

    def _pick(self) -> None:
        """Takes the level and slice the current view needs; does nothing when that is what is shown."""
        view = self.getViewBox()
        if not isinstance(view, pg.ViewBox) or not view.width():  # not yet in a plot, or not yet sized
            x0, x1, pixels = -np.inf, np.inf, float(FALLBACK_PIXELS)
        else:
            (x0, x1), _ = view.viewRange()
            pixels = float(view.width())
        wanted = self.envelope.level_for(x0 - self.offset, x1 - self.offset, pixels)
        if wanted == self._shown:
            return
        self._shown = wanted
        x, y = self.envelope.view(x0 - self.offset, x1 - self.offset, pixels)
        self._data = (x + self.offset, y)
        self._path = None

    def paint(self, painter: QtGui.QPainter, *args: Any) -> None:
        self._pick()
        x, y = self._data
        if len(x) < 2:
            return
        if self._path is None:
            self._path = pg.arrayToQPath(x, y, connect=self._connect, finiteCheck=not self.envelope.finite)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
        painter.setPen(self.pen)
        painter.drawPath(self._path)
