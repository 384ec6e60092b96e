"""Thread lanes: one lane per thread (name and tid), grouped by run, coloured by activity.

Lanes are drawn as one image per run, rebuilt for the visible time range at the view's pixel
resolution from the run's `LaneIndex` (a precomputed raster for wide views, the visible segments for
narrow ones): a run with a million segments costs what its pixels cost, and a short burst is never lost
(each pixel shows the highest-priority activity that touches it). Zoomed in below `CALLS_BELOW_S`
seconds, the CUDA API calls of runs with a trace appear as a black stripe on their thread's lane.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from viewer.cursor import TimeCursor
from viewer.data import RunData, activity_priority
from viewer.pyramid import LaneIndex
from viewer.style import LEFT_AXIS_WIDTH, RIGHT_AXIS_WIDTH, activity_colour, label_font, run_colour

CALLS_BELOW_S = 2.0
SUBROWS = 5  # image rows per lane: 4 painted, 1 left blank between lanes
MAX_BINS = 2400
CALLS = "CUDA API call"
RUN_GAP_ROWS = 1  # a blank row between runs, so a run's header stands apart from the last lane above
MIN_HEIGHT_PX, MAX_MIN_HEIGHT_PX, AXES_PX = 120, 420, 100
LABEL_GAP_PX = 1  # between two lane labels: labels that would come closer are left out, run headers first


@dataclass
class _RunLanes:
    """One run's lanes on the shared axis: its segment index, shifted by `offset` seconds, and its image."""

    index: LaneIndex
    offset: float
    activities: list[str]
    lanes: int
    top: int  # plot y of the run's header row
    calls: LaneIndex | None
    calls_offset: float
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
        dash = pg.mkPen("#444444", style=QtCore.Qt.PenStyle.DashLine)
        self.cursor_line = pg.InfiniteLine(angle=90, movable=True, pen=dash)
        self.cursor_line.sigPositionChanged.connect(lambda ln: self.time_cursor.set(ln.value()))
        cursor.moved.connect(self._on_cursor)
        self.plot.sigXRangeChanged.connect(self._redraw)
        self.plot.getViewBox().sigResized.connect(self._redraw)
        self.plot.getViewBox().sigResized.connect(lambda *_: self._thin_ticks())
        self.legend: pg.LegendItem | None = None
        self.message = ""
        self._header_gap_rows = 0.0  # fewest rows between two run headers
        self.all_ticks: list[tuple[float, str, bool]] = []  # (y, text, is a run header) before thinning
        self.shown_ticks: list[tuple[float, str]] = []

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
        ticks: list[tuple[float, str, bool]] = []
        y = 0
        shown: set[str] = set()
        missing = []
        for index, run in enumerate(self.runs):
            lanes = run.threads
            if lanes is None:
                missing.append(run.label)
                continue
            ticks.append((-y + 0.4, f"▼ {run.label[:20]}", True))
            for i, name in enumerate(lanes.lane_names):
                ticks.append((-(y + 1 + i) + 0.4, name[:24], False))
            self.lanes[run.run_id] = self._prepare(run, y)
            shown.update(lanes.activities)
            anchor = run.anchor_ns(align)
            if len(lanes.start_ns):
                first, last = int(lanes.start_ns.min()), int(lanes.end_ns.max())
                plot.addItem(
                    pg.BarGraphItem(
                        x0=[(first - anchor) / 1e9],
                        width=[(last - first) / 1e9],
                        y0=[-y + 0.25],
                        height=[0.3],
                        brush=run_colour(index),
                        pen=pg.mkPen(None),
                    )
                )
            y += len(lanes.lane_names) + 1 + RUN_GAP_ROWS
        for activity in sorted(shown, key=activity_priority):
            self.legend.addItem(_swatch(activity_colour(activity)), activity)
        if any(r.api_calls is not None for r in self.runs):
            self.legend.addItem(_swatch("#000000"), f"{CALLS} (zoom < {CALLS_BELOW_S:g} s)")
        self.all_ticks = ticks
        headers = [t[0] for t in ticks if t[2]]
        self._header_gap_rows = min((a - b for a, b in zip(headers, headers[1:])), default=0.0)
        plot.addItem(self.cursor_line, ignoreBounds=True)
        self.message = ("no thread samples: " + ", ".join(missing)) if missing else ""
        if not self.lanes:
            plot.setTitle("no thread data in the loaded runs", size="9pt")
        else:
            sources = "; ".join(sorted({r.threads.source for r in self.runs if r.threads}))
            title = f"<b>Thread lanes</b>: one per thread (name and tid), coloured by activity; source: {sources}"
            plot.setTitle(title, size="9pt", justify="left")
            plot.setYRange(-y, 0.5, padding=0)
            full = self.full_x_range()
            if link is None and full is not None:
                plot.setXRange(*full)
        if link is not None:
            link(plot)
        self._thin_ticks()  # after the y range is set: thinning is in pixels of the final view
        self._redraw()

    def _prepare(self, run: RunData, top: int) -> _RunLanes:
        lanes = run.threads
        assert lanes is not None
        anchor = run.anchor_ns(self.align)
        calls = run.api_calls
        image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(image)
        return _RunLanes(
            index=lanes.index,
            offset=(lanes.origin_ns - anchor) / 1e9,
            activities=lanes.activities,
            lanes=len(lanes.lane_names),
            top=top,
            calls=None if calls is None else calls.index,
            calls_offset=0.0 if calls is None else (calls.origin_ns - anchor) / 1e9,
            image=image,
        )

    def _thin_ticks(self) -> None:
        """Lane labels that fit the panel's height: every run header, then as many thread labels as leave
        `LABEL_GAP_PX` between neighbours (with 30 threads in 200 px, every third), never two on each other."""
        view = self.plot.getViewBox()
        (_, _), (y0, y1) = view.viewRange()
        height_px = max(view.height(), 1.0)
        px_per_unit = height_px / max(y1 - y0, 1e-9)
        line_px = QtGui.QFontMetricsF(label_font(8)).height() + LABEL_GAP_PX
        if self._header_gap_rows > 0:  # tall enough that two run headers never collide, within reason
            overhead = self.height() - height_px if self.height() > height_px > 1 else AXES_PX
            need = line_px * (y1 - y0) / self._header_gap_rows + overhead + line_px  # a line to spare
            self.setMinimumHeight(math.ceil(min(MAX_MIN_HEIGHT_PX, max(MIN_HEIGHT_PX, need))))
        kept: list[tuple[float, str]] = []
        taken: list[float] = []
        for want_header in (True, False):
            for y, text, header in self.all_ticks:
                if header != want_header:
                    continue
                if all(abs(y - other) * px_per_unit >= line_px for other in taken):
                    kept.append((y, text))
                    taken.append(y)
        self.shown_ticks = sorted(kept, key=lambda t: -t[0])
        self.plot.getAxis("left").setTicks([self.shown_ticks, []])

    def label_rects(self) -> list[QtCore.QRectF]:
        """Where each shown lane label is drawn, in the panel's pixels (for tests: no two may overlap)."""
        view = self.plot.getViewBox()
        metrics = QtGui.QFontMetricsF(label_font(8))
        rects = []
        for y, text in self.shown_ticks:
            at = view.mapViewToScene(QtCore.QPointF(0, y))
            rects.append(
                QtCore.QRectF(0, at.y() - metrics.height() / 2, metrics.horizontalAdvance(text), metrics.height())
            )
        return rects

    def full_x_range(self) -> tuple[float, float] | None:
        """The time every run's lanes span on the shared axis (what Reset zoom shows), None without lanes."""
        bounds = [(r.index.span[0] + r.offset, r.index.span[1] + r.offset) for r in self.lanes.values() if len(r.index)]
        if not bounds:
            return None
        return min(b[0] for b in bounds), max(b[1] for b in bounds)

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
        for run in self.lanes.values():
            colours = np.array([_rgba(activity_colour(a)) for a in run.activities] + [(0, 0, 0, 0)], dtype=np.uint8)
            level = run.index.raster(x0 - run.offset, x1 - run.offset, bins)
            # image rows from the bottom of the plot up: the last lane first, a blank row above each lane
            img = np.zeros((run.lanes, SUBROWS, bins, 4), dtype=np.uint8)
            img[:, : SUBROWS - 1] = colours[level[::-1]][:, None]  # level -1 picks the transparent colour
            if run.calls is not None and x1 - x0 <= CALLS_BELOW_S:
                c0, c1 = x0 - run.calls_offset, x1 - run.calls_offset
                self.visible_calls += len(run.calls.visible(c0, c1))
                hit = run.calls.raster(c0, c1, bins)[::-1] >= 0
                stripe = img[:, 1 : SUBROWS - 2]
                stripe[np.broadcast_to(hit[:, None, :], stripe.shape[:3])] = (0, 0, 0, 255)
            run.image.setImage(img.reshape(run.lanes * SUBROWS, bins, 4), autoLevels=False)
            run.image.setRect(QtCore.QRectF(x0, -(run.top + run.lanes), x1 - x0, run.lanes))

    def _on_cursor(self, x: float) -> None:
        if self.cursor_line.value() != x:
            self.cursor_line.blockSignals(True)
            self.cursor_line.setValue(x)
            self.cursor_line.blockSignals(False)


def _rgba(colour: str) -> tuple[int, int, int, int]:
    c = QtGui.QColor(colour)
    return (c.red(), c.green(), c.blue(), 255)


def _swatch(colour: str) -> pg.BarGraphItem:
    return pg.BarGraphItem(x=[0], height=[0], width=0, brush=colour)
