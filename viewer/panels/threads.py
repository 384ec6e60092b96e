"""Thread lanes: one lane per thread (name and tid), grouped by run, coloured by activity.

Lanes are drawn as one image per run, rebuilt for the visible time range at the view's pixel
resolution: a run with a million segments costs what its pixels cost, and a short burst is never lost
(each pixel shows the highest-priority activity that touches it). Zoomed in below `CALLS_BELOW_S`
seconds, the CUDA API calls of runs with a trace appear as a black stripe on their thread's lane.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from viewer.cursor import TimeCursor
from viewer.data import RunData
from viewer.style import LEFT_AXIS_WIDTH, RIGHT_AXIS_WIDTH, activity_colour, label_font, run_colour

CALLS_BELOW_S = 2.0
SUBROWS = 5  # image rows per lane: 4 painted, 1 left blank between lanes
MAX_BINS = 2400
CALLS = "CUDA API call"
LOW_PRIORITY = ("idle", "sleeping", "waiting")


@dataclass
class _RunLanes:
    """One run's segments in seconds on the shared axis, and the image that shows them."""

    x0: np.ndarray
    x1: np.ndarray
    lane: np.ndarray
    level: np.ndarray  # index into `activities`, higher wins a pixel
    activities: list[str]
    lanes: int
    top: int  # plot y of the run's header row
    calls_x0: np.ndarray | None
    calls_x1: np.ndarray | None
    calls_lane: np.ndarray | None
    image: pg.ImageItem


class ThreadPanel(pg.GraphicsLayoutWidget):
    def __init__(self, cursor: TimeCursor, parent: object = None) -> None:
        super().__init__(parent)
        self.time_cursor = cursor
        self.runs: list[RunData] = []
        self.align = "start"
        self.plot: pg.PlotItem = self.addPlot(row=0, col=0)
        self.lanes: dict[str, _RunLanes] = {}
        self.visible_calls = 0
        self.cursor_line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen("#444444", style=QtCore.Qt.DashLine))
        self.cursor_line.sigPositionChanged.connect(lambda ln: self.time_cursor.set(ln.value()))
        cursor.moved.connect(self._on_cursor)
        self.plot.sigXRangeChanged.connect(self._redraw)
        self.plot.getViewBox().sigResized.connect(self._redraw)
        self.legend: pg.LegendItem | None = None
        self.message = ""

    def set_runs(self, runs: Sequence[RunData], align: str, link: Callable[[pg.PlotItem], None] | None) -> None:
        self.runs = list(runs)
        self.align = align
        plot = self.plot
        plot.clear()
        self.lanes.clear()
        if self.legend is None:
            self.legend = plot.addLegend(offset=(-10, 5), labelTextSize="9pt", brush=pg.mkBrush(255, 255, 255, 220))
        self.legend.clear()
        left = plot.getAxis("left")
        left.setWidth(LEFT_AXIS_WIDTH)
        left.setStyle(tickFont=label_font(8))
        plot.showAxis("right")
        plot.getAxis("right").setWidth(RIGHT_AXIS_WIDTH)
        plot.getAxis("right").setStyle(showValues=False)
        plot.setLabel("bottom", "time (s), same axis as the panels above")
        plot.showGrid(x=True, alpha=0.25)
        plot.getViewBox().setMouseEnabled(x=True, y=False)
        ticks: list[tuple[float, str]] = []
        y = 0
        shown: set[str] = set()
        missing = []
        for index, run in enumerate(self.runs):
            lanes = run.threads
            if lanes is None:
                missing.append(run.label)
                continue
            ticks.append((-y + 0.4, f"▼ {run.label[:20]}"))
            for i, name in enumerate(lanes.lane_names):
                ticks.append((-(y + 1 + i) + 0.4, name[:24]))
            self.lanes[run.run_id] = self._prepare(run, y)
            shown.update(lanes.activities)
            anchor = run.anchor_ns(align)
            if len(lanes.start_ns):
                first, last = int(lanes.start_ns.min()), int(lanes.end_ns.max())
                plot.addItem(pg.BarGraphItem(x0=[(first - anchor) / 1e9], width=[(last - first) / 1e9], y0=[-y + 0.25],
                                             height=[0.3], brush=run_colour(index), pen=pg.mkPen(None)))
            y += len(lanes.lane_names) + 1
        for activity in sorted(shown, key=_priority):
            self.legend.addItem(_swatch(activity_colour(activity)), activity)
        if any(r.api_calls is not None for r in self.runs):
            self.legend.addItem(_swatch("#000000"), f"{CALLS} (zoom < {CALLS_BELOW_S:g} s)")
        left.setTicks([ticks, []])
        plot.addItem(self.cursor_line, ignoreBounds=True)
        self.message = ("no thread samples: " + ", ".join(missing)) if missing else ""
        if not self.lanes:
            plot.setTitle("no thread data in the loaded runs", size="9pt")
        else:
            sources = "; ".join(sorted({r.threads.source for r in self.runs if r.threads}))
            title = f"<b>Thread lanes</b>: one per thread (name and tid), coloured by activity; source: {sources}"
            plot.setTitle(title, size="9pt", justify="left")
            plot.setYRange(-y, 0.5, padding=0)
            bounds = [(lane.x0.min(), lane.x1.max()) for lane in self.lanes.values() if len(lane.x0)]
            if link is None and bounds:
                plot.setXRange(min(b[0] for b in bounds), max(b[1] for b in bounds))
        if link is not None:
            link(plot)
        self._redraw()

    def _prepare(self, run: RunData, top: int) -> _RunLanes:
        lanes = run.threads
        assert lanes is not None
        anchor = run.anchor_ns(self.align)
        activities = sorted(lanes.activities, key=_priority)
        codes = {a: i for i, a in enumerate(activities)}
        level = np.array([codes[str(a)] for a in lanes.activity], dtype=np.int64) if len(lanes.activity) else (
            np.zeros(0, dtype=np.int64))
        calls = run.api_calls
        image = pg.ImageItem(axisOrder="col-major")
        self.plot.addItem(image)
        return _RunLanes(
            x0=(lanes.start_ns - anchor) / 1e9,
            x1=(lanes.end_ns - anchor) / 1e9,
            lane=lanes.lane,
            level=level,
            activities=activities,
            lanes=len(lanes.lane_names),
            top=top,
            calls_x0=None if calls is None else (calls.start_ns - anchor) / 1e9,
            calls_x1=None if calls is None else (calls.end_ns - anchor) / 1e9,
            calls_lane=None if calls is None else calls.lane,
            image=image,
        )

    def lane_count(self, run_id: str) -> int:
        lanes = self.lanes.get(run_id)
        return lanes.lanes if lanes is not None else 0

    def _redraw(self) -> None:
        """Rebuilds each run's lane image for the visible range, one column per pixel."""
        (x0, x1), _ = self.plot.viewRange()
        if not x1 > x0:
            return
        bins = int(min(MAX_BINS, max(100, self.plot.getViewBox().width())))
        self.visible_calls = 0
        for lanes in self.lanes.values():
            colours = np.array([_rgba(activity_colour(a)) for a in lanes.activities] + [(0, 0, 0, 0)], dtype=np.uint8)
            level = _raster(lanes.x0, lanes.x1, lanes.lane, lanes.level, lanes.lanes, len(lanes.activities),
                            x0, x1, bins)
            img = np.zeros((bins, lanes.lanes * SUBROWS, 4), dtype=np.uint8)
            painted = colours[np.where(level < 0, len(lanes.activities), level)]  # (lanes, bins, 4)
            calls = None
            if lanes.calls_x0 is not None and x1 - x0 <= CALLS_BELOW_S:
                lo, hi = np.searchsorted(lanes.calls_x0, [x0 - 1.0, x1])
                seen = slice(int(lo), int(hi))
                keep = lanes.calls_x1[seen] >= x0
                self.visible_calls += int(keep.sum())
                calls = _raster(lanes.calls_x0[seen][keep], lanes.calls_x1[seen][keep], lanes.calls_lane[seen][keep],
                                np.zeros(int(keep.sum()), dtype=np.int64), lanes.lanes, 1, x0, x1, bins)
            for i in range(lanes.lanes):
                row = (lanes.lanes - 1 - i) * SUBROWS
                img[:, row: row + SUBROWS - 1] = painted[i][:, None, :]
                if calls is not None:
                    hit = calls[i] >= 0
                    img[hit, row + 1: row + SUBROWS - 2] = (0, 0, 0, 255)
            lanes.image.setImage(img, autoLevels=False)
            lanes.image.setRect(QtCore.QRectF(x0, -(lanes.top + lanes.lanes), x1 - x0, lanes.lanes))

    def _on_cursor(self, x: float) -> None:
        if self.cursor_line.value() != x:
            self.cursor_line.blockSignals(True)
            self.cursor_line.setValue(x)
            self.cursor_line.blockSignals(False)


