"""Time panels (CPU, RSS, threads, GPU): one row per metric, one colour or one column per run,
all on one linked x axis, with epoch markers and the shared cursor's readout in each row's title.

Large series are left to pyqtgraph: `clipToView` and automatic peak downsampling per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from viewer.cursor import TimeCursor
from viewer.data import METRICS, Metric, RunData
from viewer.style import LEFT_AXIS_WIDTH, RIGHT_AXIS_WIDTH, run_colour

ALIGN_LABELS = {"start": "time since run start (s)", "epoch": "time since first epoch start (s)"}
UNIT_FORMAT = {"%": ".1f", "MiB": ".0f", "count": ".0f", "W": ".1f"}


class TimelinePanel(pg.GraphicsLayoutWidget):
    """Rows of plots; `set_runs` rebuilds them, the cursor only moves lines and rewrites titles."""

    def __init__(self, cursor: TimeCursor, parent: object = None) -> None:
        super().__init__(parent)
        self.time_cursor = cursor
        self.runs: list[RunData] = []
        self.align = "start"
        self.layout_mode = "overlay"
        self.plots: dict[tuple[str, int], pg.PlotItem] = {}
        self.curves: dict[str, dict[str, list[pg.PlotDataItem]]] = {}
        self.epoch_markers: dict[str, dict[str, list[pg.InfiniteLine]]] = {}
        self.cursor_lines: list[pg.InfiniteLine] = []
        self.metrics: list[Metric] = []
        self.master: pg.PlotItem | None = None
        self._x_group: list[pg.PlotItem] = []
        self._syncing = False
        self.ci.setSpacing(2)
        cursor.moved.connect(self._on_cursor)
        self.scene().sigMouseMoved.connect(self._on_mouse)

    def set_runs(self, runs: Sequence[RunData], align: str | None = None, layout_mode: str | None = None) -> None:
        self.runs = list(runs)
        self.align = align or self.align
        self.layout_mode = layout_mode or self.layout_mode
        self._rebuild()

    def _rebuild(self) -> None:
        self.clear()
        self.plots.clear()
        self.curves.clear()
        self.epoch_markers.clear()
        self.cursor_lines.clear()
        self.master = None
        self._x_group: list[pg.PlotItem] = []
        self._syncing = False
        self.metrics = [m for m in METRICS if any(r.series.get(m.key) for r in self.runs)]
        if not self.metrics:
            self.addLabel("no samples to plot: add a run (toolbar, run browser, or drop a folder here)", row=0, col=0)
            return
        columns = len(self.runs) if self.layout_mode == "columns" else 1
        for row, metric in enumerate(self.metrics):
            for col in range(columns):
                self._add_plot(metric, row, col, last_row=row == len(self.metrics) - 1)
        for index, run in enumerate(self.runs):
            col = index if columns > 1 else 0
            self._add_run(run, index, col)
        if self.time_cursor.x is not None:
            self._on_cursor(self.time_cursor.x)
        else:
            self._refresh_titles(None)

    def _add_plot(self, metric: Metric, row: int, col: int, last_row: bool) -> None:
        plot = self.addPlot(row=row, col=col)
        plot.setDownsampling(auto=True, mode="peak")
        plot.setClipToView(True)
        plot.showGrid(x=False, y=False)
        plot.setMenuEnabled(True)
        plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        plot.showAxis("right")
        plot.getAxis("right").setWidth(RIGHT_AXIS_WIDTH)
        plot.getAxis("right").setStyle(showValues=False)
        plot.setLabel("left", f"{_short(metric)} ({metric.unit})")
        if metric.unit == "%" and metric.key == "cpu_pct":
            plot.setYRange(0, 100, padding=0.02)
        if metric.key == "rss_mib":
            self._add_ram_axis(plot)
        if last_row:
            plot.setLabel("bottom", ALIGN_LABELS[self.align])
        else:
            plot.getAxis("bottom").setStyle(showValues=False)
        if self.master is None:
            self.master = plot
            plot.addLegend(offset=(-10, 5), labelTextSize="10pt", brush=pg.mkBrush(255, 255, 255, 220))
        elif col == 0:
            plot.setXLink(self.master)
        elif row == 0:
            self.link_x(plot)
        else:
            plot.setXLink(self.plots[(self.metrics[0].key, col)])
        if col > 0:
            plot.setYLink(self.plots[(metric.key, 0)])
        line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen("#444444", width=1, style=QtCore.Qt.DashLine))
        line.setZValue(50)
        line.sigPositionChanged.connect(lambda ln: self.time_cursor.set(ln.value()))
        plot.addItem(line, ignoreBounds=True)
        self.cursor_lines.append(line)
        self.plots[(metric.key, col)] = plot

    def link_x(self, plot: pg.PlotItem) -> None:
        """Puts `plot` on the shared x axis. pyqtgraph's setXLink aligns views by screen position, right
        for plots stacked in one column; plots beside the master (columns, a full-width panel under
        columns) follow its range by value instead."""
        master = self.master
        if master is None:
            return
        if self.layout_mode != "columns":
            plot.setXLink(master)
            return
        self._x_group.append(plot)
        plot.setXLink(None)
        plot.sigXRangeChanged.connect(lambda _, r: self._sync_x(r))
        if len(self._x_group) == 1:
            master.sigXRangeChanged.connect(lambda _, r: self._sync_x(r))
        plot.setXRange(*master.viewRange()[0], padding=0)

    def _sync_x(self, x_range: tuple[float, float]) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            for plot in [self.master, *self._x_group]:
                if plot is not None and tuple(plot.viewRange()[0]) != tuple(x_range):
                    plot.setXRange(*x_range, padding=0)
        finally:
            self._syncing = False

    def _add_ram_axis(self, plot: pg.PlotItem) -> None:
        """A right axis in % of RAM when every loaded run ran on the same amount of RAM."""
        rams = {round(r.ram_total_mib or 0) for r in self.runs}
        if len(rams) != 1 or not next(iter(rams)):
            return
        axis = plot.getAxis("right")
        axis.setStyle(showValues=True)
        axis.setScale(100.0 / next(iter(rams)))
        axis.setLabel("% of RAM")

    def _add_run(self, run: RunData, index: int, col: int) -> None:
        colour = run_colour(index)
        anchor = run.anchor_ns(self.align)
        self.curves[run.run_id] = {}
        self.epoch_markers[run.run_id] = {}
        for metric in self.metrics:
            plot = self.plots[(metric.key, col)]
            items = []
            for s in run.series.get(metric.key, []):
                x = (s.t_ns - anchor) / 1e9
                finite = bool(np.isfinite(s.y).all())
                name = run.label + (f" {s.label}" if s.label else "")
                curve = pg.PlotDataItem(
                    x, s.y, pen=pg.mkPen(colour, width=1), name=name if metric is self.metrics[0] else None,
                    skipFiniteCheck=finite, connect="all" if finite else "finite",
                )
                plot.addItem(curve)
                items.append(curve)
            self.curves[run.run_id][metric.key] = items
            self.epoch_markers[run.run_id][metric.key] = self._epoch_lines(run, plot, index, colour, anchor, metric)
        if self.layout_mode == "columns":
            self.plots[(self.metrics[0].key, col)].setTitle(run.label, color=colour)

    def _epoch_lines(
        self, run: RunData, plot: pg.PlotItem, index: int, colour: str, anchor: int, metric: Metric
    ) -> list[pg.InfiniteLine]:
        """One line per epoch at its start; the first row labels it with its duration."""
        lines = []
        labelled = metric is self.metrics[0]
        pen = pg.mkPen(colour, width=1, style=QtCore.Qt.DotLine)
        for epoch in run.epochs:
            opts = {"position": 0.93 - 0.1 * (index % 4), "color": colour, "movable": False}
            label = f"E{epoch.epoch} {epoch.duration_s:.1f} s" if labelled else None
            line = pg.InfiniteLine(
                (epoch.start_ns - anchor) / 1e9, angle=90, pen=pen, label=label, labelOpts=opts if labelled else None
            )
            plot.addItem(line, ignoreBounds=True)
            lines.append(line)
        if run.epochs:
            end = pg.InfiniteLine((run.epochs[-1].end_ns - anchor) / 1e9, angle=90, pen=pen)
            plot.addItem(end, ignoreBounds=True)
        return lines

    def _on_mouse(self, pos: QtCore.QPointF) -> None:
        for plot in self.plots.values():
            if plot.sceneBoundingRect().contains(pos) and plot.getViewBox().sceneBoundingRect().contains(pos):
                self.time_cursor.set(plot.getViewBox().mapSceneToView(pos).x())
                return

    def _on_cursor(self, x: float) -> None:
        for line in self.cursor_lines:
            if line.value() != x:
                line.blockSignals(True)
                line.setValue(x)
                line.blockSignals(False)
        self._refresh_titles(x)

    def _refresh_titles(self, x: float | None) -> None:
        """Each row's title: metric and unit, then each run's value at the cursor in its colour."""
        columns = len(self.runs) if self.layout_mode == "columns" else 1
        for metric in self.metrics:
            parts = []
            for index, run in enumerate(self.runs):
                for s in run.series.get(metric.key, []):
                    value = None if x is None else s.value_at(run.anchor_ns(self.align) + x * 1e9)
                    text = "-" if value is None else format(value, UNIT_FORMAT.get(metric.unit, ".2f"))
                    if metric.key == "rss_mib" and value is not None and run.ram_total_mib:
                        text += f" ({100 * value / run.ram_total_mib:.1f} % RAM)"
                    who = run.label + (f" {s.label}" if s.label else "")
                    parts.append(f"<span style='color:{run_colour(index)}'>{who}: <b>{text}</b></span>")
            at = "" if x is None else f" at {x:.2f} s"
            title = f"<b>{metric.title}</b> [{metric.unit}]{at}: " + " &nbsp; ".join(parts)
            if columns == 1:
                self.plots[(metric.key, 0)].setTitle(title, size="9pt", justify="left")

    def sample_counts(self, run_id: str, metric: str) -> list[int]:
        """Points each curve of a run holds (before any downsampling): what tests compare with the samples."""
        return [len(c.getOriginalDataset()[0]) for c in self.curves.get(run_id, {}).get(metric, [])]


def _short(metric: Metric) -> str:
    return {"cpu_pct": "CPU", "rss_mib": "RSS", "threads": "threads", "gpu_util_pct": "GPU util",
            "gpu_mem_mib": "GPU mem", "gpu_power_w": "power"}[metric.key]
