"""The writing of a trace's normalised tables into a run folder (merged with other sources' rows, its clock
recorded), and the refusal of a trace whose events end before they start; apart from `pipeline` so that
the reader of several ranks (`ranks`) writes as the pipeline does without importing it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.trace import tables as t
from analyzers.trace.clock import Clock
from tracer.core import arrow_build as build
from tracer.core.errors import UserError
from tracer.core.memory import give_back_freed_memory
from tracer.core.runfolder import RunFolder, write_json_atomic


def _refuse_negative(path: Path, tables: dict[str, pa.Table]) -> None:
    zero = build.int_scalar(0)  # a bare 0 makes pyarrow probe for pandas, and the probe imports it (0.5 s)
    for name, table in tables.items():
        if "dur_ns" in table.column_names and table.num_rows:
            negative = pc.sum(pc.less(table["dur_ns"], zero)).as_py() or 0
            if negative:
                raise UserError(f"{path}: {negative} {name} events end before they start: the trace is damaged")


TABLE_ROW_GROUP_ROWS = 65_536
"""Rows per row group of a table written whole: the writer holds one group's encoded pages at a time (a
167 k-row CUDA API table in one group raised the import's peak by 45 MiB, in groups of this size by 23 MiB,
28 Nov 2026); readers skip groups by their statistics."""


def write_tables(
    folder: RunFolder, tables: dict[str, pa.Table], source: str, clock: Clock, facts: dict[str, int] | None = None
) -> list[str]:
    """Writes (or appends to) `<run>/<table>.parquet` atomically and records the clock per source, with
    what the trace said of its run (`facts`, e.g. its batch size).
    Dictionary-encoded string columns (see `analyzers.trace.tables`) go to the Parquet writer as they are,
    without the Arrow schema in the file, so the file reads back with the declared plain-string schema."""
    written = []
    for name, table in tables.items():
        path = folder.table_path(name)
        if path.exists():
            table = _merged(path, table, source)
        tmp = path.with_suffix(".parquet.tmp")
        give_back_freed_memory()  # what the reader and the last table's writer freed, before this one's buffers
        pq.write_table(table, tmp, store_schema=not t.has_dictionaries(table), row_group_size=TABLE_ROW_GROUP_ROWS)
        os.replace(tmp, path)
        written.append(name)
    _record_clock(folder, source, clock, written, facts)
    return written


def _merged(path: Path, table: pa.Table, source: str) -> pa.Table:
    """The rows already in `path` from other sources, then `table`'s, ordered by start."""
    old = pq.read_table(path)
    table = t.plain(table, old.schema)
    table = pa.concat_tables([old.filter(pa.compute.not_equal(old["source"], source)), table])
    return table.sort_by("start_ns")


def _record_clock(
    folder: RunFolder, source: str, clock: Clock, written: list[str], facts: dict[str, int] | None = None
) -> None:
    meta_path = folder.path / t.TRACE_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    meta[source] = clock.to_json() | {"tables": sorted(written)} | (facts or {})
    write_json_atomic(meta_path, meta)


def install_parts(folder: RunFolder, staged: Path, names: list[str], source: str, clock: Clock) -> list[str]:
    """Moves `staged/<table>.parquet` files (written by a streaming ingest) into the run folder; a table
    the run already has from another source is merged in memory as `write_tables` does."""
    for name in names:
        part, path = staged / f"{name}.parquet", folder.table_path(name)
        if path.exists():
            table = _merged(path, pq.read_table(part), source)
            pq.write_table(table, part)
        os.replace(part, path)
    _record_clock(folder, source, clock, names)
    return names