def _raster(
    x0: np.ndarray, x1: np.ndarray, lane: np.ndarray, level: np.ndarray, lanes: int, levels: int,
    v0: float, v1: float, bins: int,
) -> np.ndarray:
    """(lanes, bins) array of the highest level whose segments touch each bin; -1 where none does."""
    out = np.full((lanes, bins), -1, dtype=np.int64)
    visible = (x1 >= v0) & (x0 <= v1)
    if not visible.any():
        return out
    width = (v1 - v0) / bins
    b0 = np.clip(np.floor((x0[visible] - v0) / width), 0, bins - 1).astype(np.int64)
    b1 = np.clip(np.floor((x1[visible] - v0) / width) + 1, 1, bins).astype(np.int64)
    ln, lv = lane[visible], level[visible]
    for code in range(levels):
        mine = lv == code
        if not mine.any():
            continue
        size = lanes * (bins + 1)
        diff = np.bincount(ln[mine] * (bins + 1) + b0[mine], minlength=size) - np.bincount(
            ln[mine] * (bins + 1) + b1[mine], minlength=size
        )
        covered = np.cumsum(diff.reshape(lanes, bins + 1), axis=1)[:, :bins] > 0
        out[covered] = code
    return out


def _priority(activity: str) -> tuple[int, str]:
    return (0 if activity in LOW_PRIORITY else 2 if activity == "busy" else 1, activity)


def _rgba(colour: str) -> tuple[int, int, int, int]:
    c = QtGui.QColor(colour)
    return (c.red(), c.green(), c.blue(), 255)


def _swatch(colour: str) -> pg.BarGraphItem:
    return pg.BarGraphItem(x=[0], height=[0], width=0, brush=colour)
