"""The Diagnosis tab: every loaded run's verdicts (fired first, by severity), its number and the knob
to try. The rules are the analyzers' (`analyzers.diagnosis`); they run off the GUI thread."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6 import QtCore, QtGui, QtWidgets

from analyzers.diagnosis import Verdict, diagnose, ranked
from analyzers.run.run import Run
from viewer.data import RunData
from viewer.style import run_colour

WAITING = "diagnosis waits for the window's first paint"
DIAGNOSING = "diagnosing…"


class _Signals(QtCore.QObject):
    done = QtCore.Signal(str, object)  # run path, list[Verdict] or an error text


class _Diagnose(QtCore.QRunnable):
    """The rules over the run the viewer loaded: what the viewer computed of it (phases, the CUDA API split,
    the samples) is reused, not read again."""

    def __init__(self, run: Run, signals: _Signals) -> None:
        super().__init__()
        self.target, self.signals = run, signals

    def run(self) -> None:
        try:
            result: object = ranked(diagnose(self.target))
        except Exception as e:  # noqa: BLE001 - one run's broken tables must not break the tab
            result = f"{type(e).__name__}: {e}"
        try:
            self.signals.done.emit(str(self.target.path), result)
        except RuntimeError:  # the window closed while this ran: nobody is left to tell
            pass


class DiagnosisPanel(QtWidgets.QTableWidget):
    HEADERS = ("run", "verdict", "state", "finding", "number", "knob to try")

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(0, len(self.HEADERS), parent)
        self.setHorizontalHeaderLabels(list(self.HEADERS))
        for column in (3, 5):  # finding and knob share the width left
            self.horizontalHeader().setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setWordWrap(True)
        self._signals = _Signals(self)
        self._signals.done.connect(self._on_done)
        self._runs: list[RunData] = []
        self._results: dict[str, object] = {}

    def set_runs(self, runs: Sequence[RunData], start: bool = True) -> None:
        """Shows `runs`; the rules of a run not diagnosed yet start now, or at `start()` (the window holds
        them back until it has painted what it opened: `viewer.after_paint`)."""
        self._runs = list(runs)
        for run in self._runs:
            self._results.setdefault(str(run.path), WAITING)
        self._fill()
        if start:
            self.start()

    def start(self) -> None:
        """Starts the rules of every shown run that waits for them, off the GUI thread."""
        for run in self._runs:
            key = str(run.path)
            if self._results.get(key) == WAITING:
                self._results[key] = DIAGNOSING
                held = run.run if run.run is not None else Run.open(run.path)  # a failed load holds none
                QtCore.QThreadPool.globalInstance().start(_Diagnose(held, self._signals))
        self._fill()

    def _on_done(self, key: str, result: object) -> None:
        self._results[key] = result
        self._fill()

    def rows(self) -> list[tuple[int, str, str, str, str, str, str, bool]]:
        """(run index, run, verdict, state, finding, number, knob, fired) per shown row."""
        out = []
        for index, run in enumerate(self._runs):
            result = self._results.get(str(run.path))
            if not isinstance(result, list):
                out.append((index, run.label, "", "", str(result), "", "", False))
                continue
            for v in result:
                assert isinstance(v, Verdict)
                if not v.measured:
                    continue
                number = "" if v.value is None else f"{v.value:.3g} {v.unit}"
                out.append((index, run.label, v.title, v.state, v.finding, number, v.knob if v.fired else "", v.fired))
        return out

    def _fill(self) -> None:
        rows = self.rows()
        self.setRowCount(len(rows))
        for i, (index, *values, fired) in enumerate(rows):
            for j, value in enumerate(values):
                item = QtWidgets.QTableWidgetItem(str(value))
                if j == 0:
                    item.setForeground(QtGui.QColor(run_colour(self._runs, index)))
                elif not fired:
                    item.setForeground(QtGui.QColor("#777777"))
                if fired and j == 1:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.setItem(i, j, item)
        self.resizeRowsToContents()
