"""Nsight Systems SQLite exports (every schema era seen: 2021, 2.9.x with EXPORT_META_DATA, 3.x with
ENUM_* tables) into the normalised tables.

Why the care: the 2021 era records each CUDA API call twice when `--cudabacktrace` was on (eventClass
67 = TRACE_PROCESS_EVENT_CUDABACKTRACE, plain name + callchain); only the CUPTI rows count. The file is
opened read-only (`mode=ro` URI); any SQLite error becomes one-line UserError.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from analyzers import tables as t
from analyzers.clock import Clock, nsys_clock
from tracer.errors import UserError

BACKTRACE_EVENT_CLASS = 67
DRIVER_EVENT_CLASS = 1
CHUNK_ROWS = 1_000_000


def decode_global_tid(global_tid: int) -> tuple[int, int]:
    """nsys's serialised GlobalId: pid in bits 24..47, tid in bits 0..23."""
    return (global_tid >> 24) & 0xFFFFFF, global_tid & 0xFFFFFF


@contextmanager
def open_readonly(path: Path) -> Iterator[sqlite3.Connection]:
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot open as SQLite ({e})") from None
    try:
        yield con
    except sqlite3.DatabaseError as e:
        raise UserError(f"{path}: damaged or truncated SQLite file ({e})") from None
    finally:
        con.close()


def table_names(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def check_nsys(path: Path, con: sqlite3.Connection) -> set[str]:
    """The tables of an nsys export, or UserError for any other SQLite file."""
    names = table_names(con)
    if "StringIds" not in names or not ({"CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API", "ThreadNames"} & names):
        raise UserError(f"{path}: a SQLite file, but not an Nsight Systems export (no StringIds/CUPTI tables)")
    return names


def session_clock(con: sqlite3.Connection, names: set[str]) -> Clock:
    if "TARGET_INFO_SESSION_START_TIME" in names:
        row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0] is not None:
            return nsys_clock(int(row[0]))
    return nsys_clock(None)


def excluded_event_classes(con: sqlite3.Connection, names: set[str]) -> list[int]:
    """Backtrace duplicates: by name from ENUM_NSYS_EVENT_CLASS where present, else class 67."""
    if "ENUM_NSYS_EVENT_CLASS" in names:
        rows = con.execute("SELECT id FROM ENUM_NSYS_EVENT_CLASS WHERE name LIKE '%BACKTRACE%'").fetchall()
        return sorted({r[0] for r in rows} | {BACKTRACE_EVENT_CLASS})
    return [BACKTRACE_EVENT_CLASS]


def thread_names(con: sqlite3.Connection, names: set[str]) -> dict[int, str]:
    """globalTid -> thread name (the last name recorded wins: threads are renamed after start)."""
    if "ThreadNames" not in names:
        return {}
    rows = con.execute(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId ORDER BY t.rowid"
    )
    return {int(g): v for g, v in rows if g is not None}


def _strings(con: sqlite3.Connection) -> dict[int, str]:
    return dict(con.execute("SELECT id, value FROM StringIds"))


RUNTIME_COLUMNS = ["start", "end", "nameId", "eventClass", "globalTid", "correlationId"]


