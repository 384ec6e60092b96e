"""Work-arounds for bad binding releases, applied once when the window is made.

PySide6 6.12.0 on Python 3.11 drops one reference to `None` on every call of a Qt method that
returns nothing (QPainter.drawRect, setPen ...), and to `True`/`False` from methods returning
bool: fine on 3.12+, where None is immortal, but on 3.11
`None` is freed after some ten thousand paint calls and the interpreter aborts with
"none_dealloc: deallocating None". Measured here: -1000 per 1000 drawRect on 6.12.0, +1 on 6.11.3.
Until the pin in pyproject excludes it, the viewer gives None enough references to outlive any session.
"""

from __future__ import annotations

import ctypes
import sys

_TOP_UP = 1 << 40


# what 3.12 made immortal and a binding built for it may hand out without a reference
_IMMORTALS: tuple[object, ...] = (None, True, False, Ellipsis, NotImplemented, (), "", *range(-5, 257))


def none_refcount_leak() -> bool:
    """Whether this interpreter and PySide6 release have the leak (measured, not assumed from versions)."""
    if sys.version_info >= (3, 12):
        return False
    from PySide6 import QtCore

    timer = QtCore.QTimer()
    before = sys.getrefcount(None), sys.getrefcount(False)
    for _ in range(100):
        timer.setInterval(1)
        timer.isActive()
    after = sys.getrefcount(None), sys.getrefcount(False)
    return after[0] < before[0] - 50 or after[1] < before[1] - 50


def apply() -> bool:
    """Tops up the reference counts of the objects 3.12 made immortal where the leak is present;
    returns whether it did."""
    if sys.getrefcount(None) > _TOP_UP // 2 or not none_refcount_leak():
        return False
    for obj in _IMMORTALS:
        ctypes.c_ssize_t.from_address(id(obj)).value += _TOP_UP
    return True
