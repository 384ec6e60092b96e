"""PySide6 + pyqtgraph desktop viewer over run folders."""
