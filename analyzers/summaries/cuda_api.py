"""The CUDA API time split, computed as `nsys stats --report cuda_api_sum` computes it.

nsys groups the runtime table by the recorded name (nameId), sums end - start, and prints the name
with its `_vNNNN` suffix cut (`analyzers.trace.tables.api_display_name`); runtime and driver calls are in
one list. StdDev is the sample standard deviation (0 for a single call); Med is the usual median
(mean of the two middle values for an even count). Rows are sorted by total time, largest first.

Phases (`phase_summaries`): the run's phases as `analyzers.figures.phases` declares them on the trace's clock
(start-up, warm-up, steady, teardown and each epoch, cut at the NVTX `epoch N` ranges); a call belongs
to the phase its *start* falls in, so start-up, warm-up, steady and teardown partition the calls and
their totals add up to the whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.figures import phases as ph
from analyzers.trace import tables as t
from tracer.core.runfolder import RunFolder

if TYPE_CHECKING:
    import duckdb

SOURCE_PREFERENCE = (t.SOURCE_NSYS, t.SOURCE_CUPTI, t.SOURCE_KINETO)


@dataclass(frozen=True)
class DurationStats:
    """The durations of one group (a CUDA call's name, a kernel, a memory operation's kind) as nsys's
    summaries give them and `summarise_durations` computes them: times in ns, `calls` as nsys's Count or
    Instances, `med_ns` the usual median, `stddev_ns` the sample standard deviation (0 for one). Declared
    once: the API, kernel and memcpy rows extend it (tests/analyzers/summaries/test_duration_stats.py holds it so)."""

    name: str
    time_pct: float
    total_ns: int
    calls: int
    avg_ns: float
    med_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float


@dataclass(frozen=True)
class ApiRow(DurationStats):
    """One line of cuda_api_sum; `name` is nsys's display name."""


def connect() -> duckdb.DuckDBPyConnection:
    """Imported here: the viewer reads a stored view of a run without paying for DuckDB's import."""
    import duckdb

    return duckdb.connect(config={"threads": max(1, min(4, _cpus()))})


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sources(path: Path) -> list[str]:
    """The sources present in one table file, in order of preference."""
    if not path.exists():
        return []
    found = _single_valued(path, "source")
    if found is None:
        sql = f"SELECT DISTINCT source FROM read_parquet('{_sql_path(path)}')"
        found = {r[0] for r in connect().execute(sql).fetchall()}
    return [s for s in SOURCE_PREFERENCE if s in found] + sorted(found - set(SOURCE_PREFERENCE))


def api_family(folder: RunFolder) -> str:
    """`tables.API_HIP` for a ROCm trace (its calls are hip*), else `tables.API_CUDA`."""
    path = folder.table_path(t.CUDA_API)
    if not t.present(folder, t.CUDA_API):
        return t.API_CUDA
    prefixes = " OR ".join(f"starts_with(name, '{p}')" for p in t.HIP_PREFIXES)
    hit = connect().execute(f"SELECT name FROM read_parquet('{_sql_path(path)}') WHERE {prefixes} LIMIT 1").fetchall()
    return t.api_family(r[0] for r in hit)


def _single_valued(path: Path, column: str) -> set[str] | None:
    """The values of `column` from the Parquet footer alone, where every row group's statistics say
    it holds one value (a file from one source: no 10 M-row scan); else None."""
    import pyarrow.parquet as pq

    found = set()
    for stats in t.row_group_statistics(pq.ParquetFile(path), column):
        if stats is None or not stats.has_min_max or stats.min != stats.max or stats.null_count:
            return None
        found.add(stats.min if isinstance(stats.min, str) else bytes(stats.min).decode())
    return found


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


Summary = tuple[str, float, int, int, float, float, int, int, float]
Range = tuple[int | None, int | None]


def summarise_durations(
    path: Path,
    name_col: str,
    display: str,
    start_ns: int | None = None,
    end_ns: int | None = None,
    source: str | None = None,
) -> list[Summary]:
    """The nsys *_sum statistics over one Parquet table, grouped by `name_col`, shown as `display`."""
    return summarise_ranges(path, name_col, display, [(start_ns, end_ns)], source)[0]


def summarise_ranges(
    path: Path, name_col: str, display: str, ranges: list[Range], source: str | None = None
) -> list[list[Summary]]:
    """`summarise_durations` for each [start, end) of `ranges` (a row counts where its start falls), in one
    scan: a run of 200 epochs is one query, not 200 (3.6 s -> well under one at 10 M calls)."""
    if not t.present_file(path) or not ranges:
        return [[] for _ in ranges]
    if source is None:
        present = sources(path)
        source = present[0] if present else None
    cond = f"WHERE source = '{source}'" if source is not None else ""
    bounds = ", ".join(
        f"({i}, {-(1 << 62) if a is None else int(a)}, {1 << 62 if b is None else int(b)})"
        for i, (a, b) in enumerate(ranges)
    )
    sql = f"""
        WITH r(i, lo, hi) AS (VALUES {bounds}),
        c AS (
            SELECT {name_col} AS key, {display} AS shown, start_ns, dur_ns
            FROM read_parquet('{_sql_path(path)}') {cond}
        ),
        s AS (
            SELECT r.i AS i, c.key AS key, any_value(c.shown) AS shown, sum(c.dur_ns) AS total, count(*) AS n,
                   avg(c.dur_ns) AS avg, median(c.dur_ns) AS med, min(c.dur_ns) AS mn, max(c.dur_ns) AS mx,
                   coalesce(stddev_samp(c.dur_ns), 0) AS sd
            FROM c JOIN r ON c.start_ns >= r.lo AND c.start_ns < r.hi
            GROUP BY 1, 2
        )
        SELECT i, shown, total * 100.0 / sum(total) OVER (PARTITION BY i), total, n, avg, med, mn, mx, sd
        FROM s ORDER BY i, total DESC, shown, key
    """
    out: list[list[Summary]] = [[] for _ in ranges]
    for r in connect().execute(sql).fetchall():
        out[int(r[0])].append(
            (str(r[1]), float(r[2]), int(r[3]), int(r[4]), float(r[5]), float(r[6]), int(r[7]), int(r[8]), float(r[9]))
        )
    return out


