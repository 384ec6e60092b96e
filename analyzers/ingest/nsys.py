"""Nsight Systems SQLite exports (every schema era seen: 2021, 2.9.x with EXPORT_META_DATA, 3.x with
ENUM_* tables) into the normalised tables.

Why the care: the 2021 era records each CUDA API call twice when `--cudabacktrace` was on (eventClass
67 = TRACE_PROCESS_EVENT_CUDABACKTRACE, plain name + callchain); only the CUPTI rows count. The file is
read through SQLite itself, as Arrow tables: ADBC's SQLite driver (`adbc-driver-sqlite`), opened
read-only (`file:...?mode=ro` URI), with sqlite3 as the fallback only when ADBC is missing or cannot
open the file. Any SQLite error becomes a one-line UserError.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers import tables as t
from analyzers.clock import Clock, nsys_clock
from tracer.core.errors import UserError

BACKTRACE_EVENT_CLASS = 67
DRIVER_EVENT_CLASS = 1
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
ADBC_BATCH_ROWS = "adbc.sqlite.query.batch_rows"
ADBC_BATCH = 65_536
"""Rows per Arrow batch ADBC builds (its default, 1,024, costs about 10 % more CPU on big reads)."""
CHUNK_ROWS = 262_144
"""Rowids per chunk read: bounded memory (about 25 MB of Arrow per chunk in flight)."""


GTID_BITS = 24
"""nsys's serialised GlobalId (globalTid/globalPid): pid in bits 24..47, tid in bits 0..23."""
GTID_MASK = (1 << GTID_BITS) - 1


def _pid(gtid: Any) -> Any:
    return pc.bit_wise_and(pc.shift_right(gtid, GTID_BITS), GTID_MASK)


def _tid(gtid: Any) -> Any:
    return pc.bit_wise_and(gtid, GTID_MASK)


def readonly_uri(path: Path) -> str:
    """SQLite URI that opens `path` read-only (URI-quoted, so `?`, `#` and `%` in names are safe)."""
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


def _db_errors() -> tuple[type[Exception], ...]:
    try:
        import adbc_driver_manager
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, adbc_driver_manager.Error)


class Export(Protocol):
    """What the label and clock readers below ask of an nsys export, in SQLite (`Db`) or in Arrow
    (`analyzers.ingest.nsys_arrow.ArrowDb`): its table and column names, and the rows of a query."""

    path: Path

    def tables(self) -> set[str]: ...

    def columns(self, table: str) -> set[str]: ...

    def rows(self, sql: str) -> list[tuple[Any, ...]]: ...


class Db:
    """One read-only connection that answers SQL with Arrow tables: ADBC's SQLite driver (Arrow
    straight from C), or sqlite3 rows turned into Arrow when ADBC is not there or cannot open the file.
    Nullable columns should be `coalesce`d in the SQL: ADBC types a column from its first rows."""

    def __init__(self, path: Path, adbc: bool = True) -> None:
        self.path = path
        self.adbc: Any = _adbc_connect(path) if adbc else None
        self.lite: sqlite3.Connection | None = None
        if self.adbc is None:
            self.lite = sqlite3.connect(readonly_uri(path), uri=True)

    def table(self, sql: str) -> pa.Table:
        if self.adbc is not None:
            with self.adbc.cursor() as cur:
                cur.adbc_statement.set_options(**{ADBC_BATCH_ROWS: str(ADBC_BATCH)})
                cur.execute(sql)
                return cur.fetch_arrow_table()
        assert self.lite is not None
        cur = self.lite.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        cols = list(zip(*rows)) if rows else [()] * len(names)
        return pa.table([pa.array(c, pa.int64() if not rows else None) for c in cols], names=names)

    def tables(self) -> set[str]:
        return {r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}

    def columns(self, table: str) -> set[str]:
        return {r[0] for r in self.rows(f"SELECT name FROM pragma_table_info('{table}')")}

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.lite is not None:  # no Arrow round trip (pyarrow's first array imports pandas: 0.2 s)
            return self.lite.execute(sql).fetchall()
        table = self.table(sql)
        return list(zip(*(c.to_pylist() for c in table.columns))) if table.num_columns else []

    def close(self) -> None:
        if self.adbc is not None:
            self.adbc.close()
        if self.lite is not None:
            self.lite.close()


