"""Time panels (CPU, RSS, threads, GPU): one row per metric, one colour or one column per run,
all on one linked x axis, with epoch markers and the shared cursor's readout in each plot's title.

Curves draw from each series' precomputed min/max pyramid (`viewer.panels.curve.EnvelopeCurve`), so a pan or
zoom costs what the plot's pixels cost, whatever the length of the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from tracer.core import schema
from viewer.cursor import TimeCursor
from viewer.data import METRICS, Metric, RunData, Series
from viewer.panels.curve import EnvelopeCurve
from viewer.panels.frame import BeforePaint
from viewer.panels.markers import EpochMarkers
from viewer.style import CACHED, LEFT_AXIS_WIDTH, RIGHT_AXIS_WIDTH, run_colour

ALIGN_LABELS = {"start": "time since run start (s)", "epoch": "time since first epoch start (s)"}
TITLE_HEIGHT = 34  # two lines of 9 pt
PLOT_MIN_PX = 80  # a plot's data area never shrinks below this: the window scrolls instead (ticks stay apart)
BOTTOM_AXIS_PX = 50
ROW_MARGIN_PX = 12  # a plot's own margins and the layout's spacing, per row
UNIT_FORMAT = {"%": ".1f", "MiB": ".0f", "count": ".0f", "W": ".1f"}
NO_INDEX = QtWidgets.QGraphicsScene.ItemIndexMethod.NoIndex  # every item moves on every pan: an index only costs


class TimelinePanel(pg.GraphicsLayoutWidget):
    """Rows of plots; `set_runs` rebuilds them, the cursor only moves lines and rewrites titles."""

    def __init__(self, cursor: TimeCursor, parent: object = None) -> None:
        super().__init__(parent)
        self.time_cursor = cursor
        self.runs: list[RunData] = []
        self.align = "start"
        self.layout_mode = "overlay"
        self.plots: dict[tuple[str, int], pg.PlotItem] = {}
        self.curves: dict[str, dict[str, list[EnvelopeCurve]]] = {}
        self.epoch_markers: dict[str, dict[str, EpochMarkers]] = {}
        self.cursor_lines: list[pg.InfiniteLine] = []
        self.metrics: list[Metric] = []
        self.master: pg.PlotItem | None = None
        self._pool: dict[tuple[str, int], pg.PlotItem] = {}  # plots outlive rebuilds: making one costs ~50 ms
        self._synced: set[int] = set()
        self._x_group: list[pg.PlotItem] = []
        self._syncing = False
        self.ci.setSpacing(2)
        self.before_paint = BeforePaint(self)  # one paint per pan or zoom, not two
        self.scene().setItemIndexMethod(NO_INDEX)
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
        self._x_group = []
        self._syncing = False
        self.metrics = [m for m in METRICS if any(r.series.get(m.key) for r in self.runs)]
        if not self.metrics:
            text = (
                "no sampled CPU/RAM in the loaded runs (imported traces have none): see the thread lanes and CUDA tab"
                if self.runs
                else "no samples to plot: add a run (toolbar, run browser, or drop a folder here)"
            )
            self.addLabel(text, row=0, col=0)
            return
        columns = len(self.runs) if self.layout_mode == "columns" else 1
        for row, metric in enumerate(self.metrics):
            for col in range(columns):
                self._add_plot(metric, row, col, last_row=row == len(self.metrics) - 1)
        for index, run in enumerate(self.runs):
            col = index if columns > 1 else 0
            self._add_run(run, index, col)
        if columns > 1:
            self._common_y_ranges(columns)
        self.setMinimumHeight(len(self.metrics) * (TITLE_HEIGHT + PLOT_MIN_PX + ROW_MARGIN_PX) + BOTTOM_AXIS_PX)
        if self.time_cursor.x is not None:
            self._on_cursor(self.time_cursor.x)
        else:
            self._refresh_titles(None)

    def _add_plot(self, metric: Metric, row: int, col: int, last_row: bool) -> None:
        plot = self._pool.get((metric.key, col))
        if plot is None:
            plot = self._pool[(metric.key, col)] = pg.PlotItem()
            # what a pan does not change is painted from a pixmap: the title (rewritten only when the cursor
            # moves) and the y axes (redrawn only when the y range or the size changes)
            for item in (plot.titleLabel.item, plot.getAxis("left"), plot.getAxis("right")):
                item.setCacheMode(CACHED)
        else:
            plot.clear()
            plot.setXLink(None)
            plot.setYLink(None)
        self.addItem(plot, row=row, col=col)
        plot.showGrid(x=False, y=False)
        plot.setMenuEnabled(True)
        plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        plot.showAxis("right")
        plot.getAxis("right").setWidth(RIGHT_AXIS_WIDTH)
        plot.getAxis("right").setStyle(showValues=False)
        plot.getAxis("right").showLabel(False)
        # The axis names only the unit: the title above names the metric, and a panel is often shorter than
        # a rotated "threads (count)" (six of them overlapped each other down the left edge).
        if metric.unit == "s":  # seconds scale with an SI prefix ("(ms)"), not a "(x0.001)" factor
            plot.setLabel("left", "", units="s")
        else:  # no "kMiB" or "k%": these units stay as they are
            plot.getAxis("left").enableAutoSIPrefix(False)
            plot.setLabel("left", metric.unit)
        # the wheel and drags move time only; y fits every curve whole (each reports its whole series'
        # bounds), so zooming never clips them and a pan never recomputes the y range
        plot.getViewBox().setMouseEnabled(x=True, y=False)
        plot.getViewBox().setAutoVisible(y=False)
        plot.enableAutoRange(y=True)
        if metric.unit == "%" and metric.key == schema.CPU_PCT:
            plot.setYRange(0, 100, padding=0.02)
        if metric.key == schema.RSS_MIB and col == self._columns() - 1:  # only the last column: no overlap
            self._add_ram_axis(plot)
        # pyqtgraph rewrites an axis's label on every range change where it may take an SI prefix: only the
        # one time axis shown needs it (17 hidden ones did it on every pan)
        plot.getAxis("top").enableAutoSIPrefix(False)
        plot.getAxis("bottom").enableAutoSIPrefix(last_row)
        if last_row:
            plot.showAxis("bottom")
            plot.setLabel("bottom", ALIGN_LABELS[self.align])
        else:
            plot.hideAxis("bottom")  # one time axis, under the last row
        if self.master is None:  # no legend: every title names the runs in their colours (one covered the curves)
            self.master = plot
        elif col == 0:
            plot.setXLink(self.master)
        elif row == 0:
            self.link_x(plot)
        else:
            plot.setXLink(self.plots[(self.metrics[0].key, col)])
        if col > 0:
            plot.setYLink(self.plots[(metric.key, 0)])
        dash = pg.mkPen("#444444", width=1, style=QtCore.Qt.PenStyle.DashLine)
        line = pg.InfiniteLine(angle=90, movable=True, pen=dash)
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
        for p in (plot, master):
            if id(p) not in self._synced:  # plots are reused across rebuilds: connect each once
                self._synced.add(id(p))
                p.sigXRangeChanged.connect(lambda _, r: self._sync_x(r))
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

    def _common_y_ranges(self, columns: int) -> None:
        """Column mode: each row's columns get one y range that holds every run's values (a y link would
        follow the first column's own auto range: TensorFlow's 13 threads went off a 1-3 scale)."""
        for metric in self.metrics:
            values = [s.envelope.y_bounds for r in self.runs for s in r.series.get(metric.key, []) if len(s)]
            finite = [b for b in values if b is not None and all(map(math.isfinite, b))]
            if not finite:
                continue
            lo, hi = min(b[0] for b in finite), max(b[1] for b in finite)
            if metric.key == schema.CPU_PCT:
                lo, hi = 0.0, max(hi, 100.0)
            for col in range(columns):
                plot = self.plots[(metric.key, col)]
                plot.setYLink(None)
                plot.enableAutoRange(y=False)
                plot.setYRange(min(lo, 0.0), hi if hi > lo else lo + 1.0, padding=0.05)

    def reset_y(self) -> None:
        """Reset zoom's y: the curves in view, or in column mode each row's one range for every run."""
        columns = self._columns()
        if columns > 1:
            self._common_y_ranges(columns)
            return
        for plot in self.plots.values():
            plot.enableAutoRange(y=True)

    def y_range(self, metric: str, col: int) -> tuple[float, float]:
        """The y range shown for `metric` in column `col` (tests: every column holds every run)."""
        (_, _), (y0, y1) = self.plots[(metric, col)].viewRange()
        return float(y0), float(y1)

    def full_x_range(self) -> tuple[float, float] | None:
        """The time every run's samples and epochs span on the shared axis, None without any."""
        lows, highs = [], []
        for run in self.runs:
            anchor = run.anchor_ns(self.align)
            for series in run.series.values():
                for s in series:
                    if len(s):
                        lows.append((int(s.t_ns[0]) - anchor) / 1e9)
                        highs.append((int(s.t_ns[-1]) - anchor) / 1e9)
            if run.epochs:
                lows.append((run.epochs[0].start_ns - anchor) / 1e9)
                highs.append((run.epochs[-1].end_ns - anchor) / 1e9)
        return (min(lows), max(highs)) if lows else None

    def _columns(self) -> int:
        return len(self.runs) if self.layout_mode == "columns" else 1

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
        colour = run_colour(self.runs, index)
        anchor = run.anchor_ns(self.align)
        self.curves[run.run_id] = {}
        self.epoch_markers[run.run_id] = {}
        for metric in self.metrics:
            plot = self.plots[(metric.key, col)]
            items = []
            for s in run.series.get(metric.key, []):
                offset = (int(s.t_ns[0]) - anchor) / 1e9 if len(s) else 0.0
                name = run.label + (f" {s.label}" if s.label else "")
                curve = EnvelopeCurve(
                    s.envelope, offset, pen=pg.mkPen(colour, width=1), name=name if metric is self.metrics[0] else None
                )
                plot.addItem(curve)
                items.append(curve)
            self.curves[run.run_id][metric.key] = items
            self.epoch_markers[run.run_id][metric.key] = self._epoch_lines(run, plot, index, colour, anchor, metric)

    def _epoch_lines(
        self, run: RunData, plot: pg.PlotItem, index: int, colour: str, anchor: int, metric: Metric
    ) -> EpochMarkers:
        """A line at each epoch's start and one at the last epoch's end; the first row labels each line
        with its epoch's duration."""
        starts = [(e.start_ns - anchor) / 1e9 for e in run.epochs]
        end = (run.epochs[-1].end_ns - anchor) / 1e9 if run.epochs else None
        # Runs overlaid in one column label their epochs in different rows of plots (run i in row i):
        # in one short plot the labels of three runs wrote over each other.
        overlaid = self._columns() == 1
        labelled = self.metrics[index % len(self.metrics)] if overlaid else self.metrics[0]
        labels = [f"E{e.epoch} {e.duration_s:.1f} s" for e in run.epochs] if metric is labelled else None
        markers = EpochMarkers(starts, end, colour, labels)
        plot.addItem(markers, ignoreBounds=True)
        return markers

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
        """Each plot's title: metric and unit, then the value at the cursor of each run it shows, in the
        run's colour; in columns, the top plot of each column also names its run."""
        at = "" if x is None else f" at {x:.2f} s"
        for metric in self.metrics:
            if self.layout_mode != "columns":
                parts = [
                    self._readout(run, index, metric, s, x, with_run=True)
                    for index, run in enumerate(self.runs)
                    for s in run.series.get(metric.key, [])
                ]
                title = f"<b>{metric.title}</b>{_unit_tag(metric)}{at}: " + " &nbsp; ".join(parts)
                self._set_title(self.plots[(metric.key, 0)], title, 1)
                continue
            for index, run in enumerate(self.runs):
                plot = self.plots.get((metric.key, index))
                if plot is None:
                    continue
                parts = [
                    self._readout(run, index, metric, s, x, with_run=False) for s in run.series.get(metric.key, [])
                ]
                head = (
                    f"<span style='color:{run_colour(self.runs, index)}'><b>{run.label}</b></span> &nbsp; "
                    if metric is self.metrics[0]
                    else ""
                )
                title = f"{head}<b>{_short(metric)}</b>{_unit_tag(metric)}{at}: " + " &nbsp; ".join(parts or ["-"])
                self._set_title(plot, title, len(self.runs))

    def _set_title(self, plot: pg.PlotItem, html: str, columns: int) -> None:
        """A title wraps onto a second line rather than widen its plot past the window (a long
        readout of many runs would otherwise push the right axis out of view)."""
        plot.setTitle(html, size="9pt", justify="left")
        plot.layout.setRowFixedHeight(0, TITLE_HEIGHT)
        label = plot.titleLabel
        label.setMaximumHeight(TITLE_HEIGHT)
        width = max(120.0, self.width() / max(columns, 1) - LEFT_AXIS_WIDTH - RIGHT_AXIS_WIDTH - 40)
        label.item.setTextWidth(width)
        label.updateMin()

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.before_paint.attach()

    def resizeEvent(self, event: QtGui.QResizeEvent | None) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if getattr(self, "metrics", None):  # pyqtgraph resizes once before __init__ is done
            self._refresh_titles(self.time_cursor.x)

    def _readout(self, run: RunData, index: int, metric: Metric, s: Series, x: float | None, with_run: bool) -> str:
        """One series' value at the cursor, in its run's colour (RSS also in % of RAM)."""
        value = None if x is None else s.value_at(run.anchor_ns(self.align) + x * 1e9)
        if value is None:
            text = "-"
        elif metric.unit == "s":  # 25 µs, not 0.00
            text = pg.siFormat(value, precision=3, suffix="s", space=True)
        else:
            text = format(value, UNIT_FORMAT.get(metric.unit, ".2f"))
        if metric.key == schema.RSS_MIB and value is not None and run.ram_total_mib:
            text += f" ({100 * value / run.ram_total_mib:.1f} % RAM)"
        who = " ".join(w for w in (run.label if with_run else "", s.label) if w)
        return f"<span style='color:{run_colour(self.runs, index)}'>{who + ': ' if who else ''}<b>{text}</b></span>"

    def title_text(self, metric: str, col: int = 0) -> str:
        plot = self.plots.get((metric, col))
        return str(plot.titleLabel.text) if plot is not None else ""

    def sample_counts(self, run_id: str, metric: str) -> list[int]:
        """Samples each curve of a run stands for (it draws a pyramid level): what tests compare with the run."""
        return [len(c) for c in self.curves.get(run_id, {}).get(metric, [])]

    def drawn_points(self, run_id: str, metric: str) -> list[int]:
        """Points each curve of a run hands Qt for the current view."""
        return [len(c.getData()[0]) for c in self.curves.get(run_id, {}).get(metric, [])]


def _unit_tag(metric: Metric) -> str:
    """The unit in a title, where it is the axis's: seconds get an SI prefix on the axis ("(ms)") and in
    every readout ("911 ms"), so a title saying "[s]" beside an axis saying "(ms)" would contradict it."""
    return "" if metric.unit == "s" else f" [{metric.unit}]"


def _short(metric: Metric) -> str:
    return {
        schema.CPU_PCT: "CPU",
        schema.PSS_MIB: "PSS",
        schema.RSS_MIB: "RSS",
        "threads": "threads",
        "gpu_util_pct": "GPU util",
        "gpu_mem_mib": "GPU mem",
        "gpu_power_w": "power",
        "step_data_wait_s": "data wait",
        "step_compute_s": "compute",
        "step_sync_s": "sync",
        "step_forward_s": "forward",
        "step_backward_s": "backward",
        "step_optimizer_s": "optimizer",
    }[metric.key]
