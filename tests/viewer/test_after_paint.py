"""Background work the viewer starts (the Diagnosis rules, the run browser) waits until the window has
painted what it opened (`viewer.after_paint`), and starts without a paint when none comes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtGui, QtWidgets

from tracer.core.runfolder import RunFolder
from viewer.after_paint import AfterPaint
from viewer.panels.diagnosis import DIAGNOSING, WAITING


class _Painted(QtWidgets.QWidget):
    def __init__(self, said: list[str]) -> None:
        super().__init__()
        self.said = said

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt's name
        self.said.append("paint")


def test_queued_work_runs_once_after_the_next_paint(qtbot: object) -> None:
    said: list[str] = []
    widget = _Painted(said)
    qtbot.addWidget(widget)  # type: ignore[attr-defined]
    after = AfterPaint(widget)
    after.call(lambda: said.append("first"))
    after.call(lambda: said.append("second"))
    QtWidgets.QApplication.processEvents()
    assert said == [] and after.pending == 2  # nothing painted yet: nothing started
    widget.resize(200, 100)
    widget.show()
    qtbot.waitUntil(lambda: "second" in said, timeout=5_000)  # type: ignore[attr-defined]
    assert said[0] == "paint" and said.index("first") < said.index("second") and after.pending == 0
    widget.repaint()
    QtWidgets.QApplication.processEvents()
    assert said.count("first") == 1  # once each


def test_queued_work_starts_when_no_paint_comes(qtbot: object) -> None:
    said: list[str] = []
    widget = _Painted(said)  # never shown
    qtbot.addWidget(widget)  # type: ignore[attr-defined]
    after = AfterPaint(widget)
    after._timer.setInterval(50)
    after.call(lambda: said.append("work"))
    qtbot.waitUntil(lambda: said == ["work"], timeout=5_000)  # type: ignore[attr-defined]


def test_the_diagnosis_starts_after_the_window_painted_its_runs(
    open_window: Callable[..., object], qtbot: object, tiny_pytorch_run: RunFolder
) -> None:
    window = open_window([])
    window.hide()  # type: ignore[attr-defined]  # no paint until it shows again
    window.add_runs([tiny_pytorch_run.path])  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: len(window.runs) == 1 and window.after_paint.pending > 0, timeout=60_000)  # type: ignore[attr-defined]
    assert [r[4] for r in window.diagnosis.rows()] == [WAITING]  # type: ignore[attr-defined]
    window.show()  # type: ignore[attr-defined]
    done = (WAITING, DIAGNOSING)
    qtbot.waitUntil(lambda: all(r[4] not in done for r in window.diagnosis.rows()), timeout=60_000)  # type: ignore[attr-defined]
    assert len(window.diagnosis.rows()) > 1  # type: ignore[attr-defined]  # one row per verdict
    QtCore.QThreadPool.globalInstance().waitForDone()
