"""nsys's Arrow export (`nsys export --type arrow`), ingested through the same DuckDB copy as SQLite.

Why: where the nsys that made a report offers it (Debian's 2022.4 does), the Arrow export skips
SQLite on both sides: nsys writes columns instead of inserting rows, and we scan them in place
instead of stepping through SQLite's b-tree. The file is one Arrow IPC stream per table, one after
another, each schema tagged with its `table_name`; tables and columns are the SQLite export's. It
is memory-mapped and every stream is read without copying. DuckDB scans the tables it copies where
they lie; the few small tables whose file order matters (`ORDERED`) are loaded into DuckDB so that
`rowid` is that order, as in SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from analyzers.ingest import duckdb_sqlite, nsys_duckdb
from analyzers.ingest import nsys_export as ex
from analyzers.trace.clock import Clock
from tracer.core.errors import UserError

TABLE_NAME = b"table_name"
"""nsys's schema metadata key naming each stream's table."""
SCAN_ROWS = 122_880
"""Rows per slice DuckDB scans (a multiple of its 2,048-row vectors, its default row group size)."""
ORDERED = {"ThreadNames"}
"""Small tables read in file order (`ORDER BY rowid`): loaded into DuckDB rather than scanned."""


def read_streams(path: Path) -> dict[str, pa.Table]:
    """Every table of the export, by name, zero-copy over a memory map; text columns (nsys writes
    them as binary) as strings. UserError when the file is not such an export."""
    tables: dict[str, pa.Table] = {}
    try:
        src = pa.memory_map(str(path))
        while src.tell() < src.size():
            reader = ipc.open_stream(src)
            name = (reader.schema.metadata or {}).get(TABLE_NAME)
            if name is None:
                raise UserError(f"{path}: an Arrow stream without a table name: not an Nsight Systems export")
            table = _text(reader.read_all())  # nsys writes one batch a table: sliced for DuckDB's threads
            tables[name.decode()] = pa.Table.from_batches(table.to_batches(max_chunksize=SCAN_ROWS), table.schema)
    except (pa.ArrowInvalid, OSError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"{path}: not a readable Arrow export of Nsight Systems ({first})") from None
    return tables


def _text(table: pa.Table) -> pa.Table:
    """Binary columns as UTF-8 strings (invalid bytes replaced, as a text column read from SQLite would
    not fail either)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            try:
                text = pc.cast(table.column(i), pa.string())
            except pa.ArrowInvalid:
                values = [v.decode("utf-8", "replace") if v is not None else None for v in table.column(i).to_pylist()]
                text = pa.chunked_array([pa.array(values, pa.string())])
            table = table.set_column(i, pa.field(field.name, pa.string(), field.nullable), text)
    return table


class ArrowDb:
    """The export as schema `nsys` (and the default schema) of one DuckDB connection; answers the
    questions `nsys_export.Export` asks, in DuckDB's SQL (the queries there are plain enough for both)."""

    def __init__(self, path: Path, scratch: Path) -> None:
        self.path = path
        self.streams = read_streams(path)
        self.con = duckdb_sqlite.connect(scratch)
        self.con.execute("ATTACH ':memory:' AS nsys")
        self.con.execute("USE nsys")
        self.con.execute("SET preserve_insertion_order = true")  # rowid = file order for `ORDERED`
        for i, (name, table) in enumerate(self.streams.items()):
            scan = f"arrow_{i}"
            self.con.register(scan, table)
            kind = "TABLE" if name in ORDERED else "VIEW"
            self.con.execute(f'CREATE {kind} nsys."{name}" AS SELECT * FROM {scan}')
        self.con.execute("SET preserve_insertion_order = false")

    def tables(self) -> set[str]:
        return set(self.streams)

    def columns(self, table: str) -> set[str]:
        return set(self.streams[table].schema.names) if table in self.streams else set()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        self.con.close()


def write_arrow(path: Path, out_dir: Path) -> tuple[list[str], Clock]:
    """`nsys_duckdb.write_sqlite`'s tables and clock, from an Arrow export."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    db = ArrowDb(path, out_dir)
    try:
        names = ex.check_nsys(path, db)
        clock = ex.session_clock(db, names)
        return nsys_duckdb.copied_by_duckdb(db.con, db, names, clock, out_dir), clock
    except nsys_duckdb.duckdb.Error as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"{path}: damaged Arrow export ({first})") from None
    finally:
        db.close()
