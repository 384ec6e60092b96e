"""Thread lanes: one lane per thread (name and tid), grouped by run, coloured by activity.

Lanes are drawn as one image per run, rebuilt for the visible time range at the view's pixel
resolution from the run's `LaneIndex` (a precomputed raster for wide views, the visible segments for
narrow ones): a run with a million segments costs what its pixels cost, and a short burst is never lost
(each pixel shows the highest-priority activity that touches it). Zoomed in below `CALLS_BELOW_S`
seconds, the CUDA API calls of runs with a trace appear as a black stripe on their thread's lane.

Under a traced run's threads, its GPU rows (one lane per device and stream: kernels, copies, memsets)
and NVTX rows (epoch and step ranges, one lane per nesting depth) are drawn the same way, so 100k
kernels cost what their pixels cost. Hovering a launch call or a GPU operation names it and its peer
(the correlation id's, `analyzers.trace.correlation`) and draws the link between them (`viewer.panels.lane_hover`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from analyzers.timeline.gpu_timeline import NVTX_ACTIVITIES
from analyzers.timeline.lane_index import CALLS as CALL_INDEX
from analyzers.timeline.lane_index import GPU, THREADS
from analyzers.timeline.lanes import GpuLanes, activity_priority
from viewer.cursor import TimeCursor
from viewer.data import RunData
from viewer.panels.frame import BeforePaint
from viewer.panels.lane_hover import Hover, LaneHover, _GpuRows, _RunLanes
from viewer.style import CACHED, LEFT_AXIS_WIDTH, LINK_COLOUR, RIGHT_AXIS_WIDTH, activity_colour, label_font, run_colour

CALLS_BELOW_S = 2.0
SUBROWS = 5  # image rows per lane: 4 painted, 1 left blank between lanes
MAX_BINS = 2400
CALLS = "CUDA API call"
CALLS_LEGEND = html.escape(f"{CALLS} (zoom < {CALLS_BELOW_S:g} s)")  # legend labels are HTML: "<" began a tag
RUN_GAP_ROWS = 1  # a blank row between runs, so a run's header stands apart from the last lane above
MIN_HEIGHT_PX, MAX_MIN_HEIGHT_PX, AXES_PX = 120, 6000, 100  # the window scrolls: every lane gets a line
LABEL_GAP_PX = 1  # between two lane labels: labels that would come closer are left out, run headers first
LEGEND_COLUMNS = 7
NVTX_LABEL_MIN_PX = 40  # an NVTX range this wide on screen gets its name written on it
MAX_NVTX_LABELS = 60


class ThreadPanel(LaneHover, pg.GraphicsLayoutWidget):
    def __init__(self, cursor: TimeCursor, parent: object = None) -> None:
        super().__init__(parent)
        self.time_cursor = cursor
        self.runs: list[RunData] = []
        self.align = "start"
        self.plot: pg.PlotItem = self.addPlot(row=0, col=0)
        for side in ("left", "right"):  # the lane names and the frame's edge: a pan or zoom changes neither axis
            self.plot.getAxis(side).setCacheMode(CACHED)
        self.lanes: dict[str, _RunLanes] = {}
        self.visible_calls = 0
        dash = pg.mkPen("#444444", style=QtCore.Qt.PenStyle.DashLine)
        self.cursor_line = pg.InfiniteLine(angle=90, movable=True, pen=dash)
        self.cursor_line.sigPositionChanged.connect(lambda ln: self.time_cursor.set(ln.value()))
        cursor.moved.connect(self._on_cursor)
        self.stale = False  # the images, calls count and NVTX labels are not yet those of the current view
        self.redraws = 0  # lane images built (tests: a panel out of view builds none)
        self.before_paint = BeforePaint(self, self._draw_if_seen)
        self.plot.sigXRangeChanged.connect(self._view_changed)
        self.plot.getViewBox().sigResized.connect(self._view_changed)
        self.plot.getViewBox().sigResized.connect(lambda *_: self._thin_ticks())
        self.gpu_rows: dict[str, _GpuRows] = {}
        self.hover: Hover | None = None
        self.link = pg.PlotDataItem([], [], pen=pg.mkPen(LINK_COLOUR, width=2), connect="finite")
        self.nvtx_labels: list[pg.TextItem] = []
        self.scene().sigMouseMoved.connect(self._on_mouse)
        self.legend: pg.LegendItem | None = None
        self.message = ""
        self.all_ticks: list[tuple[float, str, bool]] = []  # (y, text, is a run header) before thinning
        self._thinning = False  # inside _thin_ticks (its resize calls it back)
        self.shown_ticks: list[tuple[float, str]] = []

    def set_runs(self, runs: Sequence[RunData], align: str, link: Callable[[pg.PlotItem], None] | None) -> None:
        self.runs = list(runs)
        self.align = align
        plot = self.plot
        plot.clear()
        self.lanes.clear()
        self.gpu_rows.clear()
        self.nvtx_labels.clear()
        self.hover = None
        if self.legend is None:  # below the lanes, in rows: over the plot it hid the end of the run (GPU work)
            self.legend = pg.LegendItem(labelTextSize="9pt", colCount=LEGEND_COLUMNS)
            self.ci.addItem(self.legend, row=1, col=0)
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
            lanes, gpu = run.lanes.threads, run.lanes.gpu
            if lanes is None and gpu is None:
                missing.append(run.label)
                continue
            ticks.append((-y + 0.4, _fit(f"▼ {run.label}", LEFT_AXIS_WIDTH - 8), True))
            thread_lanes = 0
            spans = []
            if lanes is not None:
                thread_lanes = len(lanes.lane_names)
                for i, name in enumerate(lanes.lane_names):
                    ticks.append((-(y + 1 + i) + 0.4, name[:24], False))
                self.lanes[run.run_id] = self._prepare(run, y)
                shown.update(lanes.activities)
                if len(lanes.start_ns):
                    spans.append(lanes.span_ns)
            if gpu is not None:
                top = y + 1 + thread_lanes
                for i, name in enumerate(gpu.lane_names):
                    ticks.append((-(top + i) - 0.6, name[:24], False))
                self.gpu_rows[run.run_id] = self._prepare_gpu(run, gpu, top)
                shown.update(a for a in gpu.activities if a != NVTX_ACTIVITIES[1])
                spans.append(gpu.span_ns)
                thread_lanes += len(gpu.lane_names) + 1  # a blank row between threads and GPU rows
            anchor = run.anchor_ns(align)
            if spans:
                first, last = min(a for a, _ in spans), max(b for _, b in spans)
                plot.addItem(
                    pg.BarGraphItem(
                        x0=[(first - anchor) / 1e9],
                        width=[(last - first) / 1e9],
                        y0=[-y + 0.25],
                        height=[0.3],
                        brush=run_colour(self.runs, index),
                        pen=pg.mkPen(None),
                    )
                )
            y += thread_lanes + 1 + RUN_GAP_ROWS
        for activity in sorted(shown, key=activity_priority):
            self.legend.addItem(_swatch(activity_colour(activity)), activity)
        if any(r.lanes.api_calls is not None for r in self.runs):
            self.legend.addItem(_swatch("#000000"), CALLS_LEGEND)
        self.all_ticks = ticks
        plot.addItem(self.cursor_line, ignoreBounds=True)
        plot.addItem(self.link, ignoreBounds=True)
        self.link.setData([], [])
        self.message = ("no thread samples: " + ", ".join(missing)) if missing else ""
        if not self.lanes and not self.gpu_rows:
            plot.setTitle("no thread data in the loaded runs", size="9pt")
        else:
            # each source once over all runs ("nsys, sampler", not "nsys, sampler; sampler")
            sources = ", ".join(sorted({s for r in self.runs if r.lanes.threads for s in r.lanes.threads.sources if s}))
            sources = sources or "thread timeline"
            title = f"<b>Thread lanes</b>: one per thread (name and tid), coloured by activity; source: {sources}"
            if self.gpu_rows:
                title += "; GPU streams and NVTX ranges below a traced run's threads (hover: launch and kernel)"
            plot.setTitle(title, size="9pt", justify="left")
            plot.setYRange(-y, 0.5, padding=0)
            full = self.full_x_range()
            if link is None and full is not None:
                plot.setXRange(*full)
        if link is not None:
            link(plot)
        self._thin_ticks()  # after the y range is set: thinning is in pixels of the final view
        QtCore.QTimer.singleShot(0, self, self._thin_ticks)  # again once the layout settled (dropped if closed)
        self._view_changed()

    def _prepare(self, run: RunData, top: int) -> _RunLanes:
        lanes = run.lanes.threads
        assert lanes is not None
        anchor = run.anchor_ns(self.align)
        calls = run.lanes.api_calls
        image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(image)
        return _RunLanes(
            index=run.indexes[THREADS],
            offset=(lanes.origin_ns - anchor) / 1e9,
            activities=lanes.activities,
            lanes=len(lanes.lane_names),
            top=top,
            calls=run.indexes.get(CALL_INDEX),
            calls_offset=0.0 if calls is None else (calls.origin_ns - anchor) / 1e9,
            image=image,
        )

    def _prepare_gpu(self, run: RunData, gpu: GpuLanes, top: int) -> _GpuRows:
        image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(image)
        colours = np.array([_rgba(activity_colour(a)) for a in gpu.names] + [(0, 0, 0, 0)], dtype=np.uint8)
        offset = (gpu.origin_ns - run.anchor_ns(self.align)) / 1e9
        return _GpuRows(run, gpu, run.indexes[GPU], offset, top, image, colours)

    def _thin_ticks(self) -> None:
        """Lane labels that fit the panel's height: every run header, then as many thread labels as leave
        `LABEL_GAP_PX` between neighbours (with 30 threads in 200 px, every third), never two on each other."""
        if self._thinning:  # the resize below calls back (sigResized) before it returns: done once, after it
            return
        self._thinning = True
        line_px = QtGui.QFontMetricsF(label_font(8)).height() + LABEL_GAP_PX  # a label's line and its gap
        try:
            self._fit_height(line_px)
            self._thin_ticks_to_height(line_px)
        finally:
            self._thinning = False

    def _fit_height(self, line_px: float) -> None:
        """Tall enough for a line per lane (one run's too): the window scrolls rather than squeeze."""
        if not self.all_ticks:
            return
        view = self.plot.getViewBox()
        (_, _), (y0, y1) = view.viewRange()
        height_px = max(view.height(), 1.0)
        overhead = self.height() - height_px if self.height() > height_px > 1 else AXES_PX
        need = line_px * (y1 - y0) + overhead + line_px  # a line to spare
        self.setMinimumHeight(math.ceil(min(MAX_MIN_HEIGHT_PX, max(MIN_HEIGHT_PX, need))))

    def _thin_ticks_to_height(self, line_px: float) -> None:
        """The labels that fit the view's height now (after any resize `_fit_height` made)."""
        view = self.plot.getViewBox()
        (_, _), (y0, y1) = view.viewRange()
        px_per_unit = max(view.height(), 1.0) / max(y1 - y0, 1e-9)
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
        groups: list[_RunLanes | _GpuRows] = [*self.lanes.values(), *self.gpu_rows.values()]
        bounds = [(r.index.span[0] + r.offset, r.index.span[1] + r.offset) for r in groups if len(r.index)]
        if not bounds:
            return None
        return min(b[0] for b in bounds), max(b[1] for b in bounds)

    def lane_count(self, run_id: str) -> int:
        lanes = self.lanes.get(run_id)
        return lanes.lanes if lanes is not None else 0

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.before_paint.attach()

    def current(self) -> ThreadPanel:
        """The panel with its lane images, `visible_calls` and NVTX labels drawn for the current view: what
        reads them right after a range change calls this (a panel out of view draws them when it is seen)."""
        if self.stale:
            self._redraw()
        return self

    def _view_changed(self) -> None:
        """A range change or resize: the lanes are drawn before the next paint that shows them, once, however
        many range changes came before it (9-23 ms a pan went to lanes scrolled out below the time panels)."""
        self.stale = True  # the range change itself asks the panel for a paint (none comes while out of view)

    def _draw_if_seen(self) -> None:
        """Before the window paints: the lanes, where they changed and some of the panel is on screen."""
        if self.stale and self.isVisible() and not self.viewport().visibleRegion().isEmpty():
            self._redraw()

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt's name
        self.current()  # a grab or an export paints the panel whether it is on screen or not
        super().paintEvent(event)

    def _redraw(self) -> None:
        """Rebuilds each run's lane image for the visible range, one column per pixel."""
        self.stale = False
        self.redraws += 1
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
        for rows in self.gpu_rows.values():
            n = len(rows.gpu.lane_names)
            level = rows.index.raster(x0 - rows.offset, x1 - rows.offset, bins)
            img = np.zeros((n, SUBROWS, bins, 4), dtype=np.uint8)
            img[:, : SUBROWS - 1] = rows.colours[level[::-1]][:, None]
            rows.image.setImage(img.reshape(n * SUBROWS, bins, 4), autoLevels=False)
            rows.image.setRect(QtCore.QRectF(x0, -(rows.top + n), x1 - x0, n))
        self._label_nvtx(x0, x1, bins)

    def _label_nvtx(self, x0: float, x1: float, pixels: int) -> None:
        """Writes the names of the NVTX ranges wide enough on screen (epochs, then steps when zoomed in)."""
        per_px = (x1 - x0) / max(pixels, 1)
        placed: list[tuple[float, float, str]] = []  # (x, y, text)
        metrics = QtGui.QFontMetricsF(label_font(8))
        for rows in self.gpu_rows.values():
            gpu = rows.gpu
            if not gpu.nvtx_lanes:
                continue
            first_lane = len(gpu.lane_names) - gpu.nvtx_lanes
            shown = rows.index.visible(x0 - rows.offset, x1 - rows.offset, range(first_lane, len(gpu.lane_names)))
            a = np.maximum(rows.index.x0[shown] + rows.offset, x0)
            b = np.minimum(rows.index.x1[shown] + rows.offset, x1)
            wide = (b - a) / per_px >= NVTX_LABEL_MIN_PX  # only the ranges wide enough for a name: few
            for i, left, right in zip(shown[wide].tolist(), a[wide].tolist(), b[wide].tolist()):
                text = metrics.elidedText(gpu.label(i), QtCore.Qt.TextElideMode.ElideRight, (right - left) / per_px - 4)
                placed.append((left, -(rows.top + int(gpu.lane[i])) - 0.5, text))
                if len(placed) >= MAX_NVTX_LABELS:
                    break
        while len(self.nvtx_labels) < len(placed):
            item = pg.TextItem(color="#ffffff", anchor=(0, 0.5))
            item.setFont(label_font(8))
            self.plot.addItem(item, ignoreBounds=True)
            self.nvtx_labels.append(item)
        for k, item in enumerate(self.nvtx_labels):
            item.setVisible(k < len(placed))
            if k < len(placed):
                x, y, text = placed[k]
                item.setText(text)
                item.setPos(x, y)

    def _on_mouse(self, scene_pos: QtCore.QPointF) -> None:
        view = self.plot.getViewBox()
        if view.sceneBoundingRect().contains(scene_pos):
            at = view.mapSceneToView(scene_pos)
            hover = self.hover_at(at.x(), at.y())
        else:
            hover = self.hover = None
            self._draw_link(None)
        if hover is None:
            QtWidgets.QToolTip.hideText()
        else:
            global_pos = self.mapToGlobal(self.mapFromScene(scene_pos))
            QtWidgets.QToolTip.showText(global_pos, hover.text, self)

    def _on_cursor(self, x: float) -> None:
        if self.cursor_line.value() != x:
            self.cursor_line.blockSignals(True)
            self.cursor_line.setValue(x)
            self.cursor_line.blockSignals(False)


def _fit(text: str, width_px: int) -> str:
    """`text` in the lane labels' font, elided in the middle where wider than `width_px`: a run's label
    keeps its start (framework, model) and its end (trace backend, the id that tells two runs apart)."""
    return QtGui.QFontMetricsF(label_font(8)).elidedText(text, QtCore.Qt.TextElideMode.ElideMiddle, width_px)


def _rgba(colour: str) -> tuple[int, int, int, int]:
    c = QtGui.QColor(colour)
    return (c.red(), c.green(), c.blue(), 255)


def _swatch(colour: str) -> pg.BarGraphItem:
    return pg.BarGraphItem(x=[0], height=[0], width=0, brush=colour)
