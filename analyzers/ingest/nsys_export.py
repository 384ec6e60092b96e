"""The contract of an Nsight Systems export (SQLite of every schema era seen: 2021, 2.9.x with
EXPORT_META_DATA, 3.x with ENUM_* tables; or the Arrow export, which has the same tables): which
tables make one, its clock, how a GlobalId packs pid and tid, which CUDA API rows count, and the
small label maps (strings, thread names, copy kinds). The big tables are copied by `nsys_duckdb`.

Why the care: the 2021 era records each CUDA API call twice when `--cudabacktrace` was on (eventClass
67 = TRACE_PROCESS_EVENT_CUDABACKTRACE, plain name + callchain); only the CUPTI rows count.
A SQLite export is opened read-only (`file:...?mode=ro` URI); any SQLite error is a one-line UserError.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from analyzers.trace import table_names as t
from analyzers.trace.clock import Clock, nsys_clock
from tracer.core.errors import UserError

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
BACKTRACE_EVENT_CLASS = 67
DRIVER_EVENT_CLASS = 1
GTID_BITS = 24
"""nsys's serialised GlobalId (globalTid/globalPid): pid in bits 24..47, tid in bits 0..23."""
GTID_MASK = (1 << GTID_BITS) - 1


def pid_sql(col: str) -> str:
    """The pid packed in GlobalId column `col`, in SQL (0 for a NULL id)."""
    return f"((coalesce({col}, 0) >> {GTID_BITS}) & {GTID_MASK})"


def tid_sql(col: str) -> str:
    return f"(coalesce({col}, 0) & {GTID_MASK})"


def readonly_uri(path: Path) -> str:
    """SQLite URI that opens `path` read-only (URI-quoted, so `?`, `#` and `%` in names are safe)."""
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"


class Export(Protocol):
    """What the label and clock readers ask of an export, in SQLite (`SqliteExport`) or in Arrow
    (`analyzers.ingest.nsys_arrow.ArrowDb`): its table and column names, and the rows of a query."""

    path: Path

    def tables(self) -> set[str]: ...

    def columns(self, table: str) -> set[str]: ...

    def rows(self, sql: str) -> list[tuple[Any, ...]]: ...


class SqliteExport:
    """A SQLite export opened read-only, for the small questions (the big tables go through DuckDB)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con = sqlite3.connect(readonly_uri(path), uri=True)

    def tables(self) -> set[str]:
        return {r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}

    def columns(self, table: str) -> set[str]:
        return {r[0] for r in self.rows(f"SELECT name FROM pragma_table_info('{table}')")}

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        self.con.close()


@contextmanager
def open_readonly(path: Path) -> Iterator[SqliteExport]:
    """`path` read-only; a SQLite error inside the block is one UserError line."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        db = SqliteExport(path)
    except sqlite3.Error as e:
        raise UserError(f"{path}: cannot open as SQLite ({e})") from None
    try:
        yield db
    except sqlite3.Error as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: damaged or truncated SQLite file ({msg})") from None
    finally:
        db.close()


def check_nsys(path: Path, db: Export) -> set[str]:
    """The tables of an nsys export, or UserError for any other file."""
    names = db.tables()
    if "StringIds" not in names or not ({RUNTIME, OSRT, "ThreadNames"} & names):
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


def text(value: Any) -> str:
    """A StringIds value as text: one stored as a BLOB is decoded as UTF-8, strictly (a value that is not
    UTF-8 raises UnicodeDecodeError, which the direct summary turns into a one-line "damaged export", as the
    import does when DuckDB reads the same value)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def thread_names(db: Export, names: set[str]) -> dict[int, str]:
    """globalTid -> thread name (the last name recorded wins: threads are renamed after start)."""
    if "ThreadNames" not in names:
        return {}
    rows = db.rows(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
        "WHERE t.globalTid IS NOT NULL ORDER BY t.rowid"
    )
    return {int(g): str(v) for g, v in rows}


def strings(db: Export) -> dict[int, str]:
    return {int(i): str(v) for i, v in db.rows("SELECT id, value FROM StringIds")}


def memcpy_kinds(db: Export, names: set[str]) -> dict[int, str]:
    """copyKind id -> our label for it (the export's own enum where it has one)."""
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        labels = {int(i): str(label) for i, label in db.rows("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    else:
        labels = dict(t.MEMCPY_KINDS)
    return {i: t.memcpy_kind_label(label) for i, label in labels.items()}
