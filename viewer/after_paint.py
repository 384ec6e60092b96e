"""Work the viewer starts in the background only once the window has painted what it opened.

Why: the Diagnosis rules and the run browser's summaries run in Qt's thread pool, and they hold the
interpreter's lock in turns with the GUI thread. Started with the panels, they shared it with the first
paint of what was opened (0.5-0.7 s of a 100 M-event open, measured with them held back). Queued here,
they start on the event loop's next turn after `widget` next paints, or after `WAIT_MS` when it does not
paint (a window never shown).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore

WAIT_MS = 2000


class AfterPaint(QtCore.QObject):
    """Calls queued functions, in order and once each, after `widget`'s next paint."""

    def __init__(self, widget: QtCore.QObject) -> None:
        super().__init__(widget)
        self._calls: list[Callable[[], None]] = []
        self._timer = QtCore.QTimer(self, singleShot=True, interval=WAIT_MS)
        self._timer.timeout.connect(self._run)
        widget.installEventFilter(self)

    def call(self, fn: Callable[[], None]) -> None:
        self._calls.append(fn)
        if not self._timer.isActive():
            self._timer.start()

    @property
    def pending(self) -> int:
        return len(self._calls)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QtCore.QEvent.Type.Paint and self._calls:
            QtCore.QTimer.singleShot(0, self._run)  # after this paint, not before it
        return False

    def _run(self) -> None:
        self._timer.stop()
        calls, self._calls = self._calls, []
        for fn in calls:
            fn()
