"""Precomputed zoom levels, so that a redraw costs what the screen's pixels cost, not what the run's samples cost.

`Envelope`: one series' min/max at decimations 1, 4, 16, ... samples per bucket; `view` picks the coarsest
level that still has a bucket per pixel and returns only the visible slice of it (two points per bucket, so
no peak is lost). `LaneIndex`: one run's thread-lane segments as a fine raster of the whole run (for wide
views) and per-lane sorted arrays (for narrow ones), one per lane set of `analyzers.lanes` (`lane_indexes`).
Both are built off the GUI thread; Qt-free.
"""

from __future__ import annotations

import numpy as np

from analyzers import lanes as ln

FACTOR = 4
COARSEST = 1024  # buckets in the coarsest level: fewer than any plot is wide
FINE_BINS = 1 << 18  # lane raster of a whole run; finer views use the segments themselves
FINE_PER_COLUMN = 8  # the fine raster serves columns at least this many of its bins wide (edges within 1/8)


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

    def level_for(self, x0: float, x1: float, pixels: float) -> tuple[int, int, int]:
        """(step, first, end) in raw samples: the visible samples, one more each side, and the level's step."""
        n = len(self)
        first = max(int(np.searchsorted(self.x, x0, side="right")) - 1, 0)
        end = min(int(np.searchsorted(self.x, x1, side="left")) + 1, n)
        per_pixel = (end - first) / max(pixels, 1.0)
        step = 1
        for s in self.steps:
            if s > per_pixel:
                break
            step = s
        return step, first, end

    def view(self, x0: float, x1: float, pixels: float) -> tuple[np.ndarray, np.ndarray]:
        """What to draw for the x range [x0, x1] on `pixels` screen pixels: the samples themselves where
        there are fewer than about two per pixel, else each bucket's min and max at the bucket's start."""
        step, first, end = self.level_for(x0, x1, pixels)
        if step == 1:
            return self.x[first:end], self.y[first:end]
        k = self.steps.index(step)
        b0, b1 = first // step, -(-end // step)
        xs = self.x[b0 * step : b1 * step : step]
        y = np.empty(2 * len(xs))
        y[0::2] = self.lo[k][b0:b1]
        y[1::2] = self.hi[k][b0:b1]
        return np.repeat(xs, 2), y


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


class LaneIndex:
    """Segments [x0, x1) on `lanes` lanes, each with a level (higher wins a pixel), for `raster`."""

    def __init__(
        self,
        x0: np.ndarray,
        x1: np.ndarray,
        lane: np.ndarray,
        level: np.ndarray,
        lanes: int,
        levels: int,
        fine_bins: int = FINE_BINS,
    ) -> None:
        step = np.diff(lane)
        self.rows: np.ndarray | None = None  # the caller's row of each segment where they had to be sorted
        if np.all((step > 0) | ((step == 0) & (np.diff(x0) >= 0))):  # what the loaders hand over
            self.x0, self.x1, self.lane, self.level = x0, x1, lane, level
        else:
            order = np.lexsort((x0, lane))
            self.x0, self.x1, self.lane, self.level = x0[order], x1[order], lane[order], level[order]
            self.rows = order
        self.lanes, self.levels = lanes, levels
        self.bounds = np.searchsorted(self.lane, np.arange(lanes + 1))
        # per lane, the latest end so far: sorted, so the first segment that reaches x is a binary search away
        self.reach = np.empty_like(self.x1)
        for i in range(lanes):
            a, b = self.bounds[i], self.bounds[i + 1]
            np.maximum.accumulate(self.x1[a:b], out=self.reach[a:b])
        self.span = (float(self.x0.min()), float(self.x1.max())) if len(self.x0) else (0.0, 0.0)
        self.fine: np.ndarray | None = None
        if fine_bins and len(self.x0) > fine_bins // 8 and self.span[1] > self.span[0]:
            fine = _raster(self.x0, self.x1, self.lane, self.level, lanes, levels, *self.span, fine_bins)
            self.fine = np.concatenate([fine.astype(np.int8), np.full((lanes, 1), -1, np.int8)], axis=1)

    def __len__(self) -> int:
        return int(self.x0.shape[0])

    def visible(self, v0: float, v1: float) -> np.ndarray:
        """Indices of the segments that touch [v0, v1], lane by lane."""
        parts = []
        for i in range(self.lanes):
            a, b = int(self.bounds[i]), int(self.bounds[i + 1])
            lo = a + int(np.searchsorted(self.reach[a:b], v0, side="left"))
            hi = a + int(np.searchsorted(self.x0[a:b], v1, side="right"))
            if hi > lo:
                parts.append(np.arange(lo, hi))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def at(self, lane: int, x: float, tolerance: float) -> int | None:
        """The caller's row of the segment of `lane` nearest to `x` within `tolerance` (for hovering), or None."""
        if not 0 <= lane < self.lanes:
            return None
        a, b = int(self.bounds[lane]), int(self.bounds[lane + 1])
        lo = a + int(np.searchsorted(self.reach[a:b], x - tolerance, side="left"))
        hi = a + int(np.searchsorted(self.x0[a:b], x + tolerance, side="right"))
        if hi <= lo:
            return None
        near = np.arange(lo, hi)
        gap = np.maximum(self.x0[near] - x, 0) + np.maximum(x - self.x1[near], 0)
        gap[gap > tolerance] = np.inf
        best = int(np.argmin(gap))
        if not np.isfinite(gap[best]):
            return None
        i = int(near[best])
        return i if self.rows is None else int(self.rows[i])

    def raster(self, v0: float, v1: float, bins: int) -> np.ndarray:
        """(lanes, bins): the highest level touching each of `bins` equal columns of [v0, v1]; -1 for none."""
        fine = self.fine
        if fine is not None:
            s0, s1 = self.span
            fine_width = (s1 - s0) / (fine.shape[1] - 1)
            if (v1 - v0) / bins >= FINE_PER_COLUMN * fine_width:
                edges = np.floor((v0 - s0 + np.arange(bins + 1) * ((v1 - v0) / bins)) / fine_width)
                edges = np.clip(edges, 0, fine.shape[1] - 1).astype(np.int64)
                out = np.maximum.reduceat(fine, edges, axis=1)[:, :bins].astype(np.int64)
                out[:, edges[1:] <= edges[:-1]] = -1
                return out
        keep = self.visible(v0, v1)
        return _raster(
            self.x0[keep], self.x1[keep], self.lane[keep], self.level[keep], self.lanes, self.levels, v0, v1, bins
        )


