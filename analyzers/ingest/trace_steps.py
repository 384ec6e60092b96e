"""The steps table of an imported trace, from the trace's own ranges: one place for every reader's tables
(`write_steps`: Kineto's rank by rank, the others' as the ingest wrote them), which the import calls.

PyTorch's profiler wraps every profiled iteration in a `ProfilerStep#N` range (category `Operator` in the
2021 Kineto format, `user_annotation` later: the ingest files them under `operators` and `nvtx`), and
every batch fetched from a DataLoader in an `enumerate(DataLoader)#...__next__` range. Together they are
the steps table the built-in worker writes: the step's start, its wait for data (the DataLoader ranges
inside the step) and the rest of it, so `diagnose` and `compare` read an imported run's data wait. A trace of
another format has such ranges where PyTorch ran under its profiler (NVTX ranges in an nsys export); one with
none has no steps table, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.trace import tables as t
from tracer.core import schema
from tracer.core.runfolder import RunFolder

PROBE_KINETO = "kineto.ProfilerStep"
"""The steps table's probe for steps read from a Kineto trace's `ProfilerStep#N` ranges."""
STEP_PREFIX, DATALOADER_PREFIX = "ProfilerStep#", "enumerate(DataLoader)#"
STEP_RANGE = re.compile(rf"^{re.escape(STEP_PREFIX)}(\d+)$")
DATALOADER_NEXT = re.compile(rf"^{re.escape(DATALOADER_PREFIX)}.*__next__$")
IMPORTED_EPOCH = 1
"""A trace records no epochs: its steps are all filed under this one."""


@dataclass(frozen=True)
class Ranges:
    """A trace's tables (one rank's, of several ranks' Kineto files) whose own ranges may be its steps."""

    tables: Mapping[str, pa.Table]
    rank: int = 0
    batch: int | None = None  # the batch the trace records (each step's images), None where it does not
    shift_ns: int = 0  # added to its times: the run's one clock (several ranks' traces)
    rank_of_pid: Mapping[int, int] = field(default_factory=dict)  # several processes in one trace (nsys)


def write_steps(folder: RunFolder, traces: Sequence[Ranges]) -> bool:
    """The steps table of an imported run from its traces' own ranges (`steps_from_ranges`), every reader's tables
    through here; nothing is written where no trace has step ranges. Whether a table was written."""
    steps = []
    for trace in traces:
        found = steps_from_ranges(trace.tables, trace.rank, trace.batch, trace.rank_of_pid)
        if found is not None:
            steps.append(_shifted(found, trace.shift_ns))
    if not steps:
        return False
    pq.write_table(pa.concat_tables(steps), folder.sample_parquet_path(schema.STEPS_TABLE))
    return True


def written_ranges(folder: RunFolder, written: Iterable[str]) -> dict[str, pa.Table]:
    """The ranges that may be steps or DataLoader fetches in the operator and NVTX tables the ingest wrote,
    read a row group at a time (a streamed nsys export's NVTX table may hold millions of rows)."""
    found = {}
    for name in (t.OPERATORS, t.NVTX):
        if name not in written:
            continue
        parquet = pq.ParquetFile(folder.table_path(name))
        parts = []
        for group in range(parquet.num_row_groups):
            kept = _named(parquet.read_row_group(group, columns=["start_ns", "end_ns", "name", "pid"]))
            if kept is not None:
                parts.append(kept)
        if parts:
            found[name] = pa.concat_tables(parts)
    return found


def _named(ranges: pa.Table) -> pa.Table | None:
    """The ranges named as steps or DataLoader fetches, their names plain text; None where there are none."""
    names = ranges["name"]
    names = names.cast(pa.string()) if pa.types.is_dictionary(names.type) else names
    kept = ranges.filter(pc.or_(pc.starts_with(names, STEP_PREFIX), pc.starts_with(names, DATALOADER_PREFIX)))
    return kept if kept.num_rows else None


def _shifted(steps: pa.Table, shift_ns: int) -> pa.Table:
    if not shift_ns:
        return steps
    i = steps.schema.get_field_index("start_ns")
    return steps.set_column(i, steps.schema.field(i), pc.add_checked(steps["start_ns"], shift_ns))


def _ranges(tables: Mapping[str, pa.Table]) -> pa.Table | None:
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


def steps_from_ranges(
    tables: Mapping[str, pa.Table],
    rank: int = 0,
    batch: int | None = None,
    rank_of_pid: Mapping[int, int] | None = None,
) -> pa.Table | None:
    """One row per `ProfilerStep#N` range (schema.STEPS), or None when the trace has none. Data wait is the
    time covered by the DataLoader `__next__` ranges that start inside the step on its process (nested
    ranges counted once); `images` is the batch where the trace recorded it, else null (never made up); the
    rank is `rank`, or its process's where the trace holds several (`rank_of_pid`)."""
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
    ranks = rank_of_pid or {}
    rows: dict[str, list[object]] = {c: [] for c in schema.STEP_COLUMNS}
    for start, end, pid, number in steps:
        wait_ns = _covered([(a, b) for a, b, p in loads if p == pid and start <= a < end], end)
        dur_ns = end - start
        at = ranks.get(pid, rank)
        for column, value in zip(
            schema.STEP_COLUMNS,
            (IMPORTED_EPOCH, number, batch, start, wait_ns / 1e9, (dur_ns - wait_ns) / 1e9, 0.0, at, PROBE_KINETO),
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
