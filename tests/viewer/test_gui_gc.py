"""`viewer.gui_gc`: once a window is open, Python's cyclic garbage is collected from the event loop's timer
only, never at whatever allocation crosses the threshold (one such collection, inside Qt's disconnect, freed
a QMenu whose destructor waited on the mutex the disconnect held: a hang in CI)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from PySide6 import QtCore


class Cyclic(QtCore.QObject):
    """A Qt object that only the cyclic collector can free."""

    def __init__(self) -> None:
        super().__init__()
        self.me = self


def test_a_window_turns_automatic_collection_off_and_the_event_loop_collects(qtbot: Any) -> None:
    from viewer.window import MainWindow

    gc.enable()  # as in a process that has not opened a window (this folder's tests start with it off)
    window = MainWindow()
    qtbot.addWidget(window)
    assert not gc.isenabled()
    garbage = Cyclic()
    gone = weakref.ref(garbage)
    del garbage
    young = [[] for _ in range(5 * gc.get_threshold()[0])]  # past the threshold: a collection is due
    assert gone() is not None  # due, but not run at an allocation
    qtbot.waitUntil(lambda: gone() is None, timeout=30_000)  # run by the event loop's timer
    assert len(young) and not gc.isenabled()
