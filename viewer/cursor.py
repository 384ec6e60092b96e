"""The one shared time cursor: every panel listens to it, any panel may move it."""

from __future__ import annotations

from PySide6 import QtCore


class TimeCursor(QtCore.QObject):
    """Position in seconds on the shared x axis (whatever its anchor); `moved` fires once per change."""

    moved = QtCore.Signal(float)

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._x: float | None = None

    @property
    def x(self) -> float | None:
        return self._x

    def set(self, x: float) -> None:
        if self._x is not None and x == self._x:
            return
        self._x = float(x)
        self.moved.emit(self._x)