def api_summary(
    folder: RunFolder, start_ns: int | None = None, end_ns: int | None = None, source: str | None = None
) -> list[ApiRow]:
    """cuda_api_sum over calls starting in [start_ns, end_ns); one source (nsys > cupti > kineto)."""
    if not t.present(folder, t.CUDA_API):  # absent, or damaged (named in the run's problems)
        return []
    rows = summarise_durations(folder.table_path(t.CUDA_API), "name", "api", start_ns, end_ns, source)
    return [ApiRow(*r) for r in rows]


def api_summary_sqlite(path: Path, start_ns: int | None = None, end_ns: int | None = None) -> list[ApiRow]:
    """cuda_api_sum straight from an nsys SQLite export, computed by SQLite as `nsys stats` does: SQL
    aggregates per nameId, and the median from ROW_NUMBER() over each name's calls ordered by duration,
    joined to the aggregates' COUNT; backtrace duplicates left out as the ingest leaves them out. Same
    rows as `api_summary` over the ingested table; `start_ns`/`end_ns` are on the same (Unix) clock.

    Slow on big files (SQLite sorts for GROUP BY and again for the window): for repeated summaries,
    ingest once and use `api_summary`. StdDev comes from SQLite's compensated float sum of squares,
    finished in exact arithmetic: within about 1e-16 * (mean / stddev)^2 of a two-pass computation."""
    from analyzers.ingest import nsys_export as ex

    with ex.open_readonly(path) as db:
        names = ex.check_nsys(path, db)
        if ex.RUNTIME not in names:
            return []
        offset = ex.session_clock(db, names).offset_ns
        cond = [f"eventClass NOT IN ({','.join(map(str, ex.excluded_event_classes(db, names)))})"]
        if start_ns is not None:
            cond.append(f"start >= {int(start_ns) - offset}")
        if end_ns is not None:
            cond.append(f"start < {int(end_ns) - offset}")
        for pragma in (f"threads = {_cpus()}", "temp_store = MEMORY", "cache_size = -262144"):
            db.rows(f"PRAGMA {pragma}")
        rows = db.rows(
            f"""
            WITH r AS (SELECT nameId AS k, end - start AS d FROM {ex.RUNTIME} WHERE {" AND ".join(cond)}),
            a AS MATERIALIZED (
                SELECT k, count(*) AS n, sum(d) AS total, min(d) AS mn, max(d) AS mx, total(d * d) AS sq
                FROM r GROUP BY k
            ),
            w AS (SELECT k, d, row_number() OVER (PARTITION BY k ORDER BY d) AS rn FROM r),
            m AS (
                SELECT w.k AS k, avg(w.d) AS med FROM w JOIN a ON a.k = w.k
                WHERE w.rn IN ((a.n + 1) / 2, (a.n + 2) / 2) GROUP BY w.k
            )
            SELECT coalesce(s.value, '<nameId ' || a.k || '>') AS name, a.n, a.total, a.mn, a.mx, a.sq, m.med
            FROM a JOIN m ON m.k = a.k LEFT JOIN StringIds s ON s.id = a.k
            """
        )
    grand = sum(int(r[2]) for r in rows)
    out = []
    for name, n, total, mn, mx, sq, med in rows:
        n, total = int(n), int(total)
        var = (Fraction(sq) - Fraction(total * total, n)) / (n - 1) if n > 1 else Fraction(0)
        var = var if var > 0 else Fraction(0)
        shown = t.api_display_name(str(name))
        pct = float(Fraction(total * 100, grand)) if grand else 0.0
        row = ApiRow(shown, pct, total, n, total / n, float(med), int(mn), int(mx), float(var) ** 0.5)
        out.append((str(name), row))
    out.sort(key=lambda x: (-x[1].total_ns, x[1].name, x[0]))
    return [row for _, row in out]


Phase = ph.Phase
FALLBACK_NOTE = ph.FALLBACK_NOTE


def phases(folder: RunFolder, warmup: int = ph.WARMUP_EPOCHS) -> list[Phase]:
    """whole, startup, warmup, steady, teardown (those the run has) and one phase per epoch, on the
    trace's clock (`analyzers.figures.phases.trace_phases`): a `Run`'s, computed once."""
    from analyzers.figures.parts import part

    return list(part(folder, "trace_phases", lambda: ph.trace_phases(folder, warmup), warmup).phases)


def phase_summaries(folder: RunFolder, warmup: int = ph.WARMUP_EPOCHS) -> dict[str, list[ApiRow]]:
    """Keys "whole", "startup", "warmup", "steady", "teardown" and "epoch N"; a phase the run does not
    have (no marks to cut at, no epoch after the warm-up) is an empty list."""
    cut = phases(folder, warmup)
    t.present(folder, t.CUDA_API)  # a damaged table is named in the run's problems (and summarised as none)
    rows = summarise_ranges(folder.table_path(t.CUDA_API), "name", "api", [(p.start_ns, p.end_ns) for p in cut])
    out: dict[str, list[ApiRow]] = {name: [] for name in ph.PHASES}
    return out | {p.name: [ApiRow(*r) for r in summary] for p, summary in zip(cut, rows)}
