"""The steps table of an imported PyTorch trace, from the trace's own ranges.

PyTorch's profiler wraps every profiled iteration in a `ProfilerStep#N` range (category `Operator` in the
2021 Kineto format, `user_annotation` later: the ingest files them under `operators` and `nvtx`), and
every batch fetched from a DataLoader in an `enumerate(DataLoader)#...__next__` range. Together they are
the steps table the built-in worker writes: the step's start, its wait for data (the DataLoader ranges
inside the step) and the rest of it, so `diagnose` and `compare` read an imported run's data wait.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.trace import tables as t
from tracer.core import schema

PROBE_KINETO = "kineto.ProfilerStep"
"""The steps table's probe for steps read from a Kineto trace's `ProfilerStep#N` ranges."""
STEP_PREFIX, DATALOADER_PREFIX = "ProfilerStep#", "enumerate(DataLoader)#"
STEP_RANGE = re.compile(rf"^{re.escape(STEP_PREFIX)}(\d+)$")
DATALOADER_NEXT = re.compile(rf"^{re.escape(DATALOADER_PREFIX)}.*__next__$")
IMPORTED_EPOCH = 1
"""A trace records no epochs: its steps are all filed under this one."""


def _ranges(tables: dict[str, pa.Table]) -> pa.Table | None:
    """The operator and NVTX ranges that may be steps or DataLoader fetches (only those become Python
    objects: a trace has hundreds of thousands of operators)."""
    parts = []
    for name in (t.OPERATORS, t.NVTX):
        if name in tables:
            ranges = tables[name].select(["start_ns", "end_ns", "name", "pid"])
            names = ranges["name"]
            names = names.cast(pa.string()) if pa.types.is_dictionary(names.type) else names
            parts.append(
                ranges.filter(pc.or_(pc.starts_with(names, STEP_PREFIX), pc.starts_with(names, DATALOADER_PREFIX)))
            )
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return None
    return pa.concat_tables([t.plain(p, parts[0].schema) for p in parts])


def steps_from_ranges(tables: dict[str, pa.Table], rank: int = 0, batch: int | None = None) -> pa.Table | None:
    """One row per `ProfilerStep#N` range (schema.STEPS), or None when the trace has none. Data wait is the
    time covered by the DataLoader `__next__` ranges that start inside the step on its process (nested
    ranges counted once); `images` is the batch where the trace recorded it, else null (never made up)."""
    ranges = _ranges(tables)
    if ranges is None:
        return None
    names = ranges["name"].to_pylist()
    starts, ends, pids = (ranges[c].to_pylist() for c in ("start_ns", "end_ns", "pid"))
    steps = sorted(
        {(starts[i], ends[i], pids[i], int(m.group(1))) for i, n in enumerate(names) if (m := STEP_RANGE.match(n))}
    )
    if not steps:
        return None
    loads = sorted({(starts[i], ends[i], pids[i]) for i, n in enumerate(names) if DATALOADER_NEXT.match(n)})
    rows: dict[str, list[object]] = {c: [] for c in schema.STEP_COLUMNS}
    for start, end, pid, number in steps:
        wait_ns = _covered([(a, b) for a, b, p in loads if p == pid and start <= a < end], end)
        dur_ns = end - start
        for column, value in zip(
            schema.STEP_COLUMNS,
            (IMPORTED_EPOCH, number, batch, start, wait_ns / 1e9, (dur_ns - wait_ns) / 1e9, 0.0, rank, PROBE_KINETO),
        ):
            rows[column].append(value)
    table = pa.table(rows, schema=schema.STEPS.schema)
    return table.take(pc.sort_indices(table, [("start_ns", "ascending")]))


def _covered(spans: list[tuple[int, int]], limit: int) -> int:
    """ns covered by the spans (clipped at `limit`), overlaps counted once."""
    covered, reach = 0, None
    for a, b in sorted(spans):
        b = min(b, limit)
        if reach is None or a >= reach:
            covered += max(0, b - a)
            reach = b
        elif b > reach:
            covered += b - reach
            reach = b
    return covered
