"""nsys SQLite ingest through ADBC's SQLite driver: equal to the sqlite3 fallback on every fixture, the
threaded rowid ranges equal to plain SQL, and the SQL summary straight from SQLite equal to
`api_summary` over the ingested table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers import cuda_api, tables
from analyzers.ingest import nsys, nsys_duckdb
from tests.analyzers.conftest import NSYS_FILES
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder


def test_adbc_is_used_and_read_only(shared_fixtures: Path) -> None:
    with nsys.open_readonly(shared_fixtures / NSYS_FILES[1]) as db:
        assert db.adbc is not None and db.lite is None
        with pytest.raises(UserError, match="readonly"):
            with nsys.open_readonly(shared_fixtures / NSYS_FILES[1]) as db2:
                db2.table("CREATE TABLE x (a INTEGER)")


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_adbc_equals_sqlite3_fallback(rel: str, shared_fixtures: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_clock = nsys.read_sqlite(shared_fixtures / rel)
    monkeypatch.setattr(nsys, "_adbc_connect", lambda path: None)
    with nsys.open_readonly(shared_fixtures / rel) as db:
        assert db.adbc is None
    slow, slow_clock = nsys.read_sqlite(shared_fixtures / rel)
    assert fast_clock == slow_clock and fast.keys() == slow.keys()
    for name, table in fast.items():
        assert table.schema == slow[name].schema
        assert table.equals(slow[name]), name
        assert tables.plain(table, tables.SCHEMAS[name]).schema == tables.SCHEMAS[name]


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_files_read_back_with_plain_schemas(rel: str, ingested: dict[str, RunFolder]) -> None:
    for name, schema in tables.SCHEMAS.items():
        path = ingested[rel].table_path(name)
        if path.exists():
            table = pq.read_table(path)
            assert table.schema == schema and table.num_rows


def _generated(path: Path, rows: int) -> None:
    """Out-of-order starts, NULL globalTid/correlationId, backtrace duplicates and driver rows."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
        INSERT INTO StringIds VALUES (0, 'cudaMalloc_v3020'), (1, 'cuLaunchKernel'), (2, 'main');
        INSERT INTO ThreadNames VALUES (2, 0, (7 << 24) | 9);
        """
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                (i * 7919) % rows,
                (i * 7919) % rows + i % 13,
                67 if i % 5 == 0 else (1 if i % 3 == 0 else 0),
                None if i % 11 == 0 else (7 << 24) | (9 + i % 2),
                None if i % 17 == 0 else i,
                i % 4,
            )
            for i in range(rows)
        ],
    )
    con.commit()
    con.close()


@pytest.mark.parametrize("path_taken", ["in-memory", "adbc-streamed", "duckdb-copied"])
def test_threaded_ranges_equal_plain_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path_taken: str) -> None:
    """Unordered starts over many rowid chunks read by two threads: ADBC's result is the stable sort;
    DuckDB's copy holds the same rows in no particular order (a missing name id included)."""
    path = tmp_path / "gen.sqlite"
    _generated(path, 5000)
    monkeypatch.setattr(nsys, "CHUNK_ROWS", 700)
    monkeypatch.setattr(nsys, "_workers", lambda: 2)
    if path_taken == "adbc-streamed":
        monkeypatch.setattr(nsys_duckdb, "sqlite_scanner", lambda: None)
    if path_taken == "in-memory":
        got = nsys.read_sqlite(path)[0]["cuda_api"]
    else:
        written, _clock = nsys.write_sqlite(path, tmp_path)
        assert written == ["cuda_api"]
        got = pq.read_table(tmp_path / "cuda_api.parquet")
        assert got.schema == tables.CUDA_API_SCHEMA
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    expected = con.execute(
        "SELECT start, end, end - start, nameId, eventClass = 1, coalesce(globalTid, 0), coalesce(correlationId, -1) "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass != 67 ORDER BY start, rowid"
    ).fetchall()
    con.close()
    names = {0: "cudaMalloc_v3020", 1: "cuLaunchKernel", 2: "main", 3: "<nameId 3>"}
    rows = list(zip(*(got[c].to_pylist() for c in got.column_names)))
    assert len(rows) == len(expected) == 4000
    want = []
    for s, e, d, k, drv, g, corr in expected:
        thread = "main" if g == (7 << 24) | 9 else ""
        api = "cudaMalloc" if k == 0 else names[k]
        kind = "driver" if drv else "runtime"
        want.append((s, e, d, names[k], api, kind, g >> 24 & 0xFFFFFF, g & 0xFFFFFF, thread, corr, "nsys"))
    assert (sorted(rows) if path_taken == "duckdb-copied" else rows) == (
        sorted(want) if path_taken == "duckdb-copied" else want
    )