def _adbc_connect(path: Path) -> Any:
    """An ADBC connection that has read the schema, or None (not installed, or it could not open)."""
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite.dbapi
    except ImportError:
        return None
    con = None
    try:
        con = adbc_driver_sqlite.dbapi.connect(readonly_uri(path))
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM sqlite_master")
            cur.fetchall()
    except adbc_driver_manager.Error:
        if con is not None:
            con.close()
        return None
    return con


@contextmanager
def open_readonly(path: Path, adbc: bool = True) -> Iterator[Db]:
    """`path` read-only; `adbc=False` for callers that read only small tables (sqlite3 is quicker to
    start: ADBC's dbapi imports pyarrow.dataset and pandas, a quarter of a second)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        db = Db(path, adbc)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot open as SQLite ({e})") from None
    try:
        yield db
    except _db_errors() as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: damaged or truncated SQLite file ({msg})") from None
    finally:
        db.close()


def check_nsys(path: Path, db: Export) -> set[str]:
    """The tables of an nsys export, or UserError for any other SQLite file."""
    names = db.tables()
    if "StringIds" not in names or not ({RUNTIME, "OSRT_API", "ThreadNames"} & names):
        raise UserError(f"{path}: not an Nsight Systems export (no StringIds/CUPTI tables)")
    return names


def session_clock(db: Export, names: set[str]) -> Clock:
    if "TARGET_INFO_SESSION_START_TIME" in names:
        rows = db.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if rows and rows[0][0] is not None:
            return nsys_clock(int(rows[0][0]))
    return nsys_clock(None)


def excluded_event_classes(db: Export, names: set[str]) -> list[int]:
    """Backtrace duplicates: by name from ENUM_NSYS_EVENT_CLASS where present, else class 67."""
    if "ENUM_NSYS_EVENT_CLASS" in names:
        rows = db.rows("SELECT id FROM ENUM_NSYS_EVENT_CLASS WHERE name LIKE '%BACKTRACE%'")
        return sorted({int(r[0]) for r in rows} | {BACKTRACE_EVENT_CLASS})
    return [BACKTRACE_EVENT_CLASS]


def thread_names(db: Export, names: set[str]) -> dict[int, str]:
    """globalTid -> thread name (the last name recorded wins: threads are renamed after start)."""
    if "ThreadNames" not in names:
        return {}
    rows = db.rows(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
        "WHERE t.globalTid IS NOT NULL ORDER BY t.rowid"
    )
    return {int(g): str(v) for g, v in rows}


def _strings(db: Export) -> dict[int, str]:
    return {int(i): str(v) for i, v in db.rows("SELECT id, value FROM StringIds")}


def _labels(
    values: pa.ChunkedArray | pa.Array | pa.DictionaryArray, label: Callable[[int], str], encoded: bool = False
) -> pa.Array:
    """Integer ids as strings through a small dictionary (few distinct ids among many rows): the
    label function runs once per distinct id. `encoded` keeps the result a DictionaryArray. `values`
    may come dictionary-encoded already (one encoding shared by several label columns)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    codes = values if isinstance(values, pa.DictionaryArray) else values.dictionary_encode()
    labels = pa.array([label(int(v)) for v in codes.dictionary.to_pylist()], pa.string())
    if encoded:
        return pa.DictionaryArray.from_arrays(codes.indices, labels)
    return labels.take(codes.indices)


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n), pa.array([value]))


