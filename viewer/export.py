"""Export of any panel or the whole window: PNG by grabbing the widget, SVG by painting it into
a QSvgGenerator (vector text and lines for the pyqtgraph plots)."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

from tracer.core.output import replacing

FORMATS = ("png", "svg")


def export_widget(widget: QtWidgets.QWidget, path: Path, what: str = "--screenshot") -> Path:
    """Writes `widget` as it is on screen (or would be, offscreen) to `path`; the suffix picks the format."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(f"{path}: export as .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path, what) as tmp:  # Qt writes in place: render to a new file, then rename
        if suffix == "png":
            if not widget.grab().save(str(tmp), "PNG"):
                raise OSError(f"could not write {path}")
        else:
            _svg(widget, tmp)
    return path


def _svg(widget: QtWidgets.QWidget, path: Path) -> None:
    generator = QtSvg.QSvgGenerator()
    generator.setFileName(str(path))
    size = widget.size()
    generator.setSize(size)
    generator.setViewBox(QtCore.QRect(QtCore.QPoint(0, 0), size))
    generator.setTitle(widget.windowTitle() or "dl-tracer viewer")
    painter = QtGui.QPainter(generator)
    try:
        QtWidgets.QWidget.render(widget, painter, QtCore.QPoint())  # QGraphicsView overrides render()
    finally:
        painter.end()
