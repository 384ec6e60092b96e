"""nsys SQLite ingest (DuckDB's copy, the export contract's label maps): read-only, equal to plain SQL
on a generated file whichever way the labels reach DuckDB, and the SQL summary straight from SQLite
equal to `api_summary` over the ingested table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.ingest import nsys_duckdb, nsys_export
from analyzers.summaries import cuda_api
from analyzers.trace import tables
from tests.analyzers.conftest import NSYS_FILES
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder


def test_export_is_opened_read_only(real_fixtures: Path) -> None:
    with pytest.raises(UserError, match="readonly"):
        with nsys_export.open_readonly(real_fixtures / NSYS_FILES[1]) as db:
            db.rows("CREATE TABLE x (a INTEGER)")


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


@pytest.mark.parametrize("labels", ["literals", "parameters"])
def test_copy_equals_plain_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labels: str) -> None:
    """Unordered starts, NULL ids, backtrace duplicates, driver rows and a missing name id: DuckDB's
    copy holds the rows plain SQL selects (in no particular order), whichever way the label maps
    reach DuckDB (SQL literals, or parameters for big maps)."""
    path = tmp_path / "gen.sqlite"
    _generated(path, 5000)
    if labels == "parameters":
        monkeypatch.setattr(nsys_duckdb, "LITERAL_LABELS", 0)
    written, _clock = nsys_duckdb.write_sqlite(path, tmp_path)
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
    assert sorted(rows) == sorted(want)


@pytest.mark.parametrize("rel", NSYS_FILES)
def test_label_literals_equal_parameters(
    rel: str, real_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways the label maps reach DuckDB give the same tables on every fixture."""
    literal, param = tmp_path / "literal", tmp_path / "param"
    literal.mkdir(), param.mkdir()
    by_literal, clock = nsys_duckdb.write_sqlite(real_fixtures / rel, literal)
    monkeypatch.setattr(nsys_duckdb, "LITERAL_LABELS", 0)
    by_param, param_clock = nsys_duckdb.write_sqlite(real_fixtures / rel, param)
    assert by_literal == by_param and clock == param_clock and by_literal
    for name in by_literal:
        a, b = pq.read_table(literal / f"{name}.parquet"), pq.read_table(param / f"{name}.parquet")
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
def test_sql_summary_equals_api_summary(rel: str, real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    rows = cuda_api.api_summary_sqlite(real_fixtures / rel)
    assert rows
    _same(rows, cuda_api.api_summary(ingested[rel]))


def test_sql_summary_by_phase(real_fixtures: Path, ingested: dict[str, RunFolder]) -> None:
    folder = ingested[NSYS_FILES[0]]
    cut = [p for p in cuda_api.phases(folder) if p.name == "steady"][0].start_ns
    assert cut is not None
    for start, end in ((None, cut), (cut, None)):
        _same(
            cuda_api.api_summary_sqlite(real_fixtures / NSYS_FILES[0], start, end),
            cuda_api.api_summary(folder, start, end),
        )


def test_sql_summary_of_generated_file(tmp_path: Path) -> None:
    path = tmp_path / "gen.sqlite"
    _generated(path, 999)
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    from analyzers.ingest.pipeline import ingest_file

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
