"""A long traced run opened from its stored view (`analyzers.timeline.view_store`): the H100 nsys run laid end to
end (three copies, about 400 k events, its view stored as the ingest stores it). The window draws its
lanes from the memory-mapped arrays and the raster pyramid: the whole run's GPU rows at full view, each
kernel when zoomed in, a launch and its kernel linked on hover, and the CUDA tab has every epoch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtWidgets

from analyzers.timeline import view_store
from analyzers.timeline.lane_index import GPU, THREADS
from tests.analyzers.run_replica import replicate_run
from tests.viewer.test_gpu_rows import _move_mouse, _zoom
from tracer.core.runfolder import RunFolder
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]


@pytest.fixture(scope="module")
def stored_replica(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    source = real_fixtures / "gpu-h100" / "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"
    folder = RunFolder(replicate_run(tmp_path_factory.mktemp("replica"), 300_000, source))
    assert view_store.store_if_big(folder) == folder.path / view_store.VIEW_DIR
    return folder


def test_the_window_draws_a_stored_view(open_window: Opener, stored_replica: RunFolder, qtbot: object) -> None:
    window = open_window([stored_replica.path])
    (run,) = window.runs
    gpu, calls, links = run.lanes.gpu, run.lanes.api_calls, run.lanes.links
    assert gpu is not None and calls is not None and links is not None
    assert isinstance(gpu.start_ns, np.memmap) and run.indexes[THREADS].pyramid  # read from the store
    panel = window.threads
    # one run of 78 thread lanes and 8 GPU rows: the panel grows (the window scrolls) so every lane keeps its
    # label, once the layout has settled (on a busy machine that takes more than one pass of the event loop)
    qtbot.waitUntil(lambda: len(panel.shown_ticks) == len(panel.all_ticks) > 80, timeout=30_000)  # type: ignore[attr-defined]
    rows = panel.gpu_rows[run.run_id]
    full = panel.full_x_range()
    assert full is not None
    panel.plot.setXRange(*full, padding=0)
    QtWidgets.QApplication.processEvents()
    panel.current()
    image = rows.image.image
    assert image is not None
    kernel_lanes = len(gpu.lane_names) - gpu.nvtx_lanes
    painted = image[:, :, 3].reshape(len(gpu.lane_names), -1, image.shape[1]).max(axis=1) > 0
    for lane in range(kernel_lanes):  # every stream shows work across all three copies of the run
        third = painted.shape[1] // 3
        assert all(painted[len(gpu.lane_names) - 1 - lane, k * third : (k + 1) * third].any() for k in range(3))
    # zoomed into the last copy: one kernel, its launch on the hover, both from the memory-mapped arrays
    linked = np.flatnonzero(links.call_of_item >= 0)
    item = int(linked[-len(linked) // 6])
    anchor = run.anchor_ns(window.align)
    t = (int(gpu.start_ns[item]) - anchor) / 1e9
    lane_y = -(rows.top + int(gpu.lane[item])) - 0.5
    _zoom(panel, t - 0.002, t + 0.002, lane_y)
    _move_mouse(panel, t + 1e-7, lane_y)
    hover = panel.hover
    assert hover is not None and hover.item == item and hover.call == int(links.call_of_item[item])
    assert calls.name(hover.call) in hover.text
    window.tabs.setCurrentWidget(window.cuda)
    QtWidgets.QApplication.processEvents()
    phases = [window.cuda.phase.itemText(i) for i in range(window.cuda.phase.count())]
    assert {"whole", "steady", "epoch 1", "epoch 6"} <= set(phases)
    assert window.cuda.bar_split(run.run_id)  # the whole run's split is drawn
    assert GPU in run.indexes
