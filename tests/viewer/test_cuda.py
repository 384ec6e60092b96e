"""The CUDA API panel and the thread lanes on a real nsys trace (ResNet-18 on an H100, imported)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analyzers.summaries.cuda_api import phase_summaries
from analyzers.summaries.kernels import kernel_summary
from analyzers.summaries.shares import OTHER, group_shares, other_label
from tracer.core.runfolder import RunFolder
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]


def test_api_split_bars_are_the_analyzers_summary(open_window: Opener, nsys_run: RunFolder) -> None:
    window = open_window([nsys_run.path])
    (run,) = window.runs
    expected = phase_summaries(nsys_run)
    phases = [window.cuda.phase.itemText(i) for i in range(window.cuda.phase.count())]
    assert phases and phases[0] == "whole"
    assert set(phases) == {name for name, rows in expected.items() if rows}
    for phase in phases:
        window.cuda.phase.setCurrentText(phase)
        names, grouped = group_shares({"run": expected[phase]})  # the analyzers' rows as they are
        split = [(other_label() if n == OTHER else n, v) for n, v in zip(names, grouped["run"]) if v > 0]
        drawn = window.cuda.bar_split(run.run_id)
        names = [name for name, _ in split]
        assert [name for name, _ in drawn] == names
        assert [pct for _, pct in drawn] == pytest.approx([pct for _, pct in split])
        assert names[-1].startswith("other") or all(r.time_pct >= 1 for r in expected[phase])
        assert all(pct >= 1 for name, pct in split if not name.startswith("other"))
    assert window.cuda.note.text() == ""


def test_kernel_top_list_is_filled(open_window: Opener, nsys_run: RunFolder) -> None:
    window = open_window([nsys_run.path])
    kernels = sorted(kernel_summary(nsys_run), key=lambda k: -k.total_ns)
    table = window.cuda.kernels
    assert table.rowCount() == min(15, len(kernels)) > 0
    assert table.item(0, 1).text() == kernels[0].short_name
    assert float(table.item(0, 3).text()) == pytest.approx(kernels[0].total_ns / 1e6, abs=0.01)


def test_zooming_in_shows_cuda_api_calls_on_their_thread(open_window: Opener, nsys_run: RunFolder) -> None:
    window = open_window([nsys_run.path])
    (run,) = window.runs
    assert run.lanes.threads is not None and run.lanes.api_calls is not None
    threads = window.threads
    assert threads.lane_count(run.run_id) == len(run.lanes.threads.lane_names)
    anchor = run.anchor_ns(window.align)
    first = (int(run.lanes.api_calls.start_ns[0]) - anchor) / 1e9
    threads.plot.setXRange(first - 100, first + 100, padding=0)  # zoomed out: lanes only
    assert threads.current().visible_calls == 0
    threads.plot.setXRange(first, first + 0.5, padding=0)
    threads.current()  # drawn for this view now, whether the panel is on screen or not
    in_view = (run.lanes.api_calls.end_ns >= anchor + first * 1e9) & (
        run.lanes.api_calls.start_ns <= anchor + (first + 0.5) * 1e9
    )
    assert threads.visible_calls == int(in_view.sum()) > 0
    lane = int(run.lanes.api_calls.lane[0])
    image = threads.lanes[run.run_id].image.image
    assert image is not None
    rows = image.shape[0]
    stripe = image[rows - 1 - lane * 5 - 2]  # the middle of the first call's lane (lanes are drawn top down)
    assert (stripe == (0, 0, 0, 255)).all(axis=1).any()
