"""The normalised trace tables of a run folder, declared in one place (units in column names).

Every ingester (nsys SQLite, Kineto JSON, our CUPTI records) writes these Arrow schemas to
`<run>/<table>.parquet`; every summary reads them, so no summary knows where a row came from.
All times are Unix-epoch nanoseconds when the source says how to get there (see `analyzers.trace.clock`);
`trace_meta.json` records per source whether the clock is `unix_ns` or `relative_ns`. Every ingester
writes its rows sorted by `start_ns` (whatever order the trace had them in: nsys 2025.6+ exports them
unordered); rows of several sources in one run are merged in that order too.

CUPTI records on disk (decoded by the tracer from the buffers the in-worker collector writes;
`analyzers.ingest.cupti` reads them):
  `raw/cupti/records-NNNNN.parquet`, one file per CUPTI buffer, with the columns of
  `tracer.core.schema.CUPTI_COLUMNS` (`kind` in {"runtime", "driver", "kernel", "memcpy", "memset"};
  for memcpy, `name` is the copy kind as in `MEMCPY_KINDS`, e.g. "Host-to-Device").
  `raw/cupti/clock.json` = {"offset_ns": N} where N = time.time_ns() - cuptiGetTimestamp() taken
  once at start; it is added to every time. Without it times are taken as already Unix ns.

An ingester may hand over string columns dictionary-encoded (`dictionary_strings(schema)`: same
values, each distinct string stored once), which the Parquet writer takes without hashing millions of
strings again; the files always read back with the plain schemas below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa

from analyzers.trace.table_names import (  # noqa: F401 - re-exported: the tables' readers import one module
    ACTIVITY_ACTIVE,
    ACTIVITY_BUSY,
    ACTIVITY_IDLE,
    ALIGNMENT_FACT,
    API_CUDA,
    API_DRIVER,
    API_HIP,
    API_RUNTIME,
    BATCH_FACT,
    CUDA_API,
    HIP_PREFIXES,
    KERNELS,
    MEMCPY,
    MEMCPY_KINDS,
    MEMSET_KIND,
    NVTX,
    OPERATORS,
    OSRT,
    RANKS_FACT,
    SAMPLER_ACTIVITIES,
    SOURCE_CUPTI,
    SOURCE_KINETO,
    SOURCE_MXNET,
    SOURCE_NSYS,
    SOURCE_NSYS_JAX,
    SOURCE_PADDLE,
    SOURCE_PYSPY,
    SOURCE_ROCPD,
    SOURCE_SAMPLER,
    SOURCE_XPROF,
    THREAD_TIMELINE,
    TRACE_META,
    TRACE_OF_SOURCE,
    WINDOW_FACT,
    WINDOW_NS_FACT,
    api_display_name,
    api_family,
    family_label,
    kineto_memcpy_kind,
    memcpy_kind_label,
)
from tracer.core.schema import RANK

CUDA_API_SCHEMA = pa.schema(
    [
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("name", pa.string()),
        ("api", pa.string()),
        ("kind", pa.string()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("thread_name", pa.string()),
        ("correlation_id", pa.int64()),
        ("source", pa.string()),
    ]
)

KERNELS_SCHEMA = pa.schema(
    [
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("name", pa.string()),
        ("short_name", pa.string()),
        ("device", pa.int64()),
        ("stream", pa.int64()),
        ("correlation_id", pa.int64()),
        ("pid", pa.int64()),
        ("grid_x", pa.int64()),
        ("grid_y", pa.int64()),
        ("grid_z", pa.int64()),
        ("block_x", pa.int64()),
        ("block_y", pa.int64()),
        ("block_z", pa.int64()),
        ("source", pa.string()),
    ]
)

MEMCPY_SCHEMA = pa.schema(
    [
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("kind", pa.string()),
        ("bytes", pa.int64()),
        ("device", pa.int64()),
        ("stream", pa.int64()),
        ("correlation_id", pa.int64()),
        ("source", pa.string()),
    ]
)

RANGE_SCHEMA = pa.schema(
    [
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("name", pa.string()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("source", pa.string()),
    ]
)
"""A named time range on one thread: NVTX ranges and the Kineto operator events are both this."""
NVTX_SCHEMA = RANGE_SCHEMA

OSRT_SCHEMA = pa.schema(
    [
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("name", pa.string()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("thread_name", pa.string()),
        ("source", pa.string()),
    ]
)

OPERATORS_SCHEMA = RANGE_SCHEMA

THREAD_TIMELINE_SCHEMA = pa.schema(  # one name per thread on every row (the last one the sampler saw)
    [
        ("tid", pa.int64()),
        ("pid", pa.int64()),
        ("thread_name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("activity", pa.string()),
        ("source", pa.string()),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    CUDA_API: CUDA_API_SCHEMA,
    KERNELS: KERNELS_SCHEMA,
    MEMCPY: MEMCPY_SCHEMA,
    NVTX: NVTX_SCHEMA,
    OSRT: OSRT_SCHEMA,
    OPERATORS: OPERATORS_SCHEMA,
}
"""The tables an ingester writes from a trace file (the thread timeline is derived from them and the samples)."""


def dictionary_strings(schema: pa.Schema) -> pa.Schema:
    """`schema` with its string columns dictionary-encoded (int32 indices)."""
    return pa.schema(
        [f.with_type(pa.dictionary(pa.int32(), pa.string())) if f.type == pa.string() else f for f in schema]
    )


def has_dictionaries(table: pa.Table) -> bool:
    return any(pa.types.is_dictionary(f.type) for f in table.schema)


def plain(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with dictionary-encoded columns decoded to `schema`'s plain types."""
    return table.cast(schema) if has_dictionaries(table) else table


