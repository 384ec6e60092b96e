"""DuckDB over an nsys SQLite export: the sqlite_scanner extension, a bounded connection, the export
attached read-only. Shared by the import (`nsys_duckdb`, `nsys_arrow`) and by `tracer analyze FILE`'s
summary (`nsys_summary`), which needs only these and so starts without Arrow."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

MEMORY_LIMIT = "512MB"
"""DuckDB's cap while copying (an unordered copy of 10 M calls peaks near 120 MiB; the cap bounds the rest)."""
EXTENSION_PACKAGE = "duckdb_extension_sqlite_scanner"


def sqlite_scanner() -> Path | None:
    """The sqlite_scanner extension file built for the DuckDB imported here, or None."""
    spec = importlib.util.find_spec(EXTENSION_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        found = Path(root) / "extensions" / f"v{duckdb.__version__}" / "sqlite_scanner.duckdb_extension"
        if found.is_file():
            return found
    return None


def quoted(path: Path) -> str:
    """`path` inside a single-quoted SQL string."""
    return str(path).replace("'", "''")


def connect(scratch: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection capped at MEMORY_LIMIT that spills under `scratch` (its default is `.tmp`
    in the cwd) and may write rows in any order."""
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": MEMORY_LIMIT,
        "temp_directory": str(scratch / ".duckdb_tmp"),
    }
    con = duckdb.connect(config=config)
    con.execute("SET preserve_insertion_order = false")
    return con


def attach_sqlite(con: duckdb.DuckDBPyConnection, db_path: Path, extension: Path) -> None:
    """The SQLite export as schema `nsys`, read-only, through the sqlite_scanner `extension` file."""
    con.execute(f"LOAD '{quoted(extension)}'")
    con.execute(f"ATTACH '{quoted(db_path)}' AS nsys (TYPE sqlite, READ_ONLY)")
