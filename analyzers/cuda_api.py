"""The CUDA API time split, computed as `nsys stats --report cuda_api_sum` computes it.

nsys groups the runtime table by the recorded name (nameId), sums end - start, and prints the name
with its `_vNNNN` suffix cut (`analyzers.tables.api_display_name`); runtime and driver calls are in
one list. StdDev is the sample standard deviation (0 for a single call); Med is the usual median
(mean of the two middle values for an even count). Rows are sorted by total time, largest first.

Phases (`phase_summaries`): a call belongs to the phase its *start* falls in, so phases partition
the calls and their totals add up to the whole.
- startup: from the first traced call to the end of the first training step (an NVTX range named
  `step…`/`train_step…`, else the first NVTX `epoch N` range's start, else the first epoch start
  from the worker's events). It holds CUDA context creation, module loading, the caching
  allocator's first cudaMalloc calls, cuDNN/cuBLAS handle and stream creation, autotuning.
- steady: from there to the end of the last training step (the last step range, else the last
  epoch's end); without any step or epoch marker, the stated fallback: from the first kernel launch to the
  end of the last one (`FALLBACK_NOTE`).
- teardown: after the steady state (module unloading, context destruction: cuLibraryUnload ...).
- `epoch N`: the NVTX ranges named `epoch N` when present, else the worker's epoch events.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import duckdb

from analyzers import tables as t
from analyzers.steady import WARMUP_EPOCHS
from analyzers.trace_window import window_span
from tracer.core.runfolder import RunFolder

SOURCE_PREFERENCE = (t.SOURCE_NSYS, t.SOURCE_CUPTI, t.SOURCE_KINETO)
_EPOCH = re.compile(r"^epoch[ _]?(\d+)$", re.IGNORECASE)
_STEP = re.compile(r"^((train_)?step[ _#]?\d*|ProfilerStep#\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class ApiRow:
    """One line of cuda_api_sum. Times in ns; `name` is nsys's display name."""

    name: str
    time_pct: float
    total_ns: int
    calls: int
    avg_ns: float
    med_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float


def connect() -> duckdb.DuckDBPyConnection:
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
    if not path.exists():
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


def summarise_durations(
    path: Path,
    name_col: str,
    display: str,
    start_ns: int | None = None,
    end_ns: int | None = None,
    source: str | None = None,
) -> list[tuple[str, float, int, int, float, float, int, int, float]]:
    """The nsys *_sum statistics over one Parquet table, grouped by `name_col`, shown as `display`."""
    if not path.exists():
        return []
    where = []
    if start_ns is not None:
        where.append(f"start_ns >= {int(start_ns)}")
    if end_ns is not None:
        where.append(f"start_ns < {int(end_ns)}")
    if source is None:
        present = sources(path)
        source = present[0] if present else None
    if source is not None:
        where.append(f"source = '{source}'")
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    sql = f"""
        WITH s AS (
            SELECT {name_col} AS key, any_value({display}) AS shown, sum(dur_ns) AS total, count(*) AS n,
                   avg(dur_ns) AS avg, median(dur_ns) AS med, min(dur_ns) AS mn, max(dur_ns) AS mx,
                   coalesce(stddev_samp(dur_ns), 0) AS sd
            FROM read_parquet('{_sql_path(path)}') {cond}
            GROUP BY 1
        )
        SELECT shown, total * 100.0 / sum(total) OVER (), total, n, avg, med, mn, mx, sd
        FROM s ORDER BY total DESC, shown, key
    """
    rows = connect().execute(sql).fetchall()
    return [
        (str(r[0]), float(r[1]), int(r[2]), int(r[3]), float(r[4]), float(r[5]), int(r[6]), int(r[7]), float(r[8]))
        for r in rows
    ]


def api_summary(
    folder: RunFolder, start_ns: int | None = None, end_ns: int | None = None, source: str | None = None
) -> list[ApiRow]:
    """cuda_api_sum over calls starting in [start_ns, end_ns); one source (nsys > cupti > kineto)."""
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