def row_group_statistics(parquet: Any, column: str) -> list[Any]:
    """`column`'s footer statistics in each row group of an open `pq.ParquetFile` (None where the writer
    kept none): what a file holds, answered without reading its data."""
    meta = parquet.metadata
    index = parquet.schema_arrow.get_field_index(column)
    return [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]


def empty(schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches([], schema=schema)  # Schema.empty_table imports pandas (0.2 s, 41 MiB)


READ_SCHEMAS: dict[str, pa.Schema] = {**SCHEMAS, THREAD_TIMELINE: THREAD_TIMELINE_SCHEMA}
"""Every trace table a reader takes from a run folder, with the schema it is checked against first."""
LATER_COLUMNS = frozenset({"rank", "source", "short_name", "thread_name"})
"""Columns added after runs were already written: a table without them is an older table, not damage."""
OPTIONAL_COLUMNS: dict[str, frozenset[str]] = {KERNELS: LATER_COLUMNS | {"pid"}}
"""Per table, the columns its readers look for before using them (`analyzers.trace.correlation`: kernels' pid)."""


TableFile: TypeAlias = Path | pa.Buffer
"""What a reader opens to read a trace table (`RunFolder.table_file`): its Parquet file, or one rank's rows of
it as Parquet in memory (`analyzers.run.rank_view`)."""


def present_file(path: Path, problems: Any = None) -> bool:
    """Whether the trace table at `path` (named by its stem) exists and reads as its declared schema.
    A damaged one (not a regular file, a bad footer, foreign columns) is read as absent and named in
    `problems` (a `tracer.core.problems.Problems`, the run's): a problem of that run, never a traceback."""
    from tracer.core.reading import table_problem

    name = path.name.removesuffix(".parquet")
    declared = READ_SCHEMAS.get(name)
    if declared is None:
        return path.exists()
    why = table_problem(path, declared, OPTIONAL_COLUMNS.get(name, LATER_COLUMNS))
    if why is not None:
        if problems is not None:
            problems.add(path, why)
        return False
    return path.is_file()


def present(folder: Any, name: str) -> bool:
    """`present_file` of the run folder's table `name` (`folder` is a `RunFolder`), its problems noted."""
    return present_file(folder.table_path(name), getattr(folder, "problems", None))


def sql_table(con: Any, source: TableFile, name: str) -> str:
    """What a DuckDB query on `con` reads a trace table from (`source`: a run's `table_file`): `read_parquet`
    of its file, or (one rank's view of a run: Parquet in memory) its rows registered on `con` as `name`."""
    if isinstance(source, Path):
        quoted = str(source).replace("'", "''")
        return f"read_parquet('{quoted}')"
    import pyarrow.parquet as pq

    con.register(name, pq.ParquetFile(source).read())
    return name


def table_problems(folder: Any) -> list[Any]:
    """Every damaged trace table of a run folder, as `tracer.core.problems.Problem`s."""
    from tracer.core.problems import Problem
    from tracer.core.reading import table_problem

    out = []
    for name, declared in READ_SCHEMAS.items():
        path = folder.table_path(name)
        why = table_problem(path, declared, OPTIONAL_COLUMNS.get(name, LATER_COLUMNS))
        if why is not None:
            out.append(Problem(str(path), why))
    return out


def with_rank(table: pa.Table, rank: int | pa.Array) -> pa.Table:
    """`table` with its RANK column (one rank for every row, or one per row): a trace table of a run with
    several ranks carries it; a table without it is rank 0's (`rank_of`)."""
    column = pa.array([rank] * table.num_rows, pa.int64()) if isinstance(rank, int) else rank.cast(pa.int64())
    if RANK in table.column_names:
        return table.set_column(table.schema.get_field_index(RANK), RANK, column)
    return table.append_column(pa.field(RANK, pa.int64()), column)


def rank_of(table: pa.Table) -> pa.Array:
    """Each row's rank: the RANK column, or 0 on every row of a table written before ranks (one process)."""
    if RANK in table.column_names:
        return table[RANK].combine_chunks()
    return pa.array([0] * table.num_rows, pa.int64())


def of_rank(table: pa.Table, rank: int) -> pa.Table:
    """The rows of one rank (every row for rank 0 of a table without ranks)."""
    import pyarrow.compute as pc

    if RANK not in table.column_names:
        return table if rank == 0 else table.slice(0, 0)
    return table.filter(pc.equal(table[RANK], rank))
