"""Nsight Systems SQLite exports (every schema era seen: 2021, 2.9.x with EXPORT_META_DATA, 3.x with
ENUM_* tables) into the normalised tables.

Why the care: the 2021 era records each CUDA API call twice when `--cudabacktrace` was on (eventClass
67 = TRACE_PROCESS_EVENT_CUDABACKTRACE, plain name + callchain); only the CUPTI rows count. The file is
read through SQLite itself, as Arrow tables: ADBC's SQLite driver (`adbc-driver-sqlite`), opened
read-only (`file:...?mode=ro` URI), with sqlite3 as the fallback only when ADBC is missing or cannot
open the file. Any SQLite error becomes a one-line UserError.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from analyzers import tables as t
from analyzers.clock import Clock, nsys_clock
from tracer.core.errors import UserError

BACKTRACE_EVENT_CLASS = 67
DRIVER_EVENT_CLASS = 1
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
RANGE_ROWS = 2_000_000


def _pid(gtid: Any) -> Any:
    """nsys's serialised GlobalId (globalTid/globalPid): pid in bits 24..47, tid in bits 0..23."""
    return pc.bit_wise_and(pc.shift_right(gtid, 24), 0xFFFFFF)


def _tid(gtid: Any) -> Any:
    return pc.bit_wise_and(gtid, 0xFFFFFF)


def readonly_uri(path: Path) -> str:
    """SQLite URI that opens `path` read-only (URI-quoted, so `?`, `#` and `%` in names are safe)."""
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


def _db_errors() -> tuple[type[Exception], ...]:
    try:
        import adbc_driver_manager
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, adbc_driver_manager.Error)


class Db:
    """One read-only connection that answers SQL with Arrow tables: ADBC's SQLite driver (Arrow
    straight from C), or sqlite3 rows turned into Arrow when ADBC is not there or cannot open the file.
    Nullable columns should be `coalesce`d in the SQL: ADBC types a column from its first rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.adbc: Any = _adbc_connect(path)
        self.lite: sqlite3.Connection | None = None
        if self.adbc is None:
            self.lite = sqlite3.connect(readonly_uri(path), uri=True)

    def table(self, sql: str) -> pa.Table:
        if self.adbc is not None:
            with self.adbc.cursor() as cur:
                cur.execute(sql)
                return cur.fetch_arrow_table()
        assert self.lite is not None
        cur = self.lite.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        cols = list(zip(*rows)) if rows else [()] * len(names)
        return pa.table([pa.array(c, pa.int64() if not rows else None) for c in cols], names=names)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
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
def open_readonly(path: Path) -> Iterator[Db]:
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        db = Db(path)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot open as SQLite ({e})") from None
    try:
        yield db
    except _db_errors() as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: damaged or truncated SQLite file ({msg})") from None
    finally:
        db.close()


def table_names(db: Db) -> set[str]:
    return {r[0] for r in db.rows("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def columns(db: Db, table: str) -> set[str]:
    return {r[0] for r in db.rows(f"SELECT name FROM pragma_table_info('{table}')")}


def check_nsys(path: Path, db: Db) -> set[str]:
    """The tables of an nsys export, or UserError for any other SQLite file."""
    names = table_names(db)
    if "StringIds" not in names or not ({RUNTIME, "OSRT_API", "ThreadNames"} & names):
        raise UserError(f"{path}: a SQLite file, but not an Nsight Systems export (no StringIds/CUPTI tables)")
    return names


def session_clock(db: Db, names: set[str]) -> Clock:
    if "TARGET_INFO_SESSION_START_TIME" in names:
        rows = db.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if rows and rows[0][0] is not None:
            return nsys_clock(int(rows[0][0]))
    return nsys_clock(None)


def excluded_event_classes(db: Db, names: set[str]) -> list[int]:
    """Backtrace duplicates: by name from ENUM_NSYS_EVENT_CLASS where present, else class 67."""
    if "ENUM_NSYS_EVENT_CLASS" in names:
        rows = db.rows("SELECT id FROM ENUM_NSYS_EVENT_CLASS WHERE name LIKE '%BACKTRACE%'")
        return sorted({int(r[0]) for r in rows} | {BACKTRACE_EVENT_CLASS})
    return [BACKTRACE_EVENT_CLASS]


def thread_names(db: Db, names: set[str]) -> dict[int, str]:
    """globalTid -> thread name (the last name recorded wins: threads are renamed after start)."""
    if "ThreadNames" not in names:
        return {}
    rows = db.rows(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
        "WHERE t.globalTid IS NOT NULL ORDER BY t.rowid"
    )
    return {int(g): str(v) for g, v in rows}


def _strings(db: Db) -> dict[int, str]:
    return {int(i): str(v) for i, v in db.rows("SELECT id, value FROM StringIds")}


def _labels(values: pa.ChunkedArray | pa.Array, label: Callable[[int], str], encoded: bool = False) -> pa.Array:
    """Integer ids as strings through a small dictionary (few distinct ids among many rows): the
    label function runs once per distinct id. `encoded` keeps the result a DictionaryArray."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    codes = values.dictionary_encode()
    labels = pa.array([label(int(v)) for v in codes.dictionary.to_pylist()], pa.string())
    if encoded:
        return pa.DictionaryArray.from_arrays(codes.indices, labels)
    return labels.take(codes.indices)


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n), pa.array([value]))


