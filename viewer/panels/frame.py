"""One paint per frame: pyqtgraph's deferred work done before Qt paints a panel, not while it paints.

pyqtgraph moves a view to its new range (the view's matrix, the y auto-range) only when its scene is about to
paint, from inside the paint event; the items that move then ask for a second paint, so every pan or zoom
painted the time panels twice (profiled: 2 paint events per drag step, each repainting every curve, epoch
line and axis). `BeforePaint` filters the top-level window's update request, which Qt sends just before it
paints, and does that work there: the scene's item updates it causes are handed to the view at once, so they
join the same paint.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets


class BeforePaint(QtCore.QObject):
    """Attached to one pyqtgraph view (`pg.GraphicsView`); installs itself on the view's window when shown.
    `first` (optional) runs before the view's own range work: a panel's items brought up to date there are
    painted in the same frame."""

    def __init__(self, view: pg.GraphicsView, first: Callable[[], None] | None = None) -> None:
        super().__init__(view)
        self.view = view
        self.first = first
        self._window: QtWidgets.QWidget | None = None

    def attach(self) -> None:
        """Filters the update requests of the view's current top-level window (call from showEvent: a panel
        is reparented into the main window's splitters after it is made)."""
        window = self.view.window()
        if window is self._window:
            return
        if self._window is not None:
            self._window.removeEventFilter(self)
        window.installEventFilter(self)
        self._window = window

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QtCore.QEvent.Type.UpdateRequest:
            self.prepare()
        return False

    def prepare(self) -> None:
        """The views' range work and the scene's item updates, so that the paint that follows is the only one."""
        if self.first is not None:
            self.first()
        scene = self.view.scene()
        scene.prepareForPaint()
        QtCore.QCoreApplication.sendPostedEvents(scene, 0)
