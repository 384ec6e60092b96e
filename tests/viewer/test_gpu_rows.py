"""GPU and NVTX rows under a traced run's threads, and the launch-to-kernel link on hover, on the real nsys
trace of ResNet-18 on an H100 (imported); the CUDA tab with three traced runs (legend off the bars, kernel
names elided in the middle, the whole name in a tooltip)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtTest import QTest

from analyzers.trace.correlation import launch_links
from analyzers.trace.tables import CUDA_API, KERNELS, MEMCPY, NVTX
from tests.viewer.conftest import import_trace
from tracer.core.runfolder import RunFolder
from viewer.panels.threads import ThreadPanel
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]
MOVE_PAUSE_MS = 30


def _streams(folder: RunFolder) -> set[str]:
    names = set()
    for table in (KERNELS, MEMCPY):
        for r in pq.read_table(folder.table_path(table), columns=["device", "stream"]).to_pylist():
            names.add(f"GPU {r['device']} stream {r['stream']}")
    return names


def test_gpu_and_nvtx_rows_hold_every_operation(open_window: Opener, nsys_run: RunFolder) -> None:
    window = open_window([nsys_run.path])
    (run,) = window.runs
    gpu = run.lanes.gpu
    assert gpu is not None
    assert set(gpu.lane_names[: len(gpu.lane_names) - gpu.nvtx_lanes]) == _streams(nsys_run)
    assert gpu.lane_names[-gpu.nvtx_lanes :] == ["NVTX"]  # the six step ranges do not nest
    rows = sum(pq.read_metadata(nsys_run.table_path(t)).num_rows for t in (KERNELS, MEMCPY, NVTX))
    assert len(gpu.start_ns) == rows
    nvtx = pq.read_table(nsys_run.table_path(NVTX)).column("name").to_pylist()
    assert sorted(gpu.label(i) for i in np.flatnonzero(gpu.lane == len(gpu.lane_names) - 1)) == sorted(nvtx)
    # drawn: the first step's range is painted on the NVTX row, its name written on it
    panel = window.threads
    anchor = run.anchor_ns(window.align)
    step = int(np.flatnonzero(gpu.lane == len(gpu.lane_names) - 1)[0])
    s0, s1 = ((int(gpu.start_ns[step]) - anchor) / 1e9, (int(gpu.end_ns[step]) - anchor) / 1e9)
    panel.plot.setXRange(s0 - 0.1 * (s1 - s0), s1 + 0.1 * (s1 - s0), padding=0)
    QtWidgets.QApplication.processEvents()
    image = panel.current().gpu_rows[run.run_id].image.image
    assert image is not None and (image[1:4, :, 3] > 0).any()  # the bottom lane (NVTX) has opaque pixels
    labels = [item.textItem.toPlainText() for item in panel.nvtx_labels if item.isVisible()]
    assert gpu.label(step) in labels


def _point(panel: ThreadPanel, x: float, y: float) -> QtCore.QPoint:
    """Where plot point (x, y) is on the panel's viewport, in pixels."""
    scene = panel.plot.getViewBox().mapViewToScene(QtCore.QPointF(x, y))
    return panel.mapFromScene(scene)


def _settled(panel: ThreadPanel) -> None:
    """Waits until the plot's place on the screen stops changing: the window's layout settles after it is
    shown (the panel's plot went from 277 to 87 px tall within 30 ms), and a point computed before that
    lands on another row, which in the whole suite made the hover pick an NVTX range, not the kernel."""
    view = panel.plot.getViewBox()
    last = None
    for _ in range(100):  # 5 s at most
        QtWidgets.QApplication.processEvents()
        now = (view.sceneBoundingRect(), panel.viewport().size(), view.viewRange())
        if now == last:
            return
        last = now
        QTest.qWait(50)


def _move_mouse(panel: ThreadPanel, x: float, y: float) -> None:
    """A real mouse move to plot point (x, y), after a pause (pyqtgraph drops moves that come faster than its
    rate limit) and once the layout settled, the point mapped to pixels just before the move."""
    QTest.qWait(MOVE_PAUSE_MS)
    _settled(panel)
    at = _point(panel, x, y)
    event = QtGui.QMouseEvent(
        QtCore.QEvent.Type.MouseMove,
        QtCore.QPointF(at),
        QtCore.QPointF(panel.viewport().mapToGlobal(at)),
        QtCore.Qt.MouseButton.NoButton,
        QtCore.Qt.MouseButton.NoButton,
        QtCore.Qt.KeyboardModifier.NoModifier,
    )
    QtWidgets.QApplication.sendEvent(panel.viewport(), event)
    QtWidgets.QApplication.processEvents()


