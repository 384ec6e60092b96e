"""Precomputed zoom levels, so that a redraw costs what the screen's pixels cost, not what the run's samples cost.

`Envelope`: one series' min/max at decimations 1, 4, 16, ... samples per bucket; `view` picks the coarsest
level that still has a bucket per pixel and returns only the visible slice of it (two points per bucket or per
pixel column, so no peak is lost). Built off the GUI thread; Qt-free. The lanes' zoom index is
`analyzers.timeline.lane_index`: it is precomputed with the run's view (`analyzers.timeline.view_store`).
"""

from __future__ import annotations

import math

import numpy as np

FACTOR = 4
COARSEST = 1024  # buckets in the coarsest level: fewer than any plot is wide
POINTS_PER_PIXEL = 2  # more points than this are drawn per pixel column (its min and max)


class Envelope:
    """Min/max pyramid of one series; x in seconds from any origin the caller keeps (sorted, finite)."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x = x
        self.y = y
        self.finite = bool(np.isfinite(y).all())
        self.steps: list[int] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        lo = hi = y
        step = 1
        while len(lo) > COARSEST:
            lo, hi = _reduce(lo, np.fmin), _reduce(hi, np.fmax)
            step *= FACTOR
            self.steps.append(step)
            self.lo.append(lo)
            self.hi.append(hi)
        with np.errstate(all="ignore"):
            finite = lo[np.isfinite(lo)], hi[np.isfinite(hi)]
        self.y_bounds = (float(finite[0].min()), float(finite[1].max())) if len(finite[0]) else (0.0, 0.0)

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def x_bounds(self) -> tuple[float, float]:
        return (float(self.x[0]), float(self.x[-1])) if len(self) else (0.0, 0.0)

    def samples_in(self, x0: float, x1: float) -> tuple[int, int]:
        """(first, end) in raw samples: those inside [x0, x1] and one more each side (the line leaves the range)."""
        first = max(int(np.searchsorted(self.x, x0, side="right")) - 1, 0)
        end = min(int(np.searchsorted(self.x, x1, side="left")) + 1, len(self))
        return first, max(end, first)

    def level_for(self, x0: float, x1: float, pixels: float) -> tuple[int, int, int]:
        """(step, first, end) in raw samples: the visible samples, one more each side, and the level's step."""
        first, end = self.samples_in(x0, x1)
        per_pixel = (end - first) / max(pixels, 1.0)
        step = 1
        for s in self.steps:
            if s > per_pixel:
                break
            step = s
        return step, first, end

    def view(
        self, x0: float, x1: float, pixels: float, part: tuple[float, float] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """What to draw for the x range [x0, x1] on `pixels` screen pixels: the samples themselves where
        are few enough, else each bucket's min and max at the bucket's start; where that is more than
        POINTS_PER_PIXEL points a pixel, each pixel column's min and max (from the level's buckets) at its first
        and its last bucket's start: no peak is lost, the line reaches both ends, and Qt strokes half the points.
        The pixel columns are counted from x = 0, not from the view's left edge: a pan does not regroup the
        samples (no shimmer while dragging), and a strip painted after a pan joins the picture drawn before it.
        `part` (an x range, inside the view or not): only its samples, drawn as the view [x0, x1] draws them
        (same level, same pixel columns), for the part of a cached picture that Qt asks to be painted."""
        step, first, end = self.level_for(x0, x1, pixels)
        points = (end - first) if step == 1 else 2 * (-(-end // step) - first // step)
        if part is not None:
            first, end = self.samples_in(*part)
        if step == 1:
            xs, lo, hi = self.x[first:end], self.y[first:end], self.y[first:end]
        else:
            k = self.steps.index(step)
            b0, b1 = first // step, -(-end // step)
            xs, lo, hi = self.x[b0 * step : b1 * step : step], self.lo[k][b0:b1], self.hi[k][b0:b1]
        if points <= POINTS_PER_PIXEL * pixels or not (math.isfinite(x0) and math.isfinite(x1) and x1 > x0):
            if step == 1:
                return xs, lo
            y = np.empty(2 * len(xs))
            y[0::2], y[1::2] = lo, hi
            return np.repeat(xs, 2), y
        if not len(xs):
            return xs, lo
        column = np.floor(xs * (pixels / (x1 - x0))).astype(np.int64)  # fixed in time: a pan keeps them
        starts = np.flatnonzero(np.diff(column, prepend=column[0] - 1))
        last = np.append(starts[1:] - 1, len(xs) - 1)
        with np.errstate(all="ignore"):
            col_lo, col_hi = np.fmin.reduceat(lo, starts), np.fmax.reduceat(hi, starts)
        x = np.empty(2 * len(starts))
        y = np.empty(2 * len(starts))
        x[0::2], x[1::2] = xs[starts], xs[last]
        y[0::2], y[1::2] = col_lo, col_hi
        return x, y


def _reduce(a: np.ndarray, op: np.ufunc) -> np.ndarray:
    """`op` over buckets of FACTOR items (the last one may be shorter); NaN only where a bucket is all NaN.
    Strided element-wise passes: several times faster than a reduction along a short axis."""
    full = len(a) // FACTOR * FACTOR
    out = a[0:full:FACTOR].astype(np.float64, copy=True)
    for k in range(1, FACTOR):
        op(out, a[k:full:FACTOR], out=out)
    if full < len(a):
        out = np.append(out, op.reduce(a[full:]))
    return out
