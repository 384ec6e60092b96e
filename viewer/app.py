"""Starting the viewer: as a window, or offscreen to save one screenshot and exit."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

SCREENSHOT_SIZE = (1600, 1150)
LOAD_TIMEOUT_MS = 300_000


def _needs_offscreen(screenshot: Path | None) -> bool:
    if screenshot is None or os.environ.get("QT_QPA_PLATFORM"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def has_display() -> bool:
    return bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ) or sys.platform in ("darwin", "win32")


def run_viewer(
    runs: Sequence[Path],
    out_dir: Path,
    screenshot: Path | None = None,
    size: tuple[int, int] = SCREENSHOT_SIZE,
    layout_mode: str = "overlay",
    align: str = "start",
) -> int:
    """Opens the window on `runs`; with `screenshot`, waits for them to load, saves the window, and returns."""
    if _needs_offscreen(screenshot):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6 import QtCore, QtWidgets

    from viewer.export import export_widget
    from viewer.window import MainWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    window = MainWindow(out_dir)
    window.set_layout_mode(layout_mode)
    window.set_align(align)
    window.add_runs(runs)
    if screenshot is None:
        window.show()
        if not runs:
            window.show_browser()
        return int(app.exec())
    window.resize(*size)
    window.show()
    loop = QtCore.QEventLoop()
    window.loader.idle.connect(loop.quit)
    QtCore.QTimer.singleShot(LOAD_TIMEOUT_MS, loop.quit)
    if window.loader.pending:
        loop.exec()
    for _ in range(3):
        app.processEvents()
    export_widget(window, screenshot)
    window.close()
    return 0