def runtime_sql(excluded: list[int], where: str = "") -> str:
    """The CUDA API rows that count (backtrace duplicates left out), NULLs made explicit. The name id
    and the driver flag come packed in one column (`nameId * 2 + driver`): every column costs the
    reader about a tenth of its time, and the pair is what gets dictionary-encoded anyway."""
    cond = f"eventClass NOT IN ({','.join(map(str, excluded))})" + (f" AND {where}" if where else "")
    return (
        f"SELECT start, end, nameId * 2 + (eventClass = {DRIVER_EVENT_CLASS}) AS nameDriver, "
        "coalesce(globalTid, 0) AS globalTid, "
        f"coalesce(correlationId, -1) AS correlationId FROM {RUNTIME} WHERE {cond}"
    )


def _workers() -> int:
    import os

    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def rowid_ranges(db: Db, table: str, chunk: int | None = None) -> list[tuple[int, int]]:
    """Disjoint, inclusive rowid ranges covering `table`, `chunk` rowids each (rowid is the b-tree key:
    a range is a seek and a scan, so ranges read independently at full speed)."""
    step = chunk or CHUNK_ROWS
    lo, hi = db.rows(f"SELECT coalesce(min(rowid), 0), coalesce(max(rowid), -1) FROM {table}")[0]
    return [(a, min(a + step - 1, int(hi))) for a in range(int(lo), int(hi) + 1, step)]


def read_chunks(db: Db, table: str, sql: Callable[[str], str], chunk: int | None = None) -> Iterator[pa.Table]:
    """`sql(rowid condition)` over each rowid range of `table`, yielded in rowid order. With ADBC the
    ranges are read on per-thread read-only connections by a pool (the driver's C loop and Arrow's
    kernels run without the GIL); at most workers + 1 chunks are in flight, so memory does not grow
    with the table. Without ADBC, the chunks are read one after the other on `db`."""
    ranges = rowid_ranges(db, table, chunk)
    if db.adbc is None or len(ranges) <= 1:
        for a, b in ranges:
            yield db.table(sql(f"rowid BETWEEN {a} AND {b}"))
        return
    local = threading.local()
    opened: list[Db] = []
    lock = threading.Lock()

    def read(r: tuple[int, int]) -> pa.Table:
        part = getattr(local, "db", None)
        if part is None:
            part = local.db = Db(db.path)
            with lock:
                opened.append(part)
        return part.table(sql(f"rowid BETWEEN {r[0]} AND {r[1]}"))

    workers = _workers()
    try:
        with ThreadPoolExecutor(workers) as ex:
            pending: deque[Future[pa.Table]] = deque()
            todo = iter(ranges)
            for r in todo:
                pending.append(ex.submit(read, r))
                if len(pending) > workers:
                    break
            while pending:
                out = pending.popleft().result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append(ex.submit(read, nxt))
                yield out
    finally:
        for part in opened:
            part.close()