def runtime_sql(excluded: list[int], where: str = "") -> str:
    """The CUDA API rows that count (backtrace duplicates left out), NULLs made explicit."""
    cond = f"eventClass NOT IN ({','.join(map(str, excluded))})" + (f" AND {where}" if where else "")
    return (
        "SELECT start, end, nameId, eventClass, coalesce(globalTid, 0) AS globalTid, "
        f"coalesce(correlationId, -1) AS correlationId FROM {RUNTIME} WHERE {cond}"
    )


def _runtime_rows(db: Db, excluded: list[int]) -> pa.Table:
    """The runtime rows in rowid order. With ADBC, rowid ranges are read on separate connections in
    threads (the driver's C loop runs without the GIL)."""
    if db.adbc is None:
        return db.table(runtime_sql(excluded))
    lo, hi = db.rows(f"SELECT coalesce(min(rowid), 0), coalesce(max(rowid), -1) FROM {RUNTIME}")[0]
    step = max(RANGE_ROWS, (hi - lo) // _workers() + 1)
    ranges = [(a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)] or [(0, -1)]
    if len(ranges) == 1:
        return db.table(runtime_sql(excluded))

    def read(r: tuple[int, int]) -> pa.Table:
        part = Db(db.path)
        try:
            return part.table(runtime_sql(excluded, f"rowid BETWEEN {r[0]} AND {r[1]}"))
        finally:
            part.close()

    with ThreadPoolExecutor(min(len(ranges), _workers())) as ex:
        return pa.concat_tables(list(ex.map(read, ranges)))


def _workers() -> int:
    import os

    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def read_cuda_api(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """The runtime/driver calls, stably ordered by start (ties keep the file's rowid order). The string
    columns stay dictionary-encoded (`tables.dictionary_strings`): 10 M rows have a few dozen names."""
    if RUNTIME not in names:
        return t.empty(t.CUDA_API_SCHEMA)
    raw = _runtime_rows(db, excluded_event_classes(db, names))
    if not raw.num_rows:
        return t.empty(t.CUDA_API_SCHEMA)
    start = raw["start"]
    if not pc.all(pc.greater_equal(start[1:], start[:-1])).as_py():
        raw = raw.sort_by("start")
    strings = _strings(db)
    tnames = thread_names(db, names)

    def recorded(i: int) -> str:
        return strings.get(i, f"<nameId {i}>")

    start, end, gtid = raw["start"], raw["end"], raw["globalTid"]
    is_driver = pc.equal(raw["eventClass"], DRIVER_EVENT_CLASS).combine_chunks()
    kind = pa.DictionaryArray.from_arrays(pc.cast(is_driver, pa.int32()), pa.array(["runtime", "driver"]))
    return pa.table(
        {
            "start_ns": pc.add(start, clock.offset_ns),
            "end_ns": pc.add(end, clock.offset_ns),
            "dur_ns": pc.subtract(end, start),
            "name": _labels(raw["nameId"], recorded, encoded=True),
            "api": _labels(raw["nameId"], lambda i: t.api_display_name(recorded(i)), encoded=True),
            "kind": kind,
            "pid": _pid(gtid),
            "tid": _tid(gtid),
            "thread_name": _labels(gtid, lambda g: tnames.get(g, ""), encoded=True),
            "correlation_id": raw["correlationId"],
            "source": _constant("nsys", raw.num_rows),
        },
        schema=t.dictionary_strings(t.CUDA_API_SCHEMA),
    )


def _repeat(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n)


def read_kernels(db: Db, names: set[str], clock: Clock) -> pa.Table:
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in names:
        return t.empty(t.KERNELS_SCHEMA)
    strings = _strings(db)
    k = db.table(
        "SELECT start, end, demangledName, shortName, deviceId, streamId, coalesce(correlationId, -1) AS corr, "
        "coalesce(globalPid, 0) AS gpid, gridX, gridY, gridZ, blockX, blockY, blockZ "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"
    )
    if not k.num_rows:
        return t.empty(t.KERNELS_SCHEMA)
    return pa.table(
        {
            "start_ns": pc.add(k["start"], clock.offset_ns),
            "end_ns": pc.add(k["end"], clock.offset_ns),
            "dur_ns": pc.subtract(k["end"], k["start"]),
            "name": _labels(k["demangledName"], lambda i: strings.get(i, "")),
            "short_name": _labels(k["shortName"], lambda i: strings.get(i, "")),
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
            "source": _repeat("nsys", k.num_rows),
        },
        schema=t.KERNELS_SCHEMA,
    )


def _memcpy_labels(db: Db, names: set[str]) -> dict[int, str]:
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        return {int(i): str(label) for i, label in db.rows("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(t.MEMCPY_KINDS)


def read_memcpy(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """Copies then memsets, stably ordered by start."""
    parts: list[pa.Table] = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
        labels = _memcpy_labels(db, names)
        m = db.table(
            "SELECT start, end, copyKind, bytes, deviceId, streamId, coalesce(correlationId, -1) AS corr "
            "FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        )
        if m.num_rows:
            kind = _labels(m["copyKind"], lambda i: t.memcpy_kind_label(labels.get(i, str(i))))
            parts.append(_memops(m, kind, clock))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
        m = db.table(
            "SELECT start, end, bytes, deviceId, streamId, coalesce(correlationId, -1) AS corr "
            "FROM CUPTI_ACTIVITY_KIND_MEMSET"
        )
        if m.num_rows:
            parts.append(_memops(m, _repeat(t.MEMSET_KIND, m.num_rows), clock))
    if not parts:
        return t.empty(t.MEMCPY_SCHEMA)
    return pa.concat_tables(parts).sort_by("start_ns")


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
            "source": _repeat("nsys", m.num_rows),
        },
        schema=t.MEMCPY_SCHEMA,
    )


def read_nvtx(db: Db, names: set[str], clock: Clock) -> pa.Table:
    """Ranges only (push/pop and start/end: rows with an end); marks carry no duration."""
    if "NVTX_EVENTS" not in names:
        return t.empty(t.NVTX_SCHEMA)
    has_text_id = "textId" in columns(db, "NVTX_EVENTS")
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
            "source": _repeat("nsys", n.num_rows),
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
            "source": _repeat("nsys", o.num_rows),
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
