"""Per-epoch times and images/s of every loaded run, and the runs' `run.json` facts side by side."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6 import QtGui, QtWidgets

from viewer.data import RunData
from viewer.style import run_colour


class EpochTable(QtWidgets.QTableWidget):
    HEADERS = ("run", "epoch", "duration (s)", "images", "images/s", "data wait %", "loss")

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(0, len(self.HEADERS), parent)
        self.setHorizontalHeaderLabels(list(self.HEADERS))
        self.horizontalHeader().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)

    def set_runs(self, runs: Sequence[RunData]) -> None:
        rows = []
        for index, run in enumerate(runs):
            for e in run.epochs:
                rows.append(
                    (
                        index,
                        run.label,
                        str(e.epoch),
                        f"{e.duration_s:.2f}",
                        str(e.images),
                        f"{e.images_per_s:.1f}",
                        _pct(run.data_wait_by_epoch.get(e.epoch)),
                        f"{e.loss:.4f}",
                    )
                )
            if not run.epochs:
                rows.append((index, run.label, "-", "no epoch completed", "", "", "", ""))
        self.setRowCount(len(rows))
        for i, (index, *values) in enumerate(rows):
            for j, value in enumerate(values):
                item = QtWidgets.QTableWidgetItem(value)
                if j == 0:
                    item.setForeground(QtGui.QColor(run_colour(runs, index)))
                self.setItem(i, j, item)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}"


class FactsTable(QtWidgets.QTableWidget):
    """One column per run, one row per fact; a failed run's cause is in its status row."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(0, 0, parent)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(True)

    def set_runs(self, runs: Sequence[RunData]) -> None:
        facts = [run.facts() for run in runs]
        keys: list[str] = []
        for f in facts:
            keys += [k for k, _ in f if k not in keys]
        self.setColumnCount(len(runs))
        self.setRowCount(len(keys))
        self.setVerticalHeaderLabels(keys)
        for col, (run, f) in enumerate(zip(runs, facts)):
            header = QtWidgets.QTableWidgetItem(run.label)
            header.setForeground(QtGui.QColor(run_colour(runs, col)))
            self.setHorizontalHeaderItem(col, header)
            values = dict(f)
            for row, key in enumerate(keys):
                self.setItem(row, col, QtWidgets.QTableWidgetItem(values.get(key, "")))
        self.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
