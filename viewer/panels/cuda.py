"""CUDA API time split per run as horizontal bars (the study's Figure 3), switchable by phase
(whole run, start-up, steady state, each epoch), and a kernel top list.

The legend sits below the bars, not over them (with three runs it covered the top bar), and kernel names,
hundreds of characters of C++ templates, are elided in the middle with the whole name as the tooltip."""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from analyzers.render.facts import NO_TRACE
from analyzers.summaries.shares import OTHER, group_shares, other_label
from viewer.data import RunData
from viewer.style import run_colour

PHASE_ORDER = ("whole", "startup", "steady")
KERNEL_ROWS = 15
KERNEL_COLUMN_MIN_PX = 320
LEGEND_COLUMNS = 3
RUN_COLUMN_MAX_PX = 180


class CudaPanel(QtWidgets.QWidget):
    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[RunData] = []
        self.phase = QtWidgets.QComboBox()
        self.phase.currentTextChanged.connect(lambda _: self._draw_bars())
        self.note = QtWidgets.QLabel(NO_TRACE)
        self.note.setWordWrap(True)
        self.bars = pg.GraphicsLayoutWidget()
        self.bars.setMinimumHeight(220)
        self.bar_plot: pg.PlotItem = self.bars.addPlot(row=0, col=0)
        self.legend = pg.LegendItem(labelTextSize="9pt", colCount=LEGEND_COLUMNS)
        self.bars.ci.addItem(self.legend, row=1, col=0)
        self.kernels = QtWidgets.QTableWidget(0, 6)
        self.kernels.setHorizontalHeaderLabels(["run", "kernel", "time %", "total ms", "calls", "avg µs"])
        self.kernels.horizontalHeader().setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.kernels.horizontalHeader().setMinimumSectionSize(40)
        self.kernels.setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)
        self.kernels.setWordWrap(False)
        self.kernels.setMinimumWidth(KERNEL_COLUMN_MIN_PX + 300)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("phase:"))
        top.addWidget(self.phase)
        top.addWidget(self.note, 1)
        split = QtWidgets.QSplitter()
        split.addWidget(self.bars)
        split.addWidget(self.kernels)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)  # the kernels' names need the room more than the bars
        split.setSizes([1000, 2000])
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        self.bar_items: dict[str, pg.BarGraphItem] = {}
        self.bar_names: list[str] = []  # the bars' rows, top to bottom

    def bar_split(self, run_id: str) -> list[tuple[str, float]]:
        """(function, % of API time) as drawn for a run in the current phase, rows without a bar left out."""
        item = self.bar_items.get(run_id)
        if item is None:
            return []
        widths = [float(w) for w in item.opts["width"]]
        return [(n, w) for n, w in zip(self.bar_names, widths) if w > 0]

    def set_runs(self, runs: Sequence[RunData]) -> None:
        self.runs = list(runs)
        phases: list[str] = []
        for run in self.runs:
            phases += [p for p in run.api_phases if p not in phases]
        ordered = [p for p in PHASE_ORDER if p in phases] + sorted(
            (p for p in phases if p not in PHASE_ORDER), key=_epoch_key
        )
        current = self.phase.currentText()
        self.phase.blockSignals(True)
        self.phase.clear()
        self.phase.addItems(ordered)
        if current in ordered:
            self.phase.setCurrentText(current)
        self.phase.blockSignals(False)
        untraced = [r.label for r in self.runs if not r.api_phases]
        self.note.setText("; ".join(f"{label}: {NO_TRACE}" for label in untraced))
        self._draw_bars()
        self._fill_kernels()

    def _draw_bars(self) -> None:
        plot = self.bar_plot
        plot.clear()
        self.legend.clear()
        self.bar_items.clear()
        self.bar_names = []
        phase = self.phase.currentText()
        traced = [(i, r) for i, r in enumerate(self.runs) if phase in r.api_phases]
        if not traced:
            plot.setTitle(NO_TRACE if self.runs else "no runs loaded", size="10pt")
            plot.getAxis("left").setTicks(None)
            return
        # the report's Figure 3 rule (analyzers.summaries.shares): a function listed once any run reaches 1 %
        grouped_names, grouped = group_shares({r.run_id: r.api_phases[phase] for _, r in traced})
        names = [other_label() if n == OTHER else n for n in grouped_names]
        splits = {run_id: dict(zip(names, values)) for run_id, values in grouped.items()}
        self.bar_names = names
        height = 0.8 / len(traced)
        for k, (index, run) in enumerate(traced):
            split = splits[run.run_id]
            ys = [i + k * height - 0.4 + height / 2 for i in range(len(names))]
            item = pg.BarGraphItem(
                x0=[0.0] * len(names),
                y=ys,
                height=height * 0.9,
                width=[split.get(n, 0.0) for n in names],
                brush=run_colour(self.runs, index),
                name=run.label,
            )
            plot.addItem(item)
            self.legend.addItem(item, run.label)
            self.bar_items[run.run_id] = item
        plot.getAxis("left").setTicks([[(i, n) for i, n in enumerate(names)], []])
        plot.getViewBox().invertY(True)
        plot.setLabel("bottom", "share of CUDA API time (%)")
        plot.setTitle(f"CUDA API time split, {phase} (functions >= 1 %, the rest as other)", size="10pt")

    def _fill_kernels(self) -> None:
        rows = [(run.label, k) for run in self.runs for k in run.kernels[:KERNEL_ROWS]]  # largest first
        self.kernels.setRowCount(len(rows))
        for i, (label, k) in enumerate(rows):
            values = [
                label,
                k.short_name or k.name,
                f"{k.time_pct:.1f}",
                f"{k.total_ns / 1e6:.2f}",
                f"{k.calls}",
                f"{k.avg_ns / 1e3:.1f}",
            ]
            for j, v in enumerate(values):
                cell = QtWidgets.QTableWidgetItem(v)
                cell.setToolTip(v)
                self.kernels.setItem(i, j, cell)
        header = self.kernels.horizontalHeader()
        for column in (0, 2, 3, 4, 5):
            self.kernels.resizeColumnToContents(column)
        header.resizeSection(0, min(header.sectionSize(0), RUN_COLUMN_MAX_PX))


def _epoch_key(phase: str) -> tuple[int, str]:
    tail = phase.rsplit(" ", 1)[-1]
    return (int(tail), phase) if tail.isdigit() else (1 << 30, phase)
