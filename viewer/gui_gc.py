"""Python's cyclic garbage collected from the GUI thread's event loop, never at a random allocation.

Why: the collector runs wherever an allocation crosses its threshold. In CI (28 Nov 2026, tests/viewer/
test_window.py) it ran inside Qt's `QObject::disconnect` (pyqtgraph moving an item into a plot, PySide
looking up a Python override), collected a closed window's QMenu, and its `~QObject` waited for the
signal-slot mutex that the disconnect held: the window hung for good. A collection in a loader thread could
free Qt objects off the GUI thread, which Qt forbids. pyqtgraph's `GarbageCollector` turns automatic
collection off and collects from a timer, at the top of the event loop, where no Qt lock is held.
"""

from __future__ import annotations

import gc

from pyqtgraph.util.garbage_collector import GarbageCollector

COLLECT_EVERY_S = 1.0  # pyqtgraph's own interval: loader threads make little cyclic garbage in a second

_collector: GarbageCollector | None = None


def collect_on_the_event_loop() -> None:
    """From now on, collect only from the event loop's timer (idempotent; needs the QApplication)."""
    global _collector
    if _collector is None:
        _collector = GarbageCollector(interval=COLLECT_EVERY_S)
    gc.disable()  # again, where something turned it back on since
