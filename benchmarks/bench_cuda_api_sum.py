"""CUDA API summary over a generated nsys-schema SQLite (default 10 million runtime rows) against a
plain pandas `read_sql` + groupby baseline, in the same run.

    ~/.cache/dl-tracer/venv/bin/python benchmarks/bench_cuda_api_sum.py [--rows N] [--db PATH]

Paths timed, each from the SQLite file to the summary rows:
  (a) `api_summary_sqlite`: the summary as SQL run by SQLite (aggregates + ROW_NUMBER median);
  (b) ingest (DuckDB's sqlite scanner) -> cuda_api.parquet, then `api_summary` (DuckDB) over it;
  the pandas `read_sql` + groupby baseline. `uptime` is printed before and after: the machine is shared.
The generated file is kept (default /tmp/bench_nsys_<N>.sqlite) so reruns skip generation.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyzers.ingest.pipeline import ingest_file  # noqa: E402
from analyzers.summaries.cuda_api import api_summary, api_summary_sqlite  # noqa: E402
from tracer.core.runfolder import RunFolder  # noqa: E402

NAMES = [
    "cudaLaunchKernel_v7000",
    "cudaMemcpyAsync_v3020",
    "cudaStreamSynchronize_v3020",
    "cudaMalloc_v3020",
    "cudaFree_v3020",
    "cudaEventRecord_v3020",
    "cudaStreamCreateWithFlags_v5000",
    "cudaLaunchKernelExC_v11060",
    "cuLaunchKernel",
    "cuGetProcAddress_v2",
]


def generate(path: Path, rows: int) -> None:
    """Same tables and columns nsys 3.x writes; durations skewed like real traces."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL, callchainId INTEGER);
        """
    )
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(NAMES + ["python3"])))
    gtid = (1234 << 24) | 1234
    con.execute("INSERT INTO ThreadNames VALUES (?, 0, ?)", (len(NAMES), gtid))
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '')")
    con.execute(
        f"""
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME
        WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c LIMIT {rows})
        SELECT i * 1000, i * 1000 + 500 + (abs(random()) % 100000) / (1 + abs(random()) % 50),
               CASE WHEN i % 10 = 8 THEN 1 ELSE 0 END, {gtid} + (i % 4), i, i % {len(NAMES)}, 0, NULL
        FROM c
        """
    )
    con.commit()
    con.close()
    tmp.rename(path)


def baseline(path: Path) -> None:
    """What one would write with pandas: read the table, group, aggregate (median and std included)."""
    import pandas as pd

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    df = pd.read_sql("SELECT start, end, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass != 67", con)
    names = pd.read_sql("SELECT id, value FROM StringIds", con).set_index("id")["value"]
    con.close()
    df["dur"] = df["end"] - df["start"]
    g = df.groupby("nameId")["dur"].agg(["sum", "count", "mean", "median", "min", "max", "std"])
    g["pct"] = g["sum"] * 100.0 / g["sum"].sum()
    g.index = g.index.map(names)
    g.sort_values("sum", ascending=False)


T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, tuple[float, float]]:
    """fn's result, wall seconds and CPU seconds of this process (all its threads: DuckDB's, SQLite's
    sorter's, our reader's): on a shared machine CPU time says what the work cost, wall what it took."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0, time.process_time() - c0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--db", type=Path)
    args = ap.parse_args()
    db = args.db or Path(tempfile.gettempdir()) / f"bench_nsys_{args.rows}.sqlite"
    if not db.exists():
        t0 = time.perf_counter()
        generate(db, args.rows)
        print(f"generated {db} ({args.rows:,} rows) in {time.perf_counter() - t0:.1f} s")
    print(f"load average before: {os.getloadavg()}")
    sql_rows, t_sql = timed(lambda: api_summary_sqlite(db))
    with tempfile.TemporaryDirectory() as tmp:
        folder = RunFolder(Path(tmp))
        _, t_ingest = timed(lambda: ingest_file(db, folder))
        rows, t_summary = timed(lambda: api_summary(folder))
    assert [(r.name, r.total_ns, r.calls, r.med_ns) for r in rows] == [
        (r.name, r.total_ns, r.calls, r.med_ns) for r in sql_rows
    ]
    _, t_base = timed(lambda: baseline(db))
    print(f"load average after: {os.getloadavg()}")
    n = args.rows
    print(f"rows: {n:,}; top: {rows[0].name} {rows[0].time_pct:.1f} %")
    both = (t_ingest[0] + t_summary[0], t_ingest[1] + t_summary[1])
    print(f"{'path':28s} {'wall':>8s}    {'CPU':>6s}    {'rows/s (wall)':>13s}")
    for label, (wall, cpu) in (
        ("(a) SQL summary in SQLite", t_sql),
        ("ingest -> Parquet", t_ingest),
        ("api_summary over Parquet", t_summary),
        ("(b) ingest + api_summary", both),
        ("pandas read_sql + groupby", t_base),
    ):
        print(f"{label:28s} {wall:8.2f} s  {cpu:6.2f} s  {n / wall / 1e6:7.2f} M")
    print(
        f"ratio baseline / (a) SQL in SQLite      : {t_base[0] / t_sql[0]:6.2f}x wall, {t_base[1] / t_sql[1]:6.2f}x CPU"
    )
    print(
        f"ratio baseline / (b) ingest + summary   : {t_base[0] / both[0]:6.2f}x wall, {t_base[1] / both[1]:6.2f}x CPU"
    )
    print(
        f"ratio baseline / api_summary on Parquet : {t_base[0] / t_summary[0]:6.2f}x wall, "
        f"{t_base[1] / t_summary[1]:6.2f}x CPU"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
