"""Zoom index of a lane set (`analyzers.timeline.lanes`): what the thread, API-call and GPU lanes draw costs what
the screen's pixels cost, not what the run's events cost.

`LaneIndex` holds a lane set's segments lane by lane (sorted by start), and, for a set of more than
`RASTER_MIN_SEGMENTS`, a pyramid of rasters of the whole run: the finest has up to `FINE_BINS` columns
per lane (each the highest level touching it), every next one a `FACTOR` fewer. A wide view is cut from the
coarsest raster that still has `PER_COLUMN` of its columns per screen column (an edge is off by at most
a quarter of a pixel); a narrow one is drawn from the few segments it holds. Built once, off the GUI
thread (or at ingest: `analyzers.timeline.view_store`), and kept as plain arrays that can be memory-mapped. Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyzers.timeline import lanes as ln

FACTOR = 4
FINE_BINS = FACTOR**10  # at most 1 M columns: a 1-hour run at 3.4 ms a column
COARSEST_BINS = FACTOR**5  # fewer than any plot is wide
PER_COLUMN = 4  # raster columns per screen column, at least
RASTER_MIN_SEGMENTS = 1 << 14  # below this, drawing the visible segments is cheap at every zoom (< 1 ms)
CHUNK_CELLS = 1 << 22  # lanes x columns rastered at once: bounds the build's memory (~150 MiB at its peak)
NONE = -1  # raster value of a column no segment touches


@dataclass(frozen=True)
class LaneIndex:
    """Segments [x0, x1) on `lanes` lanes, each with a level (higher wins a pixel), sorted by lane, then
    start. `rows` maps back to the caller's order where a sort was needed; `reach` is each lane's latest
    end so far (sorted, so the first segment reaching x is a binary search away)."""

    x0: np.ndarray
    x1: np.ndarray
    lane: np.ndarray
    level: np.ndarray
    rows: np.ndarray | None
    bounds: np.ndarray  # lane i holds segments bounds[i]:bounds[i + 1]
    reach: np.ndarray
    lanes: int
    levels: int
    span: tuple[float, float]
    pyramid: tuple[np.ndarray, ...]  # int8 (lanes, bins + 1) rasters of `span`, finest first; last column NONE

    @classmethod
    def build(
        cls,
        x0: np.ndarray,
        x1: np.ndarray,
        lane: np.ndarray,
        level: np.ndarray,
        lanes: int,
        levels: int,
        rasters: bool = True,
    ) -> LaneIndex:
        rows = None
        step = np.diff(lane)
        if not np.all((step > 0) | ((step == 0) & (np.diff(x0) >= 0))):  # the loaders hand them over sorted
            rows = np.lexsort((x0, lane))
            x0, x1, lane, level = x0[rows], x1[rows], lane[rows], level[rows]
        bounds = np.searchsorted(lane, np.arange(lanes + 1))
        reach = np.empty_like(x1)
        for i in range(lanes):
            a, b = bounds[i], bounds[i + 1]
            np.maximum.accumulate(x1[a:b], out=reach[a:b])
        if np.array_equal(reach, x1):  # no segment outlasts the next one: one array serves both (and is stored once)
            reach = x1
        span = (float(x0.min()), float(x1.max())) if len(x0) else (0.0, 0.0)
        pyramid: tuple[np.ndarray, ...] = ()
        if rasters and len(x0) > RASTER_MIN_SEGMENTS and span[1] > span[0]:
            pyramid = _pyramid(x0, x1, lane, level, bounds, lanes, levels, span)
        return cls(x0, x1, lane, level, rows, bounds, reach, lanes, levels, span, pyramid)

    def __len__(self) -> int:
        return int(self.x0.shape[0])

    def visible(self, v0: float, v1: float, lanes: range | None = None) -> np.ndarray:
        """Indices of the segments that touch [v0, v1], lane by lane (of `lanes`, default all)."""
        parts = []
        for i in lanes if lanes is not None else range(self.lanes):
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
        """(lanes, bins): the highest level touching each of `bins` equal columns of [v0, v1]; NONE for none."""
        level = self._pyramid_level((v1 - v0) / bins)
        if level is not None:
            s0, s1 = self.span
            width = (s1 - s0) / (level.shape[1] - 1)
            edges = np.floor((v0 - s0 + np.arange(bins + 1) * ((v1 - v0) / bins)) / width)
            edges = np.clip(edges, 0, level.shape[1] - 1).astype(np.int64)
            out = np.maximum.reduceat(level, edges, axis=1)[:, :bins].astype(np.int64)
            out[:, edges[1:] <= edges[:-1]] = NONE
            return out
        keep = self.visible(v0, v1)
        return _raster(
            self.x0[keep], self.x1[keep], self.lane[keep], self.level[keep], self.lanes, self.levels, v0, v1, bins
        )

    def _pyramid_level(self, column_width: float) -> np.ndarray | None:
        """The coarsest raster with at least PER_COLUMN columns per screen column, None if none is fine enough."""
        s0, s1 = self.span
        for level in reversed(self.pyramid):
            if column_width >= PER_COLUMN * (s1 - s0) / (level.shape[1] - 1):
                return level
        return None


def _pyramid(
    x0: np.ndarray,
    x1: np.ndarray,
    lane: np.ndarray,
    level: np.ndarray,
    bounds: np.ndarray,
    lanes: int,
    levels: int,
    span: tuple[float, float],
) -> tuple[np.ndarray, ...]:
    """The finest raster built a few lanes at a time (lane-major segments), then each coarser one from it."""
    bins = fine_bins(len(x0))
    fine = np.full((lanes, bins + 1), NONE, dtype=np.int8)
    per_chunk = max(1, CHUNK_CELLS // bins)
    for first in range(0, lanes, per_chunk):
        last = min(lanes, first + per_chunk)
        a, b = int(bounds[first]), int(bounds[last])
        part = _raster(x0[a:b], x1[a:b], lane[a:b] - first, level[a:b], last - first, levels, *span, bins)
        fine[first:last, :bins] = part
    out = [fine]
    while out[-1].shape[1] - 1 > COARSEST_BINS:
        body = out[-1][:, :-1]
        coarser = body.reshape(lanes, -1, FACTOR).max(axis=2)
        out.append(np.concatenate([coarser, np.full((lanes, 1), NONE, np.int8)], axis=1))
    return tuple(out)


def fine_bins(segments: int) -> int:
    """Columns of the finest raster: the largest power of FACTOR up to one per segment, within bounds. At
    the widest view drawn from segments a screen then holds about PER_COLUMN segments per column: cheap."""
    bins = COARSEST_BINS * FACTOR
    while bins * FACTOR <= min(segments, FINE_BINS):
        bins *= FACTOR
    return bins


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
    """(lanes, bins) array of the highest level whose segments touch each bin; NONE where none does."""
    out = np.full((lanes, bins), NONE, dtype=np.int64)
    visible = (x1 >= v0) & (x0 <= v1)
    if not visible.any() or not v1 > v0:
        return out
    width = (v1 - v0) / bins
    b0 = np.clip(np.floor((x0[visible] - v0) / width), 0, bins - 1).astype(np.int64)
    b1 = np.clip(np.floor((x1[visible] - v0) / width) + 1, 1, bins).astype(np.int64)
    ln_, lv = lane[visible].astype(np.int64), level[visible]  # a stored view keeps lanes in a narrow type
    size = lanes * (bins + 1)
    for code in range(levels):
        mine = lv == code
        if not mine.any():
            continue
        diff = np.bincount(ln_[mine] * (bins + 1) + b0[mine], minlength=size) - np.bincount(
            ln_[mine] * (bins + 1) + b1[mine], minlength=size
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
    """Calls are drawn only zoomed in (a few thousand in view): no rasters."""
    level = np.zeros(len(calls.lane), dtype=np.int64)
    return _seconds_index(
        calls.start_ns, calls.end_ns, calls.origin_ns, calls.lane, level, calls.lanes, 1, rasters=False
    )


def gpu_index(gpu: ln.GpuLanes) -> LaneIndex:
    lanes, levels = len(gpu.lane_names), len(gpu.names)
    return _seconds_index(gpu.start_ns, gpu.end_ns, gpu.origin_ns, gpu.lane, gpu.code, lanes, levels)


def _seconds_index(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    origin_ns: int,
    lane: np.ndarray,
    level: np.ndarray,
    lanes: int,
    levels: int,
    rasters: bool = True,
) -> LaneIndex:
    """A LaneIndex over intervals given in ns, with x in seconds since `origin_ns`."""
    x0, x1 = (start_ns - origin_ns) * 1e-9, (end_ns - origin_ns) * 1e-9
    return LaneIndex.build(x0, x1, lane, level, lanes, levels, rasters)