class SortedParquet:
    """Writes chunks (already in file order) to one Parquet file, a row group each, and notices when
    the rows are not ordered by `start_ns`; `close` then sorts the file with DuckDB (which spills to
    disk rather than hold the table), ties kept in file order, so the result is what a stable sort
    of the whole table would give."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self.writer: pq.ParquetWriter | None = None
        self.last: int | None = None
        self.ordered = True
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        start = table["start_ns"]
        if not _ordered(start):
            self.ordered = False
        if self.last is not None and start[0].as_py() < self.last:
            self.ordered = False
        self.last = start[-1].as_py()
        if self.writer is None:
            strings = [f.name for f in table.schema if pa.types.is_dictionary(f.type) or pa.types.is_string(f.type)]
            self.writer = pq.ParquetWriter(
                self.path, table.schema, store_schema=not t.has_dictionaries(table), use_dictionary=strings
            )
        self.writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> int:
        """Rows written (the file exists only when there were some)."""
        if self.writer is None:
            return 0
        self.writer.close()
        if not self.ordered:
            _sort_parquet(self.path, self.schema)
        return self.rows


def _sort_parquet(path: Path, schema: pa.Schema) -> None:
    """Rewrites `path` stably sorted by start_ns: DuckDB sorts (spilling past 512 MB), its result comes
    back in record batches written with the declared schema."""
    import duckdb

    tmp = path.with_name(path.name + ".sorted")
    src = str(path).replace("'", "''")
    con = duckdb.connect(config={"memory_limit": "512MB", "temp_directory": str(path.parent / ".duckdb_tmp")})
    try:
        reader = con.sql(
            f"SELECT * EXCLUDE (file_row_number) FROM read_parquet('{src}', file_row_number = true) "
            "ORDER BY start_ns, file_row_number"
        ).to_arrow_reader(CHUNK_ROWS)
        with pq.ParquetWriter(tmp, schema) as writer:
            for batch in reader:
                writer.write_batch(batch.cast(schema))
    finally:
        con.close()
    os.replace(tmp, path)


def _ordered(start: pa.ChunkedArray | pa.Array) -> bool:
    return len(start) < 2 or bool(pc.all(pc.greater_equal(start[1:], start[:-1])).as_py())


def _by_start(table: pa.Table) -> pa.Table:
    """`table` stably sorted by start_ns (the check is much cheaper than the sort it usually saves)."""
    return table if _ordered(table["start_ns"]) else table.sort_by("start_ns")


def _cached(label: Callable[[int], str]) -> Callable[[int], str]:
    memo: dict[int, str] = {}

    def get(i: int) -> str:
        if i not in memo:
            memo[i] = label(i)
        return memo[i]

    return get


def cuda_api_chunks(db: Db, names: set[str], clock: Clock) -> Iterator[pa.Table]:
    """The runtime/driver calls as normalised chunks in rowid order (backtrace duplicates left out).
    The string columns stay dictionary-encoded (`tables.dictionary_strings`): 10 M rows have a few
    dozen names."""
    if RUNTIME not in names:
        return
    excluded = excluded_event_classes(db, names)
    strings = _strings(db)
    tnames = thread_names(db, names)
    recorded = _cached(lambda i: strings.get(i >> 1, f"<nameId {i >> 1}>"))
    shown = _cached(lambda i: t.api_display_name(recorded(i)))
    thread = _cached(lambda g: tnames.get(g, ""))
    schema = t.dictionary_strings(t.CUDA_API_SCHEMA)
    for raw in read_chunks(db, RUNTIME, lambda where: runtime_sql(excluded, where)):
        if not raw.num_rows:
            continue
        start, end, gtid = raw["start"], raw["end"], raw["globalTid"]
        packed = raw["nameDriver"].combine_chunks()
        is_driver = pc.cast(pc.bit_wise_and(packed, 1), pa.int32())
        kind = pa.DictionaryArray.from_arrays(is_driver, pa.array([t.API_RUNTIME, t.API_DRIVER]))
        name_ids = packed.dictionary_encode()
        yield _by_start(
            pa.table(
                {
                    "start_ns": pc.add(start, clock.offset_ns),
                    "end_ns": pc.add(end, clock.offset_ns),
                    "dur_ns": pc.subtract(end, start),
                    "name": _labels(name_ids, recorded, encoded=True),
                    "api": _labels(name_ids, shown, encoded=True),
                    "kind": kind,
                    "pid": _pid(gtid),
                    "tid": _tid(gtid),
                    "thread_name": _labels(gtid, thread, encoded=True),
                    "correlation_id": raw["correlationId"],
                    "source": _constant(t.SOURCE_NSYS, raw.num_rows),
                },
                schema=schema,
            )
        )


def read_cuda_api(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """The runtime/driver calls in memory, stably ordered by start (ties keep the file's rowid order).
    For big files `write_sqlite` streams them to Parquet instead."""
    parts = [p.unify_dictionaries() for p in cuda_api_chunks(db, names, clock)]
    return _in_memory(iter(parts), t.dictionary_strings(t.CUDA_API_SCHEMA)).unify_dictionaries()


def _repeat(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n)


def kernel_chunks(db: Db, names: set[str], clock: Clock) -> Iterator[pa.Table]:
    """Kernel launches as normalised chunks in rowid order, each sorted by start."""
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in names:
        return
    strings = _strings(db)
    label = _cached(lambda i: strings.get(i, ""))

    def sql(where: str) -> str:
        return (
            "SELECT start, end, demangledName, shortName, deviceId, streamId, coalesce(correlationId, -1) AS corr, "
            "coalesce(globalPid, 0) AS gpid, gridX, gridY, gridZ, blockX, blockY, blockZ "
            f"FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE {where}"
        )

    for k in read_chunks(db, "CUPTI_ACTIVITY_KIND_KERNEL", sql):
        if not k.num_rows:
            continue
        yield _by_start(
            pa.table(
                {
                    "start_ns": pc.add(k["start"], clock.offset_ns),
                    "end_ns": pc.add(k["end"], clock.offset_ns),
                    "dur_ns": pc.subtract(k["end"], k["start"]),
                    "name": _labels(k["demangledName"], label),
                    "short_name": _labels(k["shortName"], label),
                    "device": k["deviceId"],
                    "stream": k["streamId"],
                    "correlation_id": k["corr"],
                    "pid": _pid(k["gpid"]),
                    "grid_x": k["gridX"],
                    "grid_y": k["gridY"],
                    "grid_z": k["gridZ"],
                    "block_x": k["blockX"],
                    "block_y": k["blockY"],
                    "block_z": k["blockZ"],
                    "source": _repeat(t.SOURCE_NSYS, k.num_rows),
                },
                schema=t.KERNELS_SCHEMA,
            )
        )


def read_kernels(db: Db, names: set[str], clock: Clock) -> pa.Table:
    return _in_memory(kernel_chunks(db, names, clock), t.KERNELS_SCHEMA)


def _in_memory(chunks: Iterator[pa.Table], schema: pa.Schema) -> pa.Table:
    """All chunks as one table, stably sorted by start (for callers that want the table in memory)."""
    parts = list(chunks)
    if not parts:
        return t.empty(schema)
    out = pa.concat_tables(parts)
    return out.sort_by("start_ns") if len(parts) > 1 else out


def _memcpy_labels(db: Export, names: set[str]) -> dict[int, str]:
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        return {int(i): str(label) for i, label in db.rows("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(t.MEMCPY_KINDS)


def memcpy_chunks(db: Db, names: set[str], clock: Clock) -> Iterator[pa.Table]:
    """Copies then memsets, as chunks each sorted by start (the two interleave in time: the writer
    sorts the whole)."""
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
        labels = _memcpy_labels(db, names)
        kind_label = _cached(lambda i: t.memcpy_kind_label(labels.get(i, str(i))))
        for m in read_chunks(
            db,
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            lambda where: (
                "SELECT start, end, copyKind, bytes, deviceId, streamId, "
                f"coalesce(correlationId, -1) AS corr FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE {where}"
            ),
        ):
            if m.num_rows:
                yield _by_start(_memops(m, _labels(m["copyKind"], kind_label), clock))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
        for m in read_chunks(
            db,
            "CUPTI_ACTIVITY_KIND_MEMSET",
            lambda where: (
                "SELECT start, end, bytes, deviceId, streamId, coalesce(correlationId, -1) AS corr "
                f"FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE {where}"
            ),
        ):
            if m.num_rows:
                yield _by_start(_memops(m, _repeat(t.MEMSET_KIND, m.num_rows), clock))


def read_memcpy(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """Copies then memsets, stably ordered by start."""
    return _in_memory(memcpy_chunks(db, names, clock), t.MEMCPY_SCHEMA)


def _memops(m: pa.Table, kind: pa.Array, clock: Clock) -> pa.Table:
    return pa.table(
        {
            "start_ns": pc.add(m["start"], clock.offset_ns),
            "end_ns": pc.add(m["end"], clock.offset_ns),
            "dur_ns": pc.subtract(m["end"], m["start"]),
            "kind": kind,
            "bytes": m["bytes"],
            "device": m["deviceId"],
            "stream": m["streamId"],
            "correlation_id": m["corr"],
            "source": _repeat(t.SOURCE_NSYS, m.num_rows),
        },
        schema=t.MEMCPY_SCHEMA,
    )


def read_nvtx(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """Ranges only (push/pop and start/end: rows with an end); marks carry no duration."""
    if "NVTX_EVENTS" not in names:
        return t.empty(t.NVTX_SCHEMA)
    has_text_id = "textId" in db.columns("NVTX_EVENTS")
    name_expr = "coalesce(n.text, s.value, '')" if has_text_id else "coalesce(n.text, '')"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if has_text_id else ""
    n = db.table(
        f"SELECT n.start AS start, n.end AS end, {name_expr} AS name, coalesce(n.globalTid, 0) AS gtid "
        f"FROM NVTX_EVENTS n {join} WHERE n.end IS NOT NULL ORDER BY n.start"
    )
    if not n.num_rows:
        return t.empty(t.NVTX_SCHEMA)
    return pa.table(
        {
            "start_ns": pc.add(n["start"], clock.offset_ns),
            "end_ns": pc.add(n["end"], clock.offset_ns),
            "name": n["name"],
            "pid": _pid(n["gtid"]),
            "tid": _tid(n["gtid"]),
            "source": _repeat(t.SOURCE_NSYS, n.num_rows),
        },
        schema=t.NVTX_SCHEMA,
    )


def read_osrt(db: Db, names: set[str], clock: Clock) -> pa.Table:
    if "OSRT_API" not in names:
        return t.empty(t.OSRT_SCHEMA)
    strings = _strings(db)
    tnames = thread_names(db, names)
    o = db.table("SELECT start, end, nameId, coalesce(globalTid, 0) AS gtid FROM OSRT_API ORDER BY start")
    if not o.num_rows:
        return t.empty(t.OSRT_SCHEMA)
    return pa.table(
        {
            "start_ns": pc.add(o["start"], clock.offset_ns),
            "end_ns": pc.add(o["end"], clock.offset_ns),
            "name": _labels(o["nameId"], lambda i: strings.get(i, "")),
            "pid": _pid(o["gtid"]),
            "tid": _tid(o["gtid"]),
            "thread_name": _labels(o["gtid"], lambda g: tnames.get(g, "")),
            "source": _repeat(t.SOURCE_NSYS, o.num_rows),
        },
        schema=t.OSRT_SCHEMA,
    )


def read_sqlite(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """Every normalised table the export has (empty ones left out), and the clock used."""
    with open_readonly(path) as db:
        names = check_nsys(path, db)
        clock = session_clock(db, names)
        out = {
            t.CUDA_API: read_cuda_api(db, names, clock),
            t.KERNELS: read_kernels(db, names, clock),
            t.MEMCPY: read_memcpy(db, names, clock),
            t.NVTX: read_nvtx(db, names, clock),
            t.OSRT: read_osrt(db, names, clock),
        }
    return {k: v for k, v in out.items() if v.num_rows}, clock


STREAMED: dict[str, Callable[[Db, set[str], Clock], Iterator[pa.Table]]] = {
    t.CUDA_API: cuda_api_chunks,
    t.KERNELS: kernel_chunks,
    t.MEMCPY: memcpy_chunks,
}
"""The tables that grow with the run: streamed chunk by chunk from SQLite to Parquet."""


def write_sqlite(path: Path, out_dir: Path) -> tuple[list[str], Clock]:
    """Every normalised table the export has, written as `out_dir/<table>.parquet` (empty ones left
    out), and the clock used. No table ever sits whole in memory: DuckDB's sqlite scanner copies them
    on every core (the big tables' rows in no particular order), or, without that extension, the big
    tables (`STREAMED`) are read in rowid-range chunks in parallel through ADBC and written as row
    groups sorted by start, and NVTX and OS runtime rows are read whole."""
    from analyzers.ingest import nsys_duckdb

    extension = nsys_duckdb.sqlite_scanner()
    with open_readonly(path, adbc=extension is None) as db:
        names = check_nsys(path, db)
        clock = session_clock(db, names)
        if extension is not None:
            return _copied_from_sqlite(db, names, clock, out_dir, extension), clock
        written = _streamed(db, names, clock, out_dir)
        for name, table in ((t.NVTX, read_nvtx(db, names, clock)), (t.OSRT, read_osrt(db, names, clock))):
            if table.num_rows:
                pq.write_table(table, out_dir / f"{name}.parquet")
                written.append(name)
    return written, clock


def _copied_from_sqlite(db: Db, names: set[str], clock: Clock, out_dir: Path, extension: Path) -> list[str]:
    """Every table written by DuckDB's sqlite scanner (`nsys_duckdb`, `extension` its file)."""
    from analyzers.ingest import nsys_duckdb

    con = nsys_duckdb.connect(out_dir)
    nsys_duckdb.attach_sqlite(con, db.path, extension)
    return copied_by_duckdb(con, db, names, clock, out_dir)


def copied_by_duckdb(con: Any, db: Export, names: set[str], clock: Clock, out_dir: Path) -> list[str]:
    """Every table written by DuckDB (`nsys_duckdb.Copier`) from the export seen as schema `nsys` on
    `con`; `db` answers the small questions (labels, event classes) about the same export."""
    from analyzers.ingest import nsys_duckdb

    copier = nsys_duckdb.Copier(con, clock.offset_ns, _strings(db), thread_names(db, names))
    rows: dict[str, int] = {}
    try:
        if RUNTIME in names:
            path = out_dir / f"{t.CUDA_API}.parquet"
            rows[t.CUDA_API] = copier.copy_cuda_api(path, excluded_event_classes(db, names), DRIVER_EVENT_CLASS)
        if "CUPTI_ACTIVITY_KIND_KERNEL" in names:
            rows[t.KERNELS] = copier.copy_kernels(out_dir / f"{t.KERNELS}.parquet")
        copies = "CUPTI_ACTIVITY_KIND_MEMCPY" in names
        kinds = {i: t.memcpy_kind_label(label) for i, label in _memcpy_labels(db, names).items()} if copies else None
        rows[t.MEMCPY] = copier.copy_memory_ops(
            out_dir / f"{t.MEMCPY}.parquet", kinds, "CUPTI_ACTIVITY_KIND_MEMSET" in names
        )
        if "NVTX_EVENTS" in names:
            text_ids = "textId" in db.columns("NVTX_EVENTS")
            rows[t.NVTX] = copier.copy_nvtx(out_dir / f"{t.NVTX}.parquet", text_ids)
        if "OSRT_API" in names:
            rows[t.OSRT] = copier.copy_osrt(out_dir / f"{t.OSRT}.parquet")
    except nsys_duckdb.duckdb.Error as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{db.path}: damaged or truncated export ({msg})") from None
    finally:
        copier.close()
    return [name for name in (*STREAMED, t.NVTX, t.OSRT) if rows.get(name)]


def _streamed(db: Db, names: set[str], clock: Clock, out_dir: Path) -> list[str]:
    """The `STREAMED` tables through ADBC, chunk by chunk, each file stably sorted by start."""
    written = []
    for name, chunks in STREAMED.items():
        out = SortedParquet(out_dir / f"{name}.parquet", t.SCHEMAS[name])
        try:
            for chunk in chunks(db, names, clock):
                out.write(chunk)
        finally:
            rows = out.close()
        if rows:
            written.append(name)
    return written
