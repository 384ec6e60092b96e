"""Starting the viewer: as a window, or offscreen to save one screenshot and exit."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

SCREENSHOT_SIZE = (1600, 1150)
LOAD_TIMEOUT_MS = 300_000


def _needs_offscreen(screenshot: Path | None) -> bool:
    """A screenshot renders offscreen wherever the platform is not chosen explicitly: under `xvfb-run` (a
    DISPLAY, but maybe not the X libraries Qt's xcb plugin loads, which made Qt abort) as without X."""
    return screenshot is not None and not os.environ.get("QT_QPA_PLATFORM")


# Libraries Qt's xcb platform plugin loads (Qt >= 6.5) that minimal Linux installs lack: (soname stem, package)
XCB_LIBRARIES = (("xcb-cursor", "libxcb-cursor0"), ("xcb-icccm", "libxcb-icccm4"), ("xcb-keysyms", "libxcb-keysyms1"))


def x11_problem() -> str | None:
    """Why a window cannot open on this X display, in one line, before Qt gets a chance to abort; None
    when nothing is known to be wrong (or the platform is not X11)."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM", "xcb") != "xcb":
        return None
    display = os.environ.get("DISPLAY", "")
    if not display or os.environ.get("WAYLAND_DISPLAY"):
        return None
    import ctypes.util

    missing = [package for stem, package in XCB_LIBRARIES if ctypes.util.find_library(stem) is None]
    if missing:
        return (
            f"the viewer's window needs the X libraries {', '.join(missing)}: "
            f"sudo apt-get install {' '.join(missing)} (or use --screenshot FILE.png, which needs none)"
        )
    host, _, number = display.partition(":")
    local = host in ("", "unix") and number.split(".")[0].isdigit()
    if local and not Path(f"/tmp/.X11-unix/X{number.split('.')[0]}").exists():
        return f"no X server at DISPLAY={display}: start one (or unset DISPLAY and use --screenshot FILE.png)"
    return None


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
    for _ in range(4):  # a picture of the whole window: taller, where the panels would scroll
        hidden = window.panels.minimumSizeHint().height() - window.panel_scroll.viewport().height()
        if hidden <= 0:
            break
        window.resize(size[0], window.height() + hidden)
        for _ in range(3):
            app.processEvents()
    export_widget(window, screenshot)
    window.close()
    return 0
