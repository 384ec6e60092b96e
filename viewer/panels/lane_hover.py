"""Hovering the thread lanes: the launch call or GPU item under the mouse, its peer (the correlation
id's, `analyzers.trace.correlation` via `analyzers.timeline.lanes`), a tooltip naming both and the link drawn between
them. A mixin of `ThreadPanel`, which owns the rows it reads; kept apart so each module stays small."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg

from analyzers.timeline.gpu_timeline import NVTX_ACTIVITIES
from analyzers.timeline.lane_index import LaneIndex
from analyzers.timeline.lanes import GpuLanes
from viewer.data import RunData

HOVER_PX = 4  # how far from an item the mouse may be and still pick it
MIN_MARK_PX = 3  # the hover outline of a 1 µs kernel is still this wide
TOOLTIP_NAME_CHARS = 90  # kernel names are elided in the middle beyond this


@dataclass
class _RunLanes:
    """One run's lanes on the shared axis: its segment index, shifted by `offset` seconds, and its image."""

    index: LaneIndex
    offset: float
    activities: list[str]
    lanes: int
    top: int  # plot y of the run's header row
    calls: LaneIndex | None
    calls_offset: float
    image: pg.ImageItem


@dataclass
class _GpuRows:
    """One run's GPU and NVTX rows, below its thread lanes (`top` = the plot row of the first)."""

    run: RunData
    gpu: GpuLanes
    index: LaneIndex
    offset: float
    top: int
    image: pg.ImageItem
    colours: np.ndarray


@dataclass(frozen=True)
class Hover:
    """What the mouse is on: a GPU item and/or the API call that launched it, and the tooltip's text."""

    run_id: str
    text: str
    item: int | None  # in the run's GpuLanes
    call: int | None  # in the run's ApiCalls


class LaneHover:
    """What the mouse is on in a `ThreadPanel`, and the link it draws."""

    plot: pg.PlotItem
    runs: list[RunData]
    align: str
    lanes: dict[str, _RunLanes]
    gpu_rows: dict[str, _GpuRows]
    hover: Hover | None
    link: pg.PlotDataItem

    def hover_at(self, x: float, y: float) -> Hover | None:
        """Picks the launch call or GPU item at plot point (x, y), draws its link and returns what it is."""
        (x0, x1), _ = self.plot.viewRange()
        tolerance = HOVER_PX * (x1 - x0) / max(self.plot.getViewBox().width(), 1.0)
        row = math.floor(-y)
        hover = None
        for rows in self.gpu_rows.values():
            lane = row - rows.top
            if 0 <= lane < len(rows.gpu.lane_names):
                item = rows.index.at(lane, x - rows.offset, tolerance)
                if item is not None:
                    links = rows.run.lanes.links
                    call = None if links is None else int(links.call_of_item[item])
                    hover = self._describe(rows.run, item, None if call is None or call < 0 else call)
        for run_id, lanes in self.lanes.items():
            lane = row - lanes.top
            if lanes.calls is not None and 0 <= lane < lanes.lanes and hover is None:
                call = lanes.calls.at(lane, x - lanes.calls_offset, tolerance)
                if call is not None:
                    run = self._run(run_id)
                    links = run.lanes.links
                    item = None if links is None else int(links.item_of_call[call])
                    hover = self._describe(run, None if item is None or item < 0 else item, call)
        self.hover = hover
        self._draw_link(hover)
        return hover

    def _run(self, run_id: str) -> RunData:
        return next(r for r in self.runs if r.run_id == run_id)

    def _describe(self, run: RunData, item: int | None, call: int | None) -> Hover:
        lines = []
        calls, threads, gpu = run.lanes.api_calls, run.lanes.threads, run.lanes.gpu
        if call is not None and calls is not None and threads is not None:
            thread = threads.lane_names[int(calls.lane[call])]
            dur = int(calls.end_ns[call] - calls.start_ns[call])
            lines.append(f"launch: {calls.name(call)} on {thread}, {_duration(dur)}")
        if item is not None and gpu is not None:
            kind = gpu.names[int(gpu.code[item])]
            kind = NVTX_ACTIVITIES[0] if kind in NVTX_ACTIVITIES else kind
            dur = int(gpu.end_ns[item] - gpu.start_ns[item])
            lane = gpu.lane_names[int(gpu.lane[item])]
            lines.append(f"{kind}: {_elide(gpu.label(item))} on {lane}, {_duration(dur)}")
            if call is not None and calls is not None:
                wait = int(gpu.start_ns[item] - calls.start_ns[call])
                lines.append(f"starts {_duration(wait)} after its launch")
        return Hover(run.run_id, "\n".join(lines), item, call)

    def _draw_link(self, hover: Hover | None) -> None:
        """Outlines the hovered call and item and joins them (launch start to GPU start)."""
        if hover is None:
            self.link.setData([], [])
            return
        (x0, x1), _ = self.plot.viewRange()
        least = MIN_MARK_PX * (x1 - x0) / max(self.plot.getViewBox().width(), 1.0)
        boxes = []
        lanes = self.lanes.get(hover.run_id)
        rows = self.gpu_rows.get(hover.run_id)
        run = self._run(hover.run_id)
        calls = run.lanes.api_calls
        if hover.call is not None and lanes is not None and calls is not None:
            anchor = run.anchor_ns(self.align)
            a = (int(calls.start_ns[hover.call]) - anchor) / 1e9
            b = (int(calls.end_ns[hover.call]) - anchor) / 1e9
            boxes.append((a, max(b, a + least), lanes.top + int(calls.lane[hover.call])))
        if hover.item is not None and rows is not None:
            a = float(rows.index.x0[hover.item]) + rows.offset
            b = float(rows.index.x1[hover.item]) + rows.offset
            boxes.append((a, max(b, a + least), rows.top + int(rows.gpu.lane[hover.item])))
        xs: list[float] = []
        ys: list[float] = []
        for a, b, row in boxes:
            top, bottom = -row - 0.05, -row - 0.95
            xs += [a, b, b, a, a, math.nan]
            ys += [top, top, bottom, bottom, top, math.nan]
        if len(boxes) == 2:
            (a0, _, r0), (a1, _, r1) = boxes
            xs += [a0, a1]
            ys += [-r0 - 0.95, -r1 - 0.05]
        self.link.setData(xs, ys)


def _duration(ns: int) -> str:
    if abs(ns) < 10_000:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 10_000_000:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.3f} s"


def _elide(name: str, chars: int = TOOLTIP_NAME_CHARS) -> str:
    """Long C++ kernel names keep their start (the function) and end (its arguments)."""
    if len(name) <= chars:
        return name
    half = (chars - 1) // 2
    return name[:half] + "…" + name[-half:]