@pytest.mark.skipif(nsys_duckdb.sqlite_scanner() is None, reason="DuckDB's sqlite_scanner extension wheel is absent")
@pytest.mark.parametrize("labels", ["literals", "parameters"])
@pytest.mark.parametrize("rel", NSYS_FILES)
def test_duckdb_copy_equals_adbc_stream(
    rel: str, labels: str, shared_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two ways to write the big tables give the same rows (as multisets: DuckDB's are unordered),
    whichever way the label maps reach DuckDB."""
    copied, streamed = tmp_path / "copied", tmp_path / "streamed"
    copied.mkdir(), streamed.mkdir()
    if labels == "parameters":
        monkeypatch.setattr(nsys_duckdb, "LITERAL_LABELS", 0)
    by_duckdb, clock = nsys.write_sqlite(shared_fixtures / rel, copied)
    monkeypatch.setattr(nsys_duckdb, "sqlite_scanner", lambda: None)
    by_adbc, adbc_clock = nsys.write_sqlite(shared_fixtures / rel, streamed)
    assert by_duckdb == by_adbc and clock == adbc_clock
    for name in by_duckdb:
        a, b = pq.read_table(copied / f"{name}.parquet"), pq.read_table(streamed / f"{name}.parquet")
        assert a.schema == b.schema == tables.SCHEMAS[name]
        keys = [(c, "ascending") for c in a.column_names]
        assert a.sort_by(keys).equals(b.sort_by(keys)), name


def _same(a: list[cuda_api.ApiRow], b: list[cuda_api.ApiRow]) -> None:
    assert [(r.name, r.total_ns, r.calls, r.med_ns, r.min_ns, r.max_ns) for r in a] == [
        (r.name, r.total_ns, r.calls, r.med_ns, r.min_ns, r.max_ns) for r in b
    ]
    for x, y in zip(a, b):
        assert x.avg_ns == pytest.approx(y.avg_ns, rel=1e-12)
        assert x.time_pct == pytest.approx(y.time_pct, rel=1e-12)
        assert x.stddev_ns == pytest.approx(y.stddev_ns, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_sql_summary_equals_api_summary(rel: str, shared_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    rows = cuda_api.api_summary_sqlite(shared_fixtures / rel)
    assert rows
    _same(rows, cuda_api.api_summary(ingested[rel]))


def test_sql_summary_by_phase(shared_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    folder = ingested[NSYS_FILES[0]]
    cut = [p for p in cuda_api.phases(folder) if p.name == "steady"][0].start_ns
    assert cut is not None
    for start, end in ((None, cut), (cut, None)):
        _same(
            cuda_api.api_summary_sqlite(shared_fixtures / NSYS_FILES[0], start, end),
            cuda_api.api_summary(folder, start, end),
        )


def test_sql_summary_of_generated_file(tmp_path: Path) -> None:
    path = tmp_path / "gen.sqlite"
    _generated(path, 999)
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    from analyzers.ingest import ingest_file

    ingest_file(path, folder)
    _same(cuda_api.api_summary_sqlite(path), cuda_api.api_summary(folder))


def test_sql_summary_of_foreign_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(UserError, match="not an Nsight Systems export"):
        cuda_api.api_summary_sqlite(path)
