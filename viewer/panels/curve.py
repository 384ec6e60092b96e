"""A curve that draws from a precomputed min/max pyramid (`viewer.pyramid.Envelope`): it paints only the
visible slice of the level with about one bucket per pixel, so a pan or zoom over a run of millions of samples
paints a few thousand points, and nothing is downsampled on the GUI thread.

It is not a pyqtgraph PlotCurveItem: that item takes new data on every range change (bounds, geometry and the
view's auto-range recomputed in Python for each of the 45 curves of five runs). This one keeps the whole
series' bounds as its own, so a range change costs no Python until Qt paints it.

Its picture is kept between frames (Qt's device-coordinate cache, as large as the view's widget): a pan, which
only translates the view, scrolls the picture and asks the curve for the strip it exposes, so a drag step
slices and strokes a few pixel columns, not the whole view; a zoom or resize paints it afresh.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from viewer.pyramid import Envelope
from viewer.style import CACHED

FALLBACK_PIXELS = 2000  # before the curve is in a sized view
STRIP_PAD_PIXELS = 2  # a painted part's samples reach this far beyond it: the line enters it from outside
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
        x0, x1 = envelope.x_bounds
        self._bounds = ((x0 + offset, x1 + offset), envelope.y_bounds)
        (a, b), (c, d) = self._bounds
        dx, dy = (b - a) * BOUNDS_PAD or 1.0, (d - c) * BOUNDS_PAD or 1.0
        self._rect = QtCore.QRectF(a - dx, c - dy, b - a + 2 * dx, d - c + 2 * dy)
        self.setCacheMode(CACHED)
        self.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemUsesExtendedStyleOption)  # the strip to paint

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

    def getData(self) -> tuple[np.ndarray, np.ndarray]:  # noqa: N802 - pyqtgraph's name
        """The points drawn for the current view."""
        x0, x1, pixels = self._view()
        x, y = self.envelope.view(x0, x1, pixels)
        return x + self.offset, y

    def _view(self) -> tuple[float, float, float]:
        """The view's x range, in the envelope's seconds, and its width in pixels."""
        view = self.getViewBox()
        if not isinstance(view, pg.ViewBox) or not view.width():  # not yet in a plot, or not yet sized
            return -np.inf, np.inf, float(FALLBACK_PIXELS)
        (x0, x1), _ = view.viewRange()
        return x0 - self.offset, x1 - self.offset, float(view.width())

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionGraphicsItem, *args: Any) -> None:
        """Paints the part Qt asks for (`exposedRect`: all of the cached picture, or the strip a pan exposed)
        that the painted device holds. It may reach beyond the view: the cache covers the whole widget, and
        the view's clip is applied when the picture is drawn."""
        x0, x1, pixels = self._view()
        pad = STRIP_PAD_PIXELS * (x1 - x0) / pixels if math.isfinite(x1 - x0) else 0.0
        from_device, invertible = painter.combinedTransform().inverted()
        exposed = option.exposedRect
        if invertible:  # Qt's exposedRect is the whole series when it repaints a whole picture
            exposed = exposed.intersected(from_device.mapRect(QtCore.QRectF(painter.viewport())))
        part = (exposed.left() - self.offset - pad, exposed.right() - self.offset + pad)
        x, y = self.envelope.view(x0, x1, pixels, part=part)
        if len(x) < 2:
            return
        path = pg.arrayToQPath(x + self.offset, y, connect=self._connect, finiteCheck=not self.envelope.finite)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
        # Clipped to the columns it paints: Qt's raster engine strokes a cosmetic path 3-4x faster under a clip
        # (1.2 -> 0.3 ms for 2,900 points), and Qt sets none when it repaints the cached picture whole. Not in
        # y: a line along the series' extreme lies on the exposed rect's edge, and a clip there cut its pixels.
        tall = self._rect.height()
        columns = QtCore.QRectF(exposed.left(), self._rect.top() - tall, exposed.width(), 3 * tall)
        painter.setClipRect(columns, QtCore.Qt.ClipOperation.IntersectClip)
        painter.setPen(self.pen)
        painter.drawPath(path)