def read_cuda_api(con: sqlite3.Connection, names: set[str], clock: Clock, path: Path | None = None) -> pa.Table:
    """The runtime/driver calls, ordered by start. With `path`, the integer columns are decoded from the
    file's pages at once (`sqlite_pages`); sqlite3 row by row is the fallback for layouts it leaves out."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in names:
        return t.empty(t.CUDA_API_SCHEMA)
    excluded = excluded_event_classes(con, names)
    strings = _strings(con)
    tnames = thread_names(con, names)
    cols = runtime_columns(con, path, excluded) if path is not None else None
    if cols is not None:
        if not len(cols[0]):
            return t.empty(t.CUDA_API_SCHEMA)
        return _cuda_api_table(*cols, strings, tnames, clock)
    cur = con.execute(
        "SELECT start, end, nameId, eventClass, coalesce(globalTid, 0), coalesce(correlationId, -1) "
        f"FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass NOT IN ({','.join(map(str, excluded))}) ORDER BY start"
    )
    parts: list[pa.Table] = []
    while rows := cur.fetchmany(CHUNK_ROWS):
        a = [np.array(c, dtype=np.int64) for c in zip(*rows)]
        parts.append(_cuda_api_table(a[0], a[1], a[2], a[3], a[4], a[5], strings, tnames, clock))
    if not parts:
        return t.empty(t.CUDA_API_SCHEMA)
    return pa.concat_tables(parts)


def runtime_columns(
    con: sqlite3.Connection, path: Path, excluded: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """start, end, nameId, eventClass, globalTid (NULL -> 0), correlationId (NULL -> -1) of the runtime
    rows not in `excluded` classes, stably ordered by start; None when the page reader can't."""
    from analyzers.ingest.sqlite_pages import read_int_columns

    got = read_int_columns(con, path, "CUPTI_ACTIVITY_KIND_RUNTIME", RUNTIME_COLUMNS)
    if got is None or any(got[c][1].any() for c in ("start", "end", "nameId", "eventClass")):
        return None
    start, end, name_id, event_class = (got[c][0] for c in ("start", "end", "nameId", "eventClass"))
    gtid = got["globalTid"][0]  # NULLs read as 0 already
    corr, corr_null = got["correlationId"]
    if corr_null.any():
        corr[corr_null] = -1
    cols = [start, end, name_id, event_class, gtid, corr]
    keep = ~np.isin(event_class, excluded)
    if not keep.all():
        cols = [a[keep] for a in cols]
    if len(cols[0]) and not (cols[0][1:] >= cols[0][:-1]).all():
        order = np.argsort(cols[0], kind="stable")
        cols = [a[order] for a in cols]
    return cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]


def _dictionary(values: np.ndarray, label: Callable[[int], str]) -> pa.Array:
    """values as strings through a small dictionary (few distinct ids among many rows)."""
    encoded = pa.array(values).dictionary_encode()
    labels = pa.array([label(int(v)) for v in encoded.dictionary.to_numpy()], pa.string())
    return pa.DictionaryArray.from_arrays(encoded.indices, labels).cast(pa.string())


def _cuda_api_table(
    start: np.ndarray,
    end: np.ndarray,
    name_id: np.ndarray,
    event_class: np.ndarray,
    gtid: np.ndarray,
    corr: np.ndarray,
    strings: dict[int, str],
    tnames: dict[int, str],
    clock: Clock,
) -> pa.Table:
    n = len(start)

    def recorded(i: int) -> str:
        return strings.get(i, f"<nameId {i}>")

    kind = pa.DictionaryArray.from_arrays(
        pa.array((event_class == DRIVER_EVENT_CLASS).astype(np.int8)), pa.array(["runtime", "driver"])
    )
    source = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int8)), pa.array(["nsys"]))
    return pa.table(
        {
            "start_ns": start + clock.offset_ns,
            "end_ns": end + clock.offset_ns,
            "dur_ns": end - start,
            "name": _dictionary(name_id, recorded),
            "api": _dictionary(name_id, lambda i: t.api_display_name(recorded(i))),
            "kind": kind.cast(pa.string()),
            "pid": (gtid >> 24) & 0xFFFFFF,
            "tid": gtid & 0xFFFFFF,
            "thread_name": _dictionary(gtid, lambda g: tnames.get(g, "")),
            "correlation_id": corr,
            "source": source.cast(pa.string()),
        },
        schema=t.CUDA_API_SCHEMA,
    )


def read_kernels(con: sqlite3.Connection, names: set[str], clock: Clock) -> pa.Table:
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in names:
        return t.empty(t.KERNELS_SCHEMA)
    strings = _strings(con)
    rows = con.execute(
        "SELECT start, end, demangledName, shortName, deviceId, streamId, coalesce(correlationId, -1), "
        "coalesce(globalPid, 0), gridX, gridY, gridZ, blockX, blockY, blockZ "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start"
    ).fetchall()
    cols = list(zip(*rows)) if rows else [()] * 14
    start, end = cols[0], cols[1]
    return pa.table(
        {
            "start_ns": [s + clock.offset_ns for s in start],
            "end_ns": [e + clock.offset_ns for e in end],
            "dur_ns": [e - s for s, e in zip(start, end)],
            "name": [strings.get(i, "") for i in cols[2]],
            "short_name": [strings.get(i, "") for i in cols[3]],
            "device": cols[4],
            "stream": cols[5],
            "correlation_id": cols[6],
            "pid": [(g >> 24) & 0xFFFFFF for g in cols[7]],
            "grid_x": cols[8],
            "grid_y": cols[9],
            "grid_z": cols[10],
            "block_x": cols[11],
            "block_y": cols[12],
            "block_z": cols[13],
            "source": ["nsys"] * len(start),
        },
        schema=t.KERNELS_SCHEMA,
    )


