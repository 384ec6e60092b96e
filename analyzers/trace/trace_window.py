"""Where a trace window lies in a run's time: the one mapping from `--trace-window` to nanoseconds.

A run traced in a window (`tracer.core.window`) has trace rows only there; every trace table and the
CUDA split of such a run cover that window and say so (`WindowSpan.label`). The same mapping cuts
the same window out of a fully traced run, so the two can be compared on the same basis. The phase
model places the span among its phases (a window inside the steady epochs is a steady split).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from tracer.core import window as trace_window
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder
from tracer.core.schema import COMPUTE_S, DATA_WAIT_S, STEP_COLUMNS, STEPS_TABLE, SYNC_S

_EPOCH, _STEP, _START_NS = STEP_COLUMNS[0], STEP_COLUMNS[1], STEP_COLUMNS[3]


@dataclass(frozen=True)
class WindowSpan:
    """A window's time range, [start_ns, end_ns) on the Unix clock of the run's events."""

    window: trace_window.TraceWindow
    start_ns: int
    end_ns: int

    @property
    def label(self) -> str:
        """What a table covering it says: "window: epoch 2"."""
        return f"window: {self.window.label}"


def run_window(folder: RunFolder) -> trace_window.TraceWindow | None:
    """The window the run was traced in; None for a run traced whole (or not a run: an imported trace)."""
    try:
        record = folder.read_record()
    except UserError:
        return None
    return trace_window.of_record(record.measurement)


def window_span(folder: RunFolder, window: trace_window.TraceWindow | None = None) -> WindowSpan | None:
    """The time range of `window` (default: the run's own trace window) in this run: from the first
    epoch's start to the last epoch's end, or from the first step's start to the last step's end, as
    the worker reported them. None when the run has no window, or did not get that far."""
    window = window or run_window(folder)
    if window is None:
        return None
    if window.first_step is None:
        epochs = {e.epoch: e for e in folder.epochs()}
        first, last = epochs.get(window.first_epoch), epochs.get(window.last_epoch)
        if first is None or last is None:
            return None
        return WindowSpan(window, first.start_ns, last.end_ns)
    steps = folder.samples(STEPS_TABLE)
    if steps is None or steps.num_rows == 0:
        return None
    keep = pc.and_(
        pc.equal(steps[_EPOCH], window.first_epoch),
        pc.and_(pc.greater_equal(steps[_STEP], window.first_step), pc.less_equal(steps[_STEP], window.last_step)),
    )
    rows = steps.filter(keep)
    if rows.num_rows == 0:
        return None
    starts = rows[_START_NS].to_pylist()
    took_s = pc.add(pc.add(rows[DATA_WAIT_S], rows[COMPUTE_S]), rows[SYNC_S]).to_pylist()
    ends = [start + round(s * 1e9) for start, s in zip(starts, took_s)]  # ns stay integers: a float has 53 bits
    return WindowSpan(window, min(starts), max(ends))