def _raster(
    x0: np.ndarray,
    x1: np.ndarray,
    lane: np.ndarray,
    level: np.ndarray,
    lanes: int,
    levels: int,
    v0: float,
    v1: float,
    bins: int,
) -> np.ndarray:
    """(lanes, bins) array of the highest level whose segments touch each bin; -1 where none does."""
    out = np.full((lanes, bins), -1, dtype=np.int64)
    visible = (x1 >= v0) & (x0 <= v1)
    if not visible.any() or not v1 > v0:
        return out
    width = (v1 - v0) / bins
    b0 = np.clip(np.floor((x0[visible] - v0) / width), 0, bins - 1).astype(np.int64)
    b1 = np.clip(np.floor((x1[visible] - v0) / width) + 1, 1, bins).astype(np.int64)
    ln, lv = lane[visible], level[visible]
    size = lanes * (bins + 1)
    for code in range(levels):
        mine = lv == code
        if not mine.any():
            continue
        diff = np.bincount(ln[mine] * (bins + 1) + b0[mine], minlength=size) - np.bincount(
            ln[mine] * (bins + 1) + b1[mine], minlength=size
        )
        covered = np.cumsum(diff.reshape(lanes, bins + 1), axis=1)[:, :bins] > 0
        out[covered] = code
    return out


THREADS, CALLS, GPU = "threads", "calls", "gpu"


def lane_indexes(lanes: ln.Lanes) -> dict[str, LaneIndex]:
    """The zoom index of each lane set a run has, keyed THREADS, CALLS, GPU."""
    out = {}
    if lanes.threads is not None:
        out[THREADS] = thread_index(lanes.threads)
    if lanes.api_calls is not None:
        out[CALLS] = call_index(lanes.api_calls)
    if lanes.gpu is not None:
        out[GPU] = gpu_index(lanes.gpu)
    return out


def thread_index(lanes: ln.ThreadLanes) -> LaneIndex:
    """x in seconds since `origin_ns`, level = the kind's place among the kinds present (priority order)."""
    remap = np.zeros(max(len(lanes.names), 1), dtype=np.int64)
    for level, name in enumerate(lanes.activities):
        remap[lanes.names.index(name)] = level
    return _seconds_index(lanes.start_ns, lanes.end_ns, lanes.origin_ns, lanes.lane, remap[lanes.code],
                          len(lanes.lane_names), len(lanes.activities))  # fmt: skip


def call_index(calls: ln.ApiCalls) -> LaneIndex:
    level = np.zeros(len(calls.lane), dtype=np.int64)
    return _seconds_index(calls.start_ns, calls.end_ns, calls.origin_ns, calls.lane, level, calls.lanes, 1, fine_bins=0)


def gpu_index(gpu: ln.GpuLanes) -> LaneIndex:
    lanes, levels = len(gpu.lane_names), len(gpu.names)
    return _seconds_index(gpu.start_ns, gpu.end_ns, gpu.origin_ns, gpu.lane, gpu.code, lanes, levels)


def _seconds_index(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    origin_ns: int,
    lane: np.ndarray,
    level: np.ndarray,
    *sizes: int,
    **kw: int,
) -> LaneIndex:
    """A LaneIndex over intervals given in ns, with x in seconds since `origin_ns`."""
    return LaneIndex((start_ns - origin_ns) * 1e-9, (end_ns - origin_ns) * 1e-9, lane, level, *sizes, **kw)
