"""A real nsys export made long: its runtime table's rows repeated, each copy shifted past the last
one in time, so the file keeps its schema, names and threads and stays ordered by start. Used by the
flat-memory test and by benchmarks/bench_nsys_stats.py."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def replicate(src: Path, dst: Path, rows: int) -> Path:
    """`dst`: a copy of `src` whose runtime table holds `rows` rows (kept if it already exists)."""
    if dst.exists():
        return dst
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copyfile(src, tmp)
    tmp.chmod(0o644)
    con = sqlite3.connect(tmp)
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({RUNTIME})")]
    n, lo, hi = con.execute(f"SELECT count(*), min(start), max(end) FROM {RUNTIME}").fetchone()
    span = hi - lo + 1
    copies = -(-rows // n) - 1
    shifted = ", ".join(f"{c} + c.i * {span}" if c in ("start", "end") else c for c in cols)
    con.execute(f"CREATE TEMP TABLE orig AS SELECT * FROM {RUNTIME} ORDER BY rowid")
    con.execute(
        f"INSERT INTO {RUNTIME} ({', '.join(cols)}) "
        f"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT {copies}) "
        f"SELECT {shifted} FROM c, orig ORDER BY c.i, orig.rowid"
    )
    con.execute(f"DELETE FROM {RUNTIME} WHERE rowid > (SELECT min(rowid) FROM {RUNTIME}) + {rows - 1}")
    con.commit()
    con.execute("VACUUM")
    con.close()
    tmp.rename(dst)
    return dst
