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

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from analyzers.trace import api_names
from tracer.core.schema import MEMCPY_NAMES, RANK

CUDA_API = "cuda_api"
API_RUNTIME, API_DRIVER = "runtime", "driver"
"""The two values of `cuda_api.kind`."""
SOURCE_NSYS = "nsys"
"""`source` of every row an Nsight Systems export gave."""
SOURCE_KINETO = "kineto"
"""`source` of every row a Kineto (PyTorch profiler) trace gave."""
SOURCE_CUPTI = "cupti"
"""`source` of every row our in-worker CUPTI collector gave."""
SOURCE_XPROF = "xprof"
"""`source` of every row from an XPlane profile (jax.profiler, TensorFlow's profiler) or XProf's JSON of one."""
SOURCE_ROCPD = "rocpd"
"""`source` of every row from a rocpd database (rocprof, rocmProfileData)."""
SOURCE_PADDLE = "paddle"
"""`source` of every row from paddle.profiler's Chrome-trace JSON."""
SOURCE_MXNET = "mxnet"
"""`source` of every row from MXNet's profiler's Chrome-trace JSON."""
SOURCE_NSYS_JAX = "nsys-jax"
"""`source` of every row from an nsys-jax archive's recipe output."""
TRACE_OF_SOURCE = {
    SOURCE_NSYS: "nsys",
    SOURCE_CUPTI: "cupti",
    SOURCE_KINETO: "torch",
    SOURCE_XPROF: "native",
    SOURCE_PADDLE: "native",
    SOURCE_MXNET: "native",
}
"""The `--trace` backend (`tracer.core.options.TRACE_BACKENDS`) whose trace a source's rows are: what
an imported trace's run record says it was traced with."""
KERNELS = "kernels"
MEMCPY = "memcpy"
NVTX = "nvtx"
OSRT = "osrt"
OPERATORS = "operators"  # framework operators (PyTorch profiler `cpu_op` events: aten::conv2d, ...)
THREAD_TIMELINE = "thread_timeline"
"""What every thread did when (`THREAD_TIMELINE_SCHEMA`), written by the ingest (`analyzers.ingest.threads`)."""
SOURCE_SAMPLER = "sampler"
"""`source` of a thread-timeline row derived from the sampler's per-thread CPU times."""
SOURCE_PYSPY = "pyspy"
"""`source` of a thread-timeline row from a py-spy speedscope profile."""
ACTIVITY_IDLE, ACTIVITY_ACTIVE, ACTIVITY_BUSY = "idle", "active", "busy"
SAMPLER_ACTIVITIES = (ACTIVITY_IDLE, ACTIVITY_ACTIVE, ACTIVITY_BUSY)
"""A sampler row's `activity`, by level (index 0 = idle): the thread's CPU use between two samples."""
TRACE_META = "trace_meta.json"
BATCH_FACT = "batch"
"""Key, under a source in TRACE_META, of the batch size the trace itself recorded (Kineto's shapes)."""
RANKS_FACT, ALIGNMENT_FACT = "ranks", "alignment"
"""Keys, under a source in TRACE_META, of a run with several ranks: each rank's file, clock and shift onto
the run's one clock, and how the ranks were put on it (`analyzers.ingest.ranks.Alignment`)."""
WINDOW_FACT, WINDOW_NS_FACT = "window", "window_ns"
"""Keys, under a source in TRACE_META, of the trace window the run was traced in (`--trace-window`) and
its [start, end) in Unix ns (`analyzers.trace.trace_window`): the source's tables cover that window only."""

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

# CUPTI's CUpti_ActivityMemcpyKind (named once, in the worker's collector), plus the unified-memory
# ids that nsys's ENUM_CUDA_MEMCPY_OPER adds.
MEMCPY_KINDS: dict[int, str] = {
    **MEMCPY_NAMES,
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
MEMSET_KIND = "[CUDA memset]"


def memcpy_kind_label(label: str) -> str:
    """The operation name nsys's cuda_gpu_mem_*_sum reports print, e.g. "[CUDA memcpy Host-to-Device]"."""
    return f"[CUDA memcpy {label}]"


API_CUDA = "CUDA"
API_HIP = "HIP"
HIP_PREFIXES = ("hip", "hsa_")
"""ROCm's runtime calls: PyTorch on ROCm files them under Kineto's `cuda_runtime` category all the same."""


def api_family(names: Iterable[str]) -> str:
    """What a run's GPU API is called in every table and figure: HIP where its calls are ROCm's."""
    return API_HIP if any(n.startswith(HIP_PREFIXES) for n in names) else API_CUDA


def family_label(label: str, family: str) -> str:
    """A label written for CUDA (`[CUDA memcpy Host-to-Device]`, `CUDA API`) as this family's."""
    return label if family == API_CUDA else label.replace(API_CUDA, family)


api_display_name = api_names.display_name  # nsys's display rule (analyzers.trace.api_names)


_KINETO_MEMCPY = re.compile(r"Memcpy\s+(\w+)")
_KINETO_MEMCPY_KINDS = {
    "HtoD": "Host-to-Device",
    "DtoH": "Device-to-Host",
    "DtoD": "Device-to-Device",
    "HtoH": "Host-to-Host",
    "PtoP": "Peer-to-Peer",
    "HtoA": "Host-to-Array",
    "AtoH": "Array-to-Host",
    "AtoA": "Array-to-Array",
    "AtoD": "Array-to-Device",
    "DtoA": "Device-to-Array",
}


def kineto_memcpy_kind(event_name: str) -> str:
    """Kineto names copies "Memcpy HtoD (Pageable -> Device)"; map to nsys's operation label."""
    m = _KINETO_MEMCPY.match(event_name)
    label = _KINETO_MEMCPY_KINDS.get(m.group(1), m.group(1)) if m else event_name
    return memcpy_kind_label(label)


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
