"""A curve that draws from a precomputed min/max pyramid (`viewer.pyramid.Envelope`): on every range change
it hands Qt only the visible slice of the level with about one bucket per pixel, so a pan or zoom over a
run of millions of samples paints a few thousand points, and nothing is downsampled on the GUI thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg

from viewer.pyramid import Envelope

FALLBACK_PIXELS = 2000  # before the curve is in a sized view


class EnvelopeCurve(pg.PlotCurveItem):
    """`envelope` x plus `offset` seconds is the position on the plot's x axis."""

    def __init__(self, envelope: Envelope, offset: float, **opts: Any) -> None:
        connect = "all" if envelope.finite else "finite"
        super().__init__(antialias=False, skipFiniteCheck=envelope.finite, connect=connect, **opts)
        self.envelope = envelope
        self.offset = offset
        self._shown: tuple[int, int, int] | None = None
        x0, x1 = envelope.x_bounds
        self._bounds = ((x0 + offset, x1 + offset), envelope.y_bounds)
        self.refresh()

    def __len__(self) -> int:
        """Samples the curve stands for (not the points drawn now)."""
        return len(self.envelope)

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange: Any = None) -> tuple[float, float]:  # noqa: N802,N803
        """The whole series' bounds, not the slice drawn now, so auto-range and linked axes see the run."""
        return self._bounds[ax]

    def viewRangeChanged(self, *args: Any) -> None:  # noqa: N802 - pyqtgraph's name
        super().viewRangeChanged()
        self.refresh()

    def viewTransformChanged(self) -> None:  # noqa: N802 - pyqtgraph's name
        super().viewTransformChanged()
        self.refresh()

    def refresh(self) -> None:
        """Shows the level and slice the current view needs; does nothing when that is what is shown."""
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
        self.setData(x + self.offset, y)
