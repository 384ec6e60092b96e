"""Run browser: the run folders under `runs/` as a filterable, sortable table; double-click or
"Open selected" adds them to the view. Summaries are computed off the GUI thread."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from analyzers.figures.run_summary import summarise
from analyzers.run.run import Run
from analyzers.summaries import run_rows
from tracer.core.errors import UserError
from tracer.core.runfolder import list_runs
from viewer.loader import Task, deliver

PICKED = ("framework", "model", "dataset", "device", "batch", "status", "img/s")
"""The columns of `tracer runs` the browser shows (`analyzers.summaries.run_rows`; img/s: the steady state's)."""
PICK = [run_rows.RUNS_HEADERS.index(c) for c in PICKED]
# Beside steady images/s, the steady state's figures (analyzers.figures.basis); `tracer show` has the whole run's.
FIGURES = (("data wait % steady", "data_wait_pct", ".0f"), ("GPU util % steady", "gpu_util_pct_mean", ".0f"),
           ("J/epoch steady", "energy_j_per_epoch", ".0f"))  # fmt: skip
COLUMNS = (*PICKED, *(name for name, _, _ in FIGURES), "id")
STATUS = COLUMNS.index("status")


def browse(out_dir: Path) -> list[list[str]]:
    """One row per run folder, as `tracer runs` builds it (`analyzers.summaries.run_rows`), then the folder's path;
    an unreadable one says why in its status column, a damaged file is named there."""
    rows = []
    for folder in list_runs(out_dir):
        run = Run.open(folder)
        try:
            cells = list(run_rows.run_row(run))
            figures = [_cell(getattr(summarise(run).steady, name), spec) for _, name, spec in FIGURES]
        except (UserError, OSError, ValueError, KeyError, TypeError) as e:
            cells = list(run_rows.damaged_row(run.run_id, f"unreadable: {e}"))
            figures = ["" for _ in FIGURES]
        row = [cells[i] for i in PICK] + figures + [cells[run_rows.RUNS_HEADERS.index("id")]]
        run.release()  # one run's tables at a time
        if run.problems:
            row[STATUS] += f", damaged: {', '.join(Path(p.file).name for p in run.problems)}"
        rows.append([*row, str(run.path)])
    return rows


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


class RunBrowser(QtWidgets.QWidget):
    open_runs = QtCore.Signal(list)
    _rows_ready = QtCore.Signal(list)

    def __init__(self, out_dir: Path, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.out_dir = out_dir
        self.model = QtGui.QStandardItemModel(0, len(COLUMNS), self)
        self.model.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = QtCore.QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(QtCore.Qt.CaseSensitivity.CaseInsensitive)
        self.filter = QtWidgets.QLineEdit()
        self.filter.setPlaceholderText("filter: framework, model, status ... (any column)")
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QtWidgets.QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.doubleClicked.connect(lambda _: self._open_selected())
        self.where = QtWidgets.QLabel()
        open_button = QtWidgets.QPushButton("Open selected")
        open_button.clicked.connect(self._open_selected)
        refresh = QtWidgets.QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.filter, 1)
        top.addWidget(refresh)
        top.addWidget(open_button)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.where)
        self._rows_ready.connect(self._fill)
        self.loading = False

    def refresh(self) -> None:
        self.loading = True
        self.where.setText(f"reading {self.out_dir} ...")
        out_dir = self.out_dir
        QtCore.QThreadPool.globalInstance().start(
            Task(
                lambda: browse(out_dir),
                lambda rows: deliver(self._rows_ready, rows),
                lambda e: [["", "", "", "", "", f"cannot list: {e}", "", "", ""]],
            )
        )

    def _fill(self, rows: list[list[str]]) -> None:
        self.model.removeRows(0, self.model.rowCount())
        for row in rows:
            items = [QtGui.QStandardItem(v) for v in row[: len(COLUMNS)]]
            items[0].setData(row[-1], QtCore.Qt.ItemDataRole.UserRole)
            self.model.appendRow(items)
        self.table.resizeColumnsToContents()
        self.where.setText(f"{len(rows)} runs in {self.out_dir.resolve()}")
        self.loading = False

    def visible_rows(self) -> int:
        return int(self.proxy.rowCount())

    def _open_selected(self) -> None:
        rows = {index.row() for index in self.table.selectionModel().selectedRows()}
        paths = [Path(self.proxy.index(r, 0).data(QtCore.Qt.ItemDataRole.UserRole)) for r in sorted(rows)]
        if paths:
            self.open_runs.emit(paths)