def _memcpy_labels(con: sqlite3.Connection, names: set[str]) -> dict[int, str]:
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        return {int(i): str(label) for i, label in con.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(t.MEMCPY_KINDS)


def read_memcpy(con: sqlite3.Connection, names: set[str], clock: Clock) -> pa.Table:
    rows: list[tuple[Any, ...]] = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
        labels = _memcpy_labels(con, names)
        for start, end, kind, nbytes, dev, stream, corr in con.execute(
            "SELECT start, end, copyKind, bytes, deviceId, streamId, coalesce(correlationId, -1) "
            "FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            rows.append((start, end, t.memcpy_kind_label(labels.get(kind, str(kind))), nbytes, dev, stream, corr))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
        for start, end, nbytes, dev, stream, corr in con.execute(
            "SELECT start, end, bytes, deviceId, streamId, coalesce(correlationId, -1) FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            rows.append((start, end, t.MEMSET_KIND, nbytes, dev, stream, corr))
    rows.sort(key=lambda r: r[0])
    cols = list(zip(*rows)) if rows else [()] * 7
    return pa.table(
        {
            "start_ns": [s + clock.offset_ns for s in cols[0]],
            "end_ns": [e + clock.offset_ns for e in cols[1]],
            "dur_ns": [e - s for s, e in zip(cols[0], cols[1])],
            "kind": cols[2],
            "bytes": cols[3],
            "device": cols[4],
            "stream": cols[5],
            "correlation_id": cols[6],
            "source": ["nsys"] * len(rows),
        },
        schema=t.MEMCPY_SCHEMA,
    )


def read_nvtx(con: sqlite3.Connection, names: set[str], clock: Clock) -> pa.Table:
    """Ranges only (push/pop and start/end: rows with an end); marks carry no duration."""
    if "NVTX_EVENTS" not in names:
        return t.empty(t.NVTX_SCHEMA)
    has_text_id = "textId" in columns(con, "NVTX_EVENTS")
    name_expr = "coalesce(n.text, s.value, '')" if has_text_id else "coalesce(n.text, '')"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if has_text_id else ""
    rows = con.execute(
        f"SELECT n.start, n.end, {name_expr}, coalesce(n.globalTid, 0) FROM NVTX_EVENTS n {join} "
        "WHERE n.end IS NOT NULL ORDER BY n.start"
    ).fetchall()
    cols = list(zip(*rows)) if rows else [()] * 4
    return pa.table(
        {
            "start_ns": [s + clock.offset_ns for s in cols[0]],
            "end_ns": [e + clock.offset_ns for e in cols[1]],
            "name": cols[2],
            "pid": [decode_global_tid(g)[0] for g in cols[3]],
            "tid": [decode_global_tid(g)[1] for g in cols[3]],
            "source": ["nsys"] * len(rows),
        },
        schema=t.NVTX_SCHEMA,
    )


def read_osrt(con: sqlite3.Connection, names: set[str], clock: Clock) -> pa.Table:
    if "OSRT_API" not in names:
        return t.empty(t.OSRT_SCHEMA)
    strings = _strings(con)
    tnames = thread_names(con, names)
    rows = con.execute("SELECT start, end, nameId, coalesce(globalTid, 0) FROM OSRT_API ORDER BY start").fetchall()
    cols = list(zip(*rows)) if rows else [()] * 4
    return pa.table(
        {
            "start_ns": [s + clock.offset_ns for s in cols[0]],
            "end_ns": [e + clock.offset_ns for e in cols[1]],
            "name": [strings.get(i, "") for i in cols[2]],
            "pid": [decode_global_tid(g)[0] for g in cols[3]],
            "tid": [decode_global_tid(g)[1] for g in cols[3]],
            "thread_name": [tnames.get(g, "") for g in cols[3]],
            "source": ["nsys"] * len(rows),
        },
        schema=t.OSRT_SCHEMA,
    )


def read_sqlite(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """Every normalised table the export has (empty ones left out), and the clock used."""
    with open_readonly(path) as con:
        names = check_nsys(path, con)
        clock = session_clock(con, names)
        out = {
            t.CUDA_API: read_cuda_api(con, names, clock, path),
            t.KERNELS: read_kernels(con, names, clock),
            t.MEMCPY: read_memcpy(con, names, clock),
            t.NVTX: read_nvtx(con, names, clock),
            t.OSRT: read_osrt(con, names, clock),
        }
    return {k: v for k, v in out.items() if v.num_rows}, clock
