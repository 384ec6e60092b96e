"""The page-level SQLite reader against sqlite3 itself: on the real nsys fixtures (the whole CUDA API
table, fast path against the row-by-row path) and on generated tables with every integer encoding."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from analyzers.ingest import nsys
from analyzers.ingest.sqlite_pages import read_int_columns
from tests.analyzers.conftest import NSYS_FILES

KEY = [("start_ns", "ascending"), ("correlation_id", "ascending"), ("end_ns", "ascending"), ("name", "ascending")]


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_fast_path_equals_sqlite3_on_fixtures(shared_fixtures: Path, rel: str) -> None:
    path = shared_fixtures / rel
    with nsys.open_readonly(path) as con:
        names = nsys.check_nsys(path, con)
        clock = nsys.session_clock(con, names)
        assert nsys.runtime_columns(con, path, nsys.excluded_event_classes(con, names)) is not None
        fast = nsys.read_cuda_api(con, names, clock, path)
        slow = nsys.read_cuda_api(con, names, clock)
    assert fast.num_rows > 0
    assert fast.schema == slow.schema
    assert fast.sort_by(KEY).equals(slow.sort_by(KEY))
    assert (np.diff(fast["start_ns"].to_numpy()) >= 0).all()


VALUES = [0, 1, -1, 127, -128, 128, 32767, -32768, 40000, 8388607, -8388608, 2**31 - 1, -(2**31), 2**40, -(2**47)]
VALUES += [2**47 - 1, 2**62, -(2**63), 2**63 - 1, None]


def _make(path: Path, rows: int, extra_sql: str = "") -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE T (a INTEGER NOT NULL, b INTEGER, note TEXT, c INTEGER)")
    rng = np.random.default_rng(7)
    data = []
    for i in range(rows):
        b = VALUES[int(rng.integers(len(VALUES)))]
        note = "x" * int(rng.integers(0, 40))
        data.append((i * 1000 + int(rng.integers(0, 999)), b, note, VALUES[i % len(VALUES)]))
    con.executemany("INSERT INTO T VALUES (?, ?, ?, ?)", data)
    if extra_sql:
        con.executescript(extra_sql)
    con.commit()
    con.close()


def _expected(path: Path, cols: list[str]) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(f"SELECT {', '.join(cols)} FROM T ORDER BY rowid").fetchall()
    con.close()
    return rows


def _read(path: Path, cols: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return read_int_columns(con, path, "T", cols)
    finally:
        con.close()


def _as_rows(got: dict[str, tuple[np.ndarray, np.ndarray]], cols: list[str]) -> list[tuple]:
    lists = [[None if m else int(v) for v, m in zip(*got[c])] for c in cols]
    return list(zip(*lists))


@pytest.mark.parametrize("rows", [0, 1, 30_000])
def test_every_integer_encoding(tmp_path: Path, rows: int) -> None:
    path = tmp_path / "t.sqlite"
    _make(path, rows)
    cols = ["a", "b", "c"]
    got = _read(path, cols)
    assert got is not None
    assert _as_rows(got, cols) == _expected(path, cols)


def test_rows_older_than_an_added_column_read_null(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _make(path, 500, "ALTER TABLE T ADD COLUMN d INTEGER; INSERT INTO T VALUES (1, 2, 'y', 3, 4), (5, 6, '', 7, NULL);")
    cols = ["c", "d", "a"]
    got = _read(path, cols)
    assert got is not None
    assert _as_rows(got, cols) == _expected(path, cols)


@pytest.mark.parametrize(
    "extra",
    [
        "INSERT INTO T VALUES (1, 2.5, '', 3);",  # a float in a wanted column
        "INSERT INTO T VALUES (1, 2, '" + "z" * 300 + "', 3);",  # long text before a wanted column
        "INSERT INTO T VALUES (1, 2, '" + "z" * 9000 + "', 3);",  # overflow pages
    ],
)
def test_layouts_left_to_sqlite3(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "t.sqlite"
    _make(path, 200, extra)
    assert _read(path, ["a", "b", "c"]) is None


def test_wal_and_without_rowid_left_to_sqlite3(tmp_path: Path) -> None:
    wal = tmp_path / "w.sqlite"
    con = sqlite3.connect(wal)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE T (a INTEGER)")
    con.executemany("INSERT INTO T VALUES (?)", [(i,) for i in range(100)])
    con.commit()
    assert _read(wal, ["a"]) is None
    con.close()
    nr = tmp_path / "n.sqlite"
    con = sqlite3.connect(nr)
    con.execute("CREATE TABLE T (a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID")
    con.commit()
    con.close()
    assert _read(nr, ["a", "b"]) is None


def test_damaged_file_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    _make(path, 5000)
    raw = bytearray(path.read_bytes())
    raw[4096 * 3 : 4096 * 6] = b"\xff" * (4096 * 3)
    path.write_bytes(bytes(raw))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        got = read_int_columns(con, path, "T", ["a"])
    finally:
        con.close()
    assert got is None or isinstance(got["a"][0], np.ndarray)


def test_table_schema_is_plain_strings(shared_fixtures: Path) -> None:
    path = shared_fixtures / NSYS_FILES[0]
    with nsys.open_readonly(path) as con:
        names = nsys.check_nsys(path, con)
        table = nsys.read_cuda_api(con, names, nsys.session_clock(con, names), path)
    assert all(not pa.types.is_dictionary(f.type) for f in table.schema)