def _zoom(panel: ThreadPanel, x0: float, x1: float, y: float) -> None:
    """A few ms across and three rows high around row `y`, so the row under the mouse is tens of pixels tall
    whatever size the window got: with every row of the run in view a row was a pixel or two, and in the
    whole suite the mouse landed on the NVTX row below the kernel's."""
    panel.plot.setXRange(x0, x1, padding=0)
    panel.plot.setYRange(y - 1.5, y + 1.5, padding=0)
    _settled(panel)
    view = panel.plot.getViewBox()
    assert view.height() / 3 >= 10, view.height()  # each row at least 10 px tall


def test_hovering_a_kernel_or_its_launch_shows_both(open_window: Opener, nsys_run: RunFolder) -> None:
    window = open_window([nsys_run.path])
    (run,) = window.runs
    gpu, calls, panel = run.lanes.gpu, run.lanes.api_calls, window.threads
    assert gpu is not None and calls is not None and run.lanes.links is not None
    links = launch_links(nsys_run, KERNELS)
    api = pq.read_table(nsys_run.table_path(CUDA_API), columns=["name", "correlation_id", "start_ns"]).to_pylist()
    kernels = pq.read_table(nsys_run.table_path(KERNELS), columns=["name", "start_ns", "correlation_id"]).to_pylist()
    k = len(links) // 2  # a kernel in the middle of training, and the call that launched it
    kernel, launch = kernels[int(links.gpu_row[k])], api[int(links.api_row[k])]
    assert kernel["correlation_id"] == launch["correlation_id"]
    anchor = run.anchor_ns(window.align)
    item = int(np.flatnonzero(gpu.start_ns == kernel["start_ns"])[0])
    rows = panel.gpu_rows[run.run_id]
    t = (kernel["start_ns"] - anchor) / 1e9
    lane_y = -(rows.top + int(gpu.lane[item])) - 0.5
    _zoom(panel, t - 0.002, t + 0.002, lane_y)  # a few ms: each kernel some pixels wide
    _move_mouse(panel, t + 1e-7, lane_y)
    hover = panel.hover
    assert hover is not None and hover.item == item
    assert hover.call is not None and calls.name(hover.call) == launch["name"]
    assert launch["name"] in hover.text and kernel["name"][:40] in hover.text
    xs, _ = panel.link.getData()
    assert xs is not None and np.isfinite(xs).sum() == 12  # two outlines and the line between them
    # and from the launch side: the call on its thread names the same kernel
    c = (launch["start_ns"] - anchor) / 1e9
    call_y = -(panel.lanes[run.run_id].top + int(calls.lane[hover.call])) - 0.5
    call = hover.call
    _zoom(panel, c - 0.0005, c + 0.0035, call_y)
    _move_mouse(panel, c + 1e-7, call_y)
    assert panel.hover is not None and panel.hover.call == call and panel.hover.item == item
    # away from everything: no hover, no link
    blank_y = -(rows.top - 1) - 0.5  # the blank row between threads and GPU rows
    _zoom(panel, c - 0.0005, c + 0.0035, blank_y)
    _move_mouse(panel, c, blank_y)
    assert panel.hover is None


@pytest.fixture(scope="module")
def three_traced_runs(nsys_run: RunFolder, real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    kineto = [
        real_fixtures / "kineto-h100" / "resnet50_bs100_train_torch2.11.json.gz",
        real_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz",
    ]
    return [nsys_run.path, *(import_trace(p, tmp_path_factory.mktemp("kineto")).path for p in kineto)]


def test_cuda_tab_with_three_runs_keeps_legend_off_the_bars(open_window: Opener, three_traced_runs: list[Path]) -> None:
    window = open_window(three_traced_runs)
    window.tabs.setCurrentWidget(window.cuda)
    QtWidgets.QApplication.processEvents()
    cuda = window.cuda
    assert len(cuda.bar_items) == 3
    legend = cuda.legend.sceneBoundingRect()
    assert legend.height() > 0
    for item in cuda.bar_items.values():
        assert not legend.intersects(item.sceneBoundingRect())  # the top bar included
    view = cuda.bar_plot.getViewBox().sceneBoundingRect()
    assert not legend.intersects(view)


def test_kernel_names_are_elided_in_the_middle_with_the_whole_name_as_tooltip(
    open_window: Opener, three_traced_runs: list[Path]
) -> None:
    window = open_window(three_traced_runs)
    window.tabs.setCurrentWidget(window.cuda)
    QtWidgets.QApplication.processEvents()
    table = window.cuda.kernels
    assert table.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    width = table.columnWidth(1)
    metrics = table.fontMetrics()
    labels = {table.item(i, 0).text() for i in range(table.rowCount())}
    assert len(labels) == 3
    for i in range(table.rowCount()):
        name = table.item(i, 1).text()
        assert table.item(i, 1).toolTip() == name
        shown = metrics.elidedText(name, QtCore.Qt.TextElideMode.ElideMiddle, width - 8)
        if shown != name:  # cut in the middle: the start (what it is) and the end (its arguments) stay
            head, tail = shown.split("…")
            assert name.startswith(head) and name.endswith(tail) and len(head) > 3
    assert width >= 250, [table.columnWidth(i) for i in range(6)]
