"""Thread lanes: one lane per thread (name and tid), grouped by run, coloured by activity.

Zoomed in below `CALLS_BELOW_S` seconds of view, the individual CUDA API calls of runs with a trace
appear on their thread's lane (at most `MAX_CALLS` at a time, so a dense trace never stalls a redraw).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from viewer.cursor import TimeCursor
from viewer.data import RunData
from viewer.style import LEFT_AXIS_WIDTH, RIGHT_AXIS_WIDTH, activity_colour, label_font, run_colour

CALLS_BELOW_S = 2.0
MAX_CALLS = 20_000
LANE_HEIGHT = 0.8


class ThreadPanel(pg.GraphicsLayoutWidget):
    def __init__(self, cursor: TimeCursor, parent: object = None) -> None:
        super().__init__(parent)
        self.cursor = cursor
        self.runs: list[RunData] = []
        self.align = "start"
        self.plot: pg.PlotItem = self.addPlot(row=0, col=0)
        self.lane_offsets: dict[str, int] = {}
        self.segment_items: dict[str, list[pg.BarGraphItem]] = {}
        self.call_items: list[pg.BarGraphItem] = []
        self.visible_calls = 0
        self.cursor_line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen("#444444", style=QtCore.Qt.DashLine))
        self.cursor_line.sigPositionChanged.connect(lambda ln: self.cursor.set(ln.value()))
        cursor.moved.connect(self._on_cursor)
        self.plot.sigXRangeChanged.connect(self._update_calls)
        self.legend: pg.LegendItem | None = None
        self.message = ""

    def set_runs(self, runs: Sequence[RunData], align: str, link_to: pg.PlotItem | None) -> None:
        self.runs = list(runs)
        self.align = align
        plot = self.plot
        plot.clear()
        self.segment_items.clear()
        self.call_items.clear()
        self.lane_offsets.clear()
        if self.legend is None:
            self.legend = plot.addLegend(offset=(-10, 5), labelTextSize="9pt", brush=pg.mkBrush(255, 255, 255, 220))
        self.legend.clear()
        plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        plot.showAxis("right")
        plot.getAxis("right").setWidth(RIGHT_AXIS_WIDTH)
        plot.getAxis("right").setStyle(showValues=False)
        plot.getAxis("left").setStyle(tickFont=label_font(8))
        plot.setLabel("bottom", "time (s), same axis as the panels above")
        plot.showGrid(x=True, alpha=0.25)
        plot.getViewBox().setMouseEnabled(x=True, y=False)
        plot.setMenuEnabled(True)
        ticks: list[tuple[float, str]] = []
        y = 0
        activities: set[str] = set()
        missing = []
        for index, run in enumerate(self.runs):
            lanes = run.threads
            if lanes is None:
                missing.append(run.label)
                continue
            self.lane_offsets[run.run_id] = y
            ticks.append((-y + LANE_HEIGHT / 2, f"▼ {run.label[:24]}"))
            anchor = run.anchor_ns(align)
            items = []
            for activity in lanes.activities:
                mask = lanes.activity == activity
                x0 = (lanes.start_ns[mask] - anchor) / 1e9
                width = (lanes.end_ns[mask] - lanes.start_ns[mask]) / 1e9
                item = pg.BarGraphItem(
                    x0=x0, width=width, y0=-(y + 1 + lanes.lane[mask]), height=LANE_HEIGHT,
                    brush=activity_colour(activity), pen=pg.mkPen(None),
                )
                plot.addItem(item)
                items.append(item)
                activities.add(activity)
            self.segment_items[run.run_id] = items
            if len(lanes.start_ns):
                first, last = int(lanes.start_ns.min()), int(lanes.end_ns.max())
                plot.addItem(pg.BarGraphItem(x0=[(first - anchor) / 1e9], width=[(last - first) / 1e9], y0=[-y + 0.25],
                                             height=[0.3], brush=run_colour(index), pen=pg.mkPen(None)))
            for i, name in enumerate(lanes.lane_names):
                ticks.append((-(y + 1 + i) + LANE_HEIGHT / 2, name[:28]))
            y += len(lanes.lane_names) + 1
        for activity in sorted(activities):
            self.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=activity_colour(activity)), activity)
        if any(r.api_calls is not None for r in self.runs):
            self.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush="#000000"),
                                f"CUDA API call (zoom < {CALLS_BELOW_S:g} s)")
        plot.getAxis("left").setTicks([[(t, n) for t, n in ticks], []])
        plot.addItem(self.cursor_line, ignoreBounds=True)
        self.message = ("no thread samples: " + ", ".join(missing)) if missing else ""
        if not self.lane_offsets:
            plot.setTitle("no thread data in the loaded runs", size="9pt")
        else:
            plot.setTitle("<b>Thread lanes</b>: one per thread (name and tid), coloured by activity; source: "
                          + "; ".join(sorted({r.threads.source for r in self.runs if r.threads})), size="9pt",
                          justify="left")
            plot.setYRange(-y, 0.5, padding=0)
        if link_to is not None:
            plot.setXLink(link_to)
        self._update_calls()

    def lane_count(self, run_id: str) -> int:
        run = next((r for r in self.runs if r.run_id == run_id), None)
        return len(run.threads.lane_names) if run is not None and run.threads is not None else 0

    def _update_calls(self) -> None:
        """Draws the API calls in view once the view is narrow enough; removes them otherwise."""
        for item in self.call_items:
            self.plot.removeItem(item)
        self.call_items.clear()
        self.visible_calls = 0
        (x0, x1), _ = self.plot.viewRange()
        if x1 - x0 > CALLS_BELOW_S:
            return
        for run in self.runs:
            calls = run.api_calls
            if calls is None or run.run_id not in self.lane_offsets:
                continue
            anchor = run.anchor_ns(self.align)
            lo = int(np.searchsorted(calls.start_ns, anchor + x0 * 1e9 - 1e9))
            hi = int(np.searchsorted(calls.start_ns, anchor + x1 * 1e9))
            visible = slice(lo, min(hi, lo + MAX_CALLS))
            ends = calls.end_ns[visible]
            keep = ends >= anchor + x0 * 1e9
            starts = calls.start_ns[visible][keep]
            if not len(starts):
                continue
            lanes = calls.lane[visible][keep]
            item = pg.BarGraphItem(
                x0=(starts - anchor) / 1e9, width=np.maximum((ends[keep] - starts) / 1e9, 1e-7),
                y0=-(self.lane_offsets[run.run_id] + 1 + lanes) + 0.2, height=LANE_HEIGHT - 0.4,
                brush="#000000", pen=pg.mkPen(None),
            )
            self.plot.addItem(item)
            self.call_items.append(item)
            self.visible_calls += len(starts)

    def _on_cursor(self, x: float) -> None:
        if self.cursor_line.value() != x:
            self.cursor_line.blockSignals(True)
            self.cursor_line.setValue(x)
            self.cursor_line.blockSignals(False)
