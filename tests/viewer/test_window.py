"""The window on real tiny runs: the panels hold the run's data, side by side on one linked axis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6 import QtCore, QtGui

from tests.conftest import require_framework
from tracer.core import schema
from tracer.core.runfolder import RunFolder
from viewer.export import export_widget
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]


def test_panels_hold_the_runs_data(open_window: Opener, tiny_pytorch_run: RunFolder) -> None:
    window = open_window([tiny_pytorch_run.path])
    (run,) = window.runs
    samples = tiny_pytorch_run.samples("process")
    epochs = tiny_pytorch_run.epochs()
    assert samples is not None and len(epochs) == 2
    for metric in ("cpu_pct", "rss_mib", "threads"):
        assert window.timeline.sample_counts(run.run_id, metric) == [samples.num_rows]
        assert len(window.timeline.epoch_markers[run.run_id][metric]) == len(epochs)
    threads = tiny_pytorch_run.samples("threads")
    assert threads is not None
    assert window.threads.lane_count(run.run_id) == len(set(threads.column("tid").to_pylist()))
    assert window.epochs.rowCount() == len(epochs)
    facts = {
        window.facts.verticalHeaderItem(r).text(): window.facts.item(r, 0).text()
        for r in range(window.facts.rowCount())
    }
    assert facts["status"] == "ok"
    assert facts["parameters"].replace(",", "").isdigit()
    assert "no trace in this run" in window.cuda.note.text()
    assert "GPU panels are hidden" in window.messages()


def _linked_to(plot: object, master: object) -> bool:
    return plot.getViewBox().linkedView(0) is master.getViewBox()  # type: ignore[attr-defined]


@pytest.mark.parametrize("layout_mode", ["overlay", "columns"])
def test_two_runs_side_by_side_on_linked_axes(
    open_window: Opener, tiny_pytorch_run: RunFolder, second_pytorch_run: RunFolder, layout_mode: str
) -> None:
    window = open_window([tiny_pytorch_run.path, second_pytorch_run.path], layout_mode=layout_mode)
    assert [r.path for r in window.runs] == [tiny_pytorch_run.path, second_pytorch_run.path]
    master = window.timeline.master
    others = [p for p in window.timeline.plots.values() if p is not master]
    # CPU, RSS, threads, and the per-step split: data wait, compute, sync; PSS where the kernel gave it
    curves = 6 + any(r.series.get(schema.PSS_MIB) for r in window.runs)
    assert len(window.timeline.plots) == curves * (2 if layout_mode == "columns" else 1)
    if layout_mode == "overlay":  # stacked: pyqtgraph's own link; columns follow the range by value
        assert all(_linked_to(p, master) for p in others)
        assert _linked_to(window.threads.plot, master)
    master.setXRange(3.0, 7.0, padding=0)
    for plot in [*others, window.threads.plot]:
        x0, x1 = plot.viewRange()[0]
        assert x0 == pytest.approx(3.0, abs=0.05) and x1 == pytest.approx(7.0, abs=0.05)
    for run, folder in zip(window.runs, (tiny_pytorch_run, second_pytorch_run)):
        assert window.timeline.sample_counts(run.run_id, "cpu_pct") == [folder.samples("process").num_rows]
        assert len(window.timeline.epoch_markers[run.run_id]["cpu_pct"]) == len(folder.epochs())
    assert window.epochs.rowCount() == 4
    assert window.facts.columnCount() == 2


def test_tensorflow_beside_pytorch(
    open_window: Opener, make_run: Callable[..., RunFolder], tiny_pytorch_run: RunFolder
) -> None:
    require_framework("tensorflow")
    tf_run = make_run("tensorflow", "--limit", "4")
    window = open_window([tiny_pytorch_run.path, tf_run.path])
    assert {r.record.measurement.framework for r in window.runs if r.record} == {"pytorch", "tensorflow"}
    master = window.timeline.master
    assert all(_linked_to(p, master) for p in window.timeline.plots.values() if p is not master)
    tf = window.runs[1]
    assert window.timeline.sample_counts(tf.run_id, "cpu_pct") == [tf_run.samples("process").num_rows]
    assert len(window.timeline.epoch_markers[tf.run_id]["cpu_pct"]) == len(tf_run.epochs())


def test_one_cursor_for_every_panel(open_window: Opener, tiny_pytorch_run: RunFolder) -> None:
    window = open_window([tiny_pytorch_run.path])
    window.time_cursor.set(4.25)
    assert all(line.value() == 4.25 for line in window.timeline.cursor_lines)
    assert window.threads.cursor_line.value() == 4.25
    title = window.timeline.plots[("cpu_pct", 0)].titleLabel.text
    assert "at 4.25 s" in title and "pytorch alexnet" in title
    window.timeline.cursor_lines[-1].setValue(6.0)  # dragging any panel's line moves them all
    assert window.time_cursor.x == 6.0 and window.timeline.cursor_lines[0].value() == 6.0


def test_cursor_readouts_in_columns(
    open_window: Opener, tiny_pytorch_run: RunFolder, second_pytorch_run: RunFolder
) -> None:
    window = open_window([tiny_pytorch_run.path, second_pytorch_run.path], layout_mode="columns")
    window.time_cursor.set(1.25)
    for col, run in enumerate(window.runs):
        assert run.label in window.timeline.title_text("cpu_pct", col)
        for metric, spec in (("cpu_pct", ".1f"), ("rss_mib", ".0f"), ("threads", ".0f")):
            (series,) = run.series[metric]
            value = series.value_at(run.anchor_ns("start") + 1.25e9)
            assert value is not None
            title = window.timeline.title_text(metric, col)
            assert "at 1.25 s" in title and f"<b>{format(value, spec)}" in title
    assert "% RAM" in window.timeline.title_text("rss_mib", 1)


def test_failed_run_opens_with_its_cause(open_window: Opener, failed_run: RunFolder) -> None:
    window = open_window([failed_run.path])
    (run,) = window.runs
    assert run.status == "failed"
    assert "status failed" in window.messages() and "injected fault" in window.messages()
    assert window.banner.isVisibleTo(window)
    assert window.timeline.sample_counts(run.run_id, "cpu_pct") == [failed_run.samples("process").num_rows]
    assert len(window.timeline.epoch_markers[run.run_id]["cpu_pct"]) == 1
    status = next(
        window.facts.item(r, 0).text()
        for r in range(window.facts.rowCount())
        if window.facts.verticalHeaderItem(r).text() == "status"
    )
    assert status.startswith("failed") and "injected fault" in status


def test_missing_files_open_with_a_message(
    open_window: Opener, missing_files_run: RunFolder, tiny_pytorch_run: RunFolder, tmp_path: Path
) -> None:
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    window = open_window([missing_files_run.path, not_a_run, tiny_pytorch_run.path])
    text = window.messages()
    assert "no process samples" in text and "events.jsonl is missing" in text
    assert "not a run folder" in text
    assert window.timeline.sample_counts(window.runs[2].run_id, "cpu_pct")  # the good run still plots


def test_dropping_a_folder_adds_the_run(open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder) -> None:
    window = open_window([])
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(tiny_pytorch_run.path))])
    pos = QtCore.QPointF(50, 50)
    buttons, mods = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier
    enter = QtGui.QDragEnterEvent(pos.toPoint(), QtCore.Qt.DropAction.CopyAction, mime, buttons, mods)
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    window.dropEvent(QtGui.QDropEvent(pos, QtCore.Qt.DropAction.CopyAction, mime, buttons, mods))
    qtbot.waitUntil(lambda: len(window.runs) == 1 and window.loader.pending == 0, timeout=60_000)  # type: ignore[attr-defined]
    assert window.runs[0].path == tiny_pytorch_run.path


def test_run_browser_filters(
    open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder, second_pytorch_run: RunFolder, tmp_path: Path
) -> None:
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    for folder in (tiny_pytorch_run, second_pytorch_run):
        (runs_dir / folder.run_id).symlink_to(folder.path)
    window = open_window([], out_dir=runs_dir)
    window.browser.refresh()
    qtbot.waitUntil(lambda: not window.browser.loading, timeout=60_000)  # type: ignore[attr-defined]
    assert window.browser.visible_rows() == 2
    window.browser.filter.setText("mobilenet")
    assert window.browser.visible_rows() == 1
    window.browser.table.selectRow(0)
    with qtbot.waitSignal(window.browser.open_runs) as blocker:  # type: ignore[attr-defined]
        window.browser._open_selected()
    assert [p.name for p in blocker.args[0]] == [second_pytorch_run.run_id]


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_export_panels_and_window(
    open_window: Opener, tiny_pytorch_run: RunFolder, tmp_path: Path, suffix: str
) -> None:
    window = open_window([tiny_pytorch_run.path])
    for name, widget in (("window", window), ("timeline", window.timeline), ("threads", window.threads)):
        out = export_widget(widget, tmp_path / f"{name}.{suffix}")
        data = out.read_bytes()
        assert len(data) > 5_000
        assert data.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in data[:2000]


def test_overlaid_runs_label_their_epochs_in_rows_of_their_own(
    open_window: Opener, tiny_pytorch_run: RunFolder, second_pytorch_run: RunFolder
) -> None:
    """Two runs in one column: each run's epoch labels sit in a different plot (in one short plot they
    wrote over each other); every plot still draws every run's epoch lines. The left axes name only
    their unit (the titles name the metric), and no legend covers the curves."""
    window = open_window([tiny_pytorch_run.path, second_pytorch_run.path], layout_mode="overlay")
    timeline = window.timeline
    labelled = {
        run.run_id: [metric for metric, markers in timeline.epoch_markers[run.run_id].items() if markers.labels]
        for run in window.runs
    }
    assert [len(v) for v in labelled.values()] == [1, 1] and len({v[0] for v in labelled.values()}) == 2, labelled
    for markers in timeline.epoch_markers.values():
        assert all(len(m) == 2 for m in markers.values())
    for (metric, _col), plot in timeline.plots.items():
        axis = plot.getAxis("left")
        label = f"{axis.labelText} {axis.labelUnits}".strip()
        assert 0 < len(label) <= 5 and label in {"%", "MiB", "count", "s", "W"}, (metric, label)
        assert plot.legend is None
