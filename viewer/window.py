"""The main window: time panels and thread lanes on one linked x axis above, tabs below
(epochs, run facts, CUDA API, run browser); runs come from the command line, the browser,
the toolbar or a folder dropped on the window."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from tracer.core.errors import UserError
from viewer.after_paint import AfterPaint
from viewer.browser import RunBrowser
from viewer.cursor import TimeCursor
from viewer.data import RunData, name_runs
from viewer.export import export_widget
from viewer.gui_gc import collect_on_the_event_loop
from viewer.loader import RunLoader
from viewer.panels.cuda import CudaPanel
from viewer.panels.diagnosis import DiagnosisPanel
from viewer.panels.tables import EpochTable, FactsTable
from viewer.panels.threads import ThreadPanel
from viewer.panels.timeline import TimelinePanel
from viewer.style import use_light_theme

ALIGN_CHOICES = (("x: seconds since run start", "start"), ("x: seconds since first epoch", "epoch"))
LAYOUT_CHOICES = (("one colour per run", "overlay"), ("one column per run", "columns"))
REBUILD_DELAY_MS = 1000  # runs still loading after this show the ones already loaded


class MainWindow(QtWidgets.QMainWindow):
    def __init__(self, out_dir: Path = Path("runs")) -> None:
        use_light_theme()
        collect_on_the_event_loop()
        super().__init__()
        self.setWindowTitle("dl-tracer viewer")
        self.setAcceptDrops(True)
        self.runs: list[RunData] = []
        self._order: list[Path] = []  # runs are shown in the order they were asked for, not loaded
        self.time_cursor = TimeCursor(self)
        self.loader = RunLoader(self)
        self.loader.loaded.connect(self._on_loaded)
        self.loader.progress.connect(self._on_progress)
        self.loader.idle.connect(self.rebuild)
        self._rebuild_timer = QtCore.QTimer(self, singleShot=True, interval=REBUILD_DELAY_MS)
        self._rebuild_timer.timeout.connect(self.rebuild)

        self.banner = QtWidgets.QLabel()
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setStyleSheet("background:#fff3cd; color:#5c4400; padding:4px; border:1px solid #e0c36c;")
        self.banner.hide()
        self.timeline = TimelinePanel(self.time_cursor)
        self.threads = ThreadPanel(self.time_cursor)
        self.epochs = EpochTable()
        self.facts = FactsTable()
        self.cuda = CudaPanel()
        self.diagnosis = DiagnosisPanel()
        self.browser = RunBrowser(out_dir)
        self.browser.open_runs.connect(self.add_runs)
        self.after_paint = AfterPaint(self.timeline.viewport())  # background work waits for the first paint
        self.after_paint.call(self._fill_browser)  # filled at open

        self.tabs = QtWidgets.QTabWidget()
        self.tabs.addTab(self.epochs, "Epochs")
        self.tabs.addTab(self.facts, "Run facts")
        self.tabs.addTab(self.cuda, "CUDA API")
        self.tabs.addTab(self.diagnosis, "Diagnosis")
        self.tabs.addTab(self.browser, "Run browser")
        # The time panels and lanes keep a readable height (a plot's ticks never overprint, every lane gets a
        # line): where the window is shorter, they scroll rather than squeeze.
        self.panels = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.panels.setChildrenCollapsible(False)
        self.panels.addWidget(self.timeline)
        self.panels.addWidget(self.threads)
        self.panels.setSizes([560, 380])
        self.panel_scroll = QtWidgets.QScrollArea()
        self.panel_scroll.setWidgetResizable(True)
        self.panel_scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.panel_scroll.setWidget(self.panels)
        self.split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.split.addWidget(self.panel_scroll)
        self.split.addWidget(self.tabs)
        self.split.setSizes([940, 160])
        self.split.setStretchFactor(0, 1)  # a taller window gives the panels the room, not the tabs
        self.split.setStretchFactor(1, 0)
        central = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.banner)
        layout.addWidget(self.split, 1)
        self.setCentralWidget(central)

        self.progress = QtWidgets.QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setRange(0, 100)
        self.progress.hide()
        self.statusBar().addPermanentWidget(self.progress)
        self._build_toolbar()
        self.resize(1500, 1000)

    def _build_toolbar(self) -> None:
        bar = self.addToolBar("main")
        bar.setMovable(False)
        bar.addAction("Add run…", self._ask_folder)
        bar.addAction("Run browser", self.show_browser)
        self.align_box = QtWidgets.QComboBox()
        for text, key in ALIGN_CHOICES:
            self.align_box.addItem(text, key)
        self.align_box.currentIndexChanged.connect(lambda _: self.rebuild())
        self.layout_box = QtWidgets.QComboBox()
        for text, key in LAYOUT_CHOICES:
            self.layout_box.addItem(text, key)
        self.layout_box.currentIndexChanged.connect(lambda _: self.rebuild())
        bar.addSeparator()
        bar.addWidget(self.align_box)
        bar.addWidget(self.layout_box)
        bar.addAction("Reset zoom", self.reset_zoom)
        bar.addSeparator()
        export = QtWidgets.QToolButton()
        export.setText("Export")
        export.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QtWidgets.QMenu(export)
        targets = (
            ("window", self),
            ("time panels", self.timeline),
            ("thread lanes", self.threads),
            ("CUDA API panel", self.cuda),
            ("current tab", None),
        )
        for name, widget in targets:
            for fmt in ("PNG", "SVG"):
                menu.addAction(f"{name} as {fmt}…", self._exporter(widget, fmt, name))
        export.setMenu(menu)
        bar.addWidget(export)

    @property
    def align(self) -> str:
        return str(self.align_box.currentData())

    @property
    def layout_mode(self) -> str:
        return str(self.layout_box.currentData())

    def set_layout_mode(self, mode: str) -> None:
        self.layout_box.setCurrentIndex([k for _, k in LAYOUT_CHOICES].index(mode))

    def set_align(self, align: str) -> None:
        self.align_box.setCurrentIndex([k for _, k in ALIGN_CHOICES].index(align))

    def add_runs(self, paths: Iterable[Path]) -> None:
        for path in paths:
            resolved = Path(path).resolve()
            if resolved in self._order:
                continue
            self._order.append(resolved)
            self.loader.load(Path(path))

    def _fill_browser(self) -> None:
        """The browser summarises every run of the folder: it waits until the runs being opened are loaded,
        so that they do not share the cores with it (with four 1 M-sample runs beside them it doubled the open)."""
        if self.loader.pending:
            self.loader.idle.connect(
                lambda: self.after_paint.call(self._fill_browser), QtCore.Qt.ConnectionType.SingleShotConnection
            )
            return
        self.browser.refresh()

    def _on_progress(self, fraction: float, text: str) -> None:
        busy = self.loader.pending > 0
        self.progress.setVisible(busy)
        self.progress.setValue(int(100 * fraction))
        self.statusBar().showMessage(text if busy else f"{len(self.runs)} run(s) loaded")

    def _on_loaded(self, data: RunData) -> None:
        self.runs.append(data)
        if self.loader.pending:
            self._rebuild_timer.start()

    def rebuild(self) -> None:
        """Every panel from `self.runs`; called once per batch of loads, not per run."""
        self._rebuild_timer.stop()
        self.runs.sort(key=lambda r: self._order.index(r.path.resolve()) if r.path.resolve() in self._order else 0)
        runs = self.runs
        name_runs(runs)
        self.timeline.set_runs(runs, self.align, self.layout_mode)
        self.threads.set_runs(runs, self.align, self.timeline.link_x if self.timeline.master else None)
        self.epochs.set_runs(runs)
        self.facts.set_runs(runs)
        self.cuda.set_runs(runs)
        self.diagnosis.set_runs(runs, start=False)
        self.after_paint.call(self.diagnosis.start)
        self._show_messages()
        self.reset_zoom()  # every run whole, traced GPU work included (the curves alone may end sooner)
        if self.time_cursor.x is None:
            self.place_cursor()

    def _show_messages(self) -> None:
        lines = [f"<b>{r.label}</b>: {'; '.join(r.messages)}" for r in self.runs if r.messages]
        if self.threads.message:
            lines.append(self.threads.message)
        gpu = any(r.series.get("gpu_util_pct") for r in self.runs)
        if self.runs and not gpu:
            lines.append("no GPU was sampled in these runs: GPU panels are hidden")
        self.banner.setText("<br>".join(lines))
        self.banner.setVisible(bool(lines))

    def messages(self) -> str:
        return self.banner.text()

    def place_cursor(self) -> None:
        """Puts the cursor half-way through the time every run spends in its first epoch (on the shared
        axis), so every title shows a value; where those epochs do not overlap, in the first run's."""
        firsts = [
            (
                (r.epochs[0].start_ns - r.anchor_ns(self.align)) / 1e9,
                (r.epochs[0].end_ns - r.anchor_ns(self.align)) / 1e9,
            )
            for r in self.runs
            if r.epochs
        ]
        if not firsts:
            return
        start, end = max(a for a, _ in firsts), min(b for _, b in firsts)
        if not end > start:
            start, end = firsts[0]
        self.time_cursor.set((start + end) / 2)

    def reset_zoom(self) -> None:
        """Every run whole: the time span of the curves and the thread lanes together. The lanes' images
        cover only the visible range (they are redrawn per view), so their bounds are asked, not auto-ranged."""
        spans = [b for b in (self.threads.full_x_range(), self.timeline.full_x_range()) if b is not None]
        self.timeline.reset_y()
        if not spans:
            return
        x0, x1 = min(s[0] for s in spans), max(s[1] for s in spans)
        for plot in [*self.timeline.plots.values(), self.threads.plot]:
            plot.setXRange(x0, x1, padding=0.01)

    def show_browser(self) -> None:
        self.tabs.setCurrentWidget(self.browser)
        self.browser.refresh()

    def _ask_folder(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Add a run folder", str(self.browser.out_dir))
        if path:
            self.add_runs([Path(path)])

    def _exporter(self, widget: QtWidgets.QWidget | None, fmt: str, name: str) -> Callable[[], None]:
        return lambda: self._ask_export(widget, fmt, name)

    def _ask_export(self, widget: QtWidgets.QWidget | None, fmt: str, name: str) -> None:
        target = widget or self.tabs.currentWidget()
        suffix = fmt.lower()
        default = f"dl-tracer-{name.replace(' ', '-')}.{suffix}"
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, f"Export {name}", default, f"{fmt} (*.{suffix})")
        if not path:
            return
        try:
            out = export_widget(target, Path(path).with_suffix(f".{suffix}"), "export")
        except (OSError, ValueError, UserError) as e:
            QtWidgets.QMessageBox.warning(self, "Export failed", str(e))
            return
        self.statusBar().showMessage(f"saved {out}")

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:  # noqa: N802 - Qt's name
        if _dropped_folders(event.mimeData()):
            event.acceptProposedAction()

    def dragMoveEvent(self, event: QtGui.QDragMoveEvent) -> None:  # noqa: N802 - Qt's name
        if _dropped_folders(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:  # noqa: N802 - Qt's name
        folders = _dropped_folders(event.mimeData())
        if folders:
            self.add_runs(folders)
            event.acceptProposedAction()


def _dropped_folders(mime: QtCore.QMimeData) -> list[Path]:
    if not mime.hasUrls():
        return []
    paths = [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
    return [p for p in paths if p.is_dir()]