@dataclass(frozen=True)
class Phase:
    name: str
    start_ns: int | None
    end_ns: int | None
    note: str = ""  # how the cut was made where no marker said it


FALLBACK_NOTE = "no step or epoch markers: steady state = first to last kernel launch"
_LAUNCH_PREFIXES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel", "cudaGraphLaunch")


def _launch_span(folder: RunFolder) -> tuple[int, int] | None:
    path = folder.table_path(t.CUDA_API)
    if not path.exists():
        return None
    where = " OR ".join(f"starts_with(name, '{p}')" for p in _LAUNCH_PREFIXES)
    row = (
        connect()
        .execute(f"SELECT min(start_ns), max(end_ns) FROM read_parquet('{_sql_path(path)}') WHERE {where}")
        .fetchone()
    )
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))


def _nvtx(folder: RunFolder) -> list[tuple[str, int, int]]:
    path = folder.table_path(t.NVTX)
    if not path.exists():
        return []
    rows = connect().execute(f"SELECT name, start_ns, end_ns FROM read_parquet('{_sql_path(path)}') ORDER BY start_ns")
    return [(str(n), int(s), int(e)) for n, s, e in rows.fetchall()]


def phases(folder: RunFolder) -> list[Phase]:
    """whole, startup, steady and one phase per epoch (see the module docstring for the cuts). A run
    traced in a window (`--trace-window`) has no start-up or teardown in its trace: its phases are the
    window ("whole"), the window again as "steady" when it lies after the warm-up epochs, and its
    epochs, each noting the window."""
    nvtx = _nvtx(folder)
    epochs: list[Phase] = []
    for name, s, e in nvtx:
        m = _EPOCH.match(name)
        if m:
            epochs.append(Phase(f"epoch {int(m.group(1))}", s, e))
    if not epochs:
        epochs = [Phase(f"epoch {ep.epoch}", ep.start_ns, ep.end_ns) for ep in folder.epochs()]
    window = window_span(folder)
    if window is not None:
        label = window.label
        inside = [dataclasses.replace(p, note=label) for p in epochs if _within(p, window.start_ns, window.end_ns)]
        steady = [Phase("steady", window.start_ns, window.end_ns, label)]
        after_warmup = window.window.first_epoch > WARMUP_EPOCHS
        return [Phase("whole", None, None, label), *(steady if after_warmup else []), *inside]
    steps = [(s, e) for name, s, e in nvtx if _STEP.match(name)]
    cut: int | None = None
    last: int | None = None
    note = ""
    if steps:
        cut, last = steps[0][1], max(e for _s, e in steps)
    elif epochs:
        cut, last = epochs[0].start_ns, epochs[-1].end_ns
    else:
        span = _launch_span(folder)
        if span is not None:
            (cut, last), note = span, FALLBACK_NOTE
    out = [Phase("whole", None, None)]
    if cut is not None:
        out += [Phase("startup", None, cut, note), Phase("steady", cut, last, note)]
        if last is not None:
            out.append(Phase("teardown", last, None, note))
    return out + epochs


def _within(phase: Phase, start_ns: int, end_ns: int) -> bool:
    """Whether an epoch phase overlaps the window (its NVTX range may start a little before the worker's event)."""
    return (
        phase.start_ns is not None and phase.end_ns is not None and phase.start_ns < end_ns and phase.end_ns > start_ns
    )


def phase_summaries(folder: RunFolder) -> dict[str, list[ApiRow]]:
    """Keys "whole", "startup", "steady" and "epoch N"; startup and steady are empty lists when the
    run has neither step/epoch NVTX ranges nor epoch events to cut at."""
    out: dict[str, list[ApiRow]] = {"whole": [], "startup": [], "steady": [], "teardown": []} | {
        p.name: api_summary(folder, p.start_ns, p.end_ns) for p in phases(folder)
    }
    return out
