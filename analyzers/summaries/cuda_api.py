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

from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.figures import phases as ph
from analyzers.figures.phase_cuts import trace_phases
from analyzers.run.memo import per_run
from analyzers.run.run import Run
from analyzers.summaries.rows import ApiRow
from analyzers.trace import tables as t
from analyzers.trace.duration_stats import STATS

if TYPE_CHECKING:
    from collections.abc import Iterator

    import duckdb
    import pyarrow as pa
SOURCE_PREFERENCE = (t.SOURCE_NSYS, t.SOURCE_CUPTI, t.SOURCE_KINETO)


def connect() -> duckdb.DuckDBPyConnection:
    """Imported here: the viewer reads a stored view of a run without paying for DuckDB's import. No
    progress bar: DuckDB draws one on the terminal for a query past two seconds, over our own output."""
    import duckdb

    con = duckdb.connect(config={"threads": max(1, min(4, _cpus()))})
    con.execute("SET enable_progress_bar = false")
    return con


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sources(path: t.TableFile) -> list[str]:
    """The sources present in one table file (a run's `table_file`), in order of preference."""
    if isinstance(path, Path) and not path.exists():
        return []
    found = _single_valued(path, "source")
    if found is None:
        con = connect()
        found = {r[0] for r in con.execute(f"SELECT DISTINCT source FROM {t.sql_table(con, path, 'api')}").fetchall()}
    return [s for s in SOURCE_PREFERENCE if s in found] + sorted(found - set(SOURCE_PREFERENCE))


@per_run
def api_family(folder: Run) -> str:
    """`tables.API_HIP` for a ROCm trace (its calls are hip*), else `tables.API_CUDA`; asked once per run."""
    if not t.present(folder, t.CUDA_API):
        return t.API_CUDA
    prefixes = " OR ".join(f"starts_with(name, '{p}')" for p in t.HIP_PREFIXES)
    con = connect()
    api = t.sql_table(con, folder.table_file(t.CUDA_API), t.CUDA_API)
    hit = con.execute(f"SELECT name FROM {api} WHERE {prefixes} LIMIT 1").fetchall()
    return t.api_family(r[0] for r in hit)


def api_tracer(folder: Run) -> str:
    """The tracer whose calls the API table holds ('nsys', 'cupti', 'torch' ..., `t.TRACE_OF_SOURCE`).
    Tracers record different calls (an nsys report leaves out cudaFuncGetAttributes and other queries,
    the CUPTI collector the calls Kineto switches off, the PyTorch profiler every driver call): totals
    of two tracers are only compared over the calls both hold."""
    return "/".join(t.TRACE_OF_SOURCE.get(s, s) for s in sources(folder.table_file(t.CUDA_API)))


def _single_valued(path: t.TableFile, column: str) -> set[str] | None:
    """The values of `column` from the Parquet footer alone, where every row group's statistics say
    it holds one value (a file from one source: no 10 M-row scan); else None."""
    import pyarrow.parquet as pq

    found = set()
    for stats in t.row_group_statistics(pq.ParquetFile(path), column):
        if stats is None or not stats.has_min_max or stats.min != stats.max or stats.null_count:
            return None
        found.add(stats.min if isinstance(stats.min, str) else bytes(stats.min).decode())
    return found


Summary = tuple[str, float, int, int, float, float, int, int, float]
Range = tuple[int | None, int | None]


def summarise_durations(
    path: t.TableFile,
    name_col: str,
    display: str,
    start_ns: int | None = None,
    end_ns: int | None = None,
    source: str | None = None,
) -> list[Summary]:
    """The nsys *_sum statistics over one Parquet table (a run's `table_file`), grouped by `name_col`,
    shown as `display`."""
    return summarise_ranges(path, name_col, display, [(start_ns, end_ns)], source)[0]


def summarise_ranges(
    path: t.TableFile, name_col: str, display: str, ranges: list[Range], source: str | None = None
) -> list[list[Summary]]:
    """`summarise_durations` for each [start, end) of `ranges` (a row counts where its start falls), in one
    scan: a run of 200 epochs is one query, not 200 (3.6 s -> well under one at 10 M calls).

    Why not a join on `start >= lo AND start < hi`: DuckDB compared every row with every range, 8 s of
    CPU at 10 M events and 189 phases, 100 s (the viewer's Diagnosis) at 100 M and 920. The ranges are
    dealt into layers whose ranges do not overlap (`range_layers`: the whole run, the named phases, the
    epochs); the file is read in batches, and NumPy gives each row, in each layer, the one range it
    falls in by a binary search over the layer's starts; DuckDB aggregates the stream, so only the
    medians' values are held. One range is a plain filter that DuckDB scans on every core."""
    if (isinstance(path, Path) and not t.present_file(path)) or not ranges:
        return [[] for _ in ranges]
    if source is None:
        present = sources(path)
        source = present[0] if present else None
    bounded = [(-(1 << 62) if a is None else int(a), (1 << 62) if b is None else int(b)) for a, b in ranges]
    layers = range_layers(bounded)
    out: list[list[Summary]] = [[] for _ in ranges]
    if not layers:
        return out
    con = connect()
    picked = f"{name_col} AS key, {display} AS shown, dur_ns AS d"
    only = f"source = '{source}'" if source is not None else "true"
    if len(layers) == 1 and len(layers[0]) == 1:
        (i,) = layers[0]
        lo, hi = bounded[i]
        rows = f"SELECT {i} AS i, {picked} FROM {t.sql_table(con, path, 'summarised')} "
        rows += f"WHERE start_ns >= {lo} AND start_ns < {hi} AND {only}"
    else:
        columns = list(dict.fromkeys([name_col, display, "dur_ns", *(["source"] if source is not None else [])]))
        con.register("ranged", _ranged_batches(path, columns, bounded, layers))
        indices = ", ".join(f"{_LAYER}{k}" for k in range(len(layers)))
        rows = f"SELECT unnest([{indices}]) AS i, {picked} FROM ranged WHERE {only}"
    sql = f"""
        WITH c AS ({rows}),
        s AS (SELECT i, key, any_value(shown) AS shown, {STATS} FROM c WHERE i >= 0 GROUP BY 1, 2)
        SELECT i, shown, total * 100.0 / sum(total) OVER (PARTITION BY i), total, n, avg, med, mn, mx, sd
        FROM s ORDER BY i, total DESC, shown, key
    """
    for r in con.execute(sql).fetchall():
        out[int(r[0])].append(
            (str(r[1]), float(r[2]), int(r[3]), int(r[4]), float(r[5]), float(r[6]), int(r[7]), int(r[8]), float(r[9]))
        )
    return out


_LAYER = "range_in_layer_"
"""Prefix of the columns `_ranged_batches` adds: the index into `ranges` of a row's range in layer k, -1 for none."""
_BATCH_ROWS = 1 << 17


def _ranged_batches(
    path: t.TableFile, columns: list[str], ranges: list[tuple[int, int]], layers: list[list[int]]
) -> pa.RecordBatchReader:
    """`columns` of the table at `path` in batches, each with one column per layer (`_LAYER` k): the index
    of the range of that layer the row's start falls in, or -1."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    searched = []
    for layer in layers:
        order = sorted(layer, key=lambda i: ranges[i][0])
        los = np.array([ranges[i][0] for i in order], dtype=np.int64)
        his = np.array([ranges[i][1] for i in order], dtype=np.int64)
        searched.append((los, his, np.array(order, dtype=np.int32)))
    file = pq.ParquetFile(path)
    names = [*columns, *(f"{_LAYER}{k}" for k in range(len(layers)))]

    def batches() -> Iterator[pa.RecordBatch]:
        with file:
            for batch in file.iter_batches(batch_size=_BATCH_ROWS, columns=[*columns, "start_ns"]):
                column = batch.column(len(columns))
                if column.null_count:  # a row without a start is in no range, as a join left it out
                    column = pc.fill_null(column, pa.scalar(-(1 << 63), pa.int64()))
                start = column.to_numpy()
                found = []
                for los, his, ids in searched:
                    at = np.maximum(np.searchsorted(los, start, side="right") - 1, 0)
                    hit = (start >= los[at]) & (start < his[at])
                    found.append(pa.array(np.where(hit, ids[at], -1), type=pa.int32()))
                yield pa.RecordBatch.from_arrays([*batch.columns[: len(columns)], *found], names=names)

    arrow_schema = file.schema_arrow
    fields = [arrow_schema.field(c) for c in columns] + [pa.field(n, pa.int32()) for n in names[len(columns) :]]
    return pa.RecordBatchReader.from_batches(pa.schema(fields), batches())


def range_layers(ranges: list[tuple[int, int]]) -> list[list[int]]:
    """The indices of the non-empty `ranges` ([lo, hi)) dealt into as few layers as the overlaps allow,
    none overlapping another in its layer (each to the first layer whose last range ends by its start,
    taken by start: the fewest layers an interval graph can be coloured with)."""
    layers: list[list[int]] = []
    ends: list[int] = []
    for i in sorted((i for i, (lo, hi) in enumerate(ranges) if lo < hi), key=lambda i: ranges[i]):
        lo, hi = ranges[i]
        k = next((k for k, end in enumerate(ends) if end <= lo), len(layers))
        if k == len(layers):
            layers.append([])
            ends.append(hi)
        layers[k].append(i)
        ends[k] = hi
    return layers


def api_summary(
    folder: Run, start_ns: int | None = None, end_ns: int | None = None, source: str | None = None
) -> list[ApiRow]:
    """cuda_api_sum over calls starting in [start_ns, end_ns); one source (nsys > cupti > kineto)."""
    if not t.present(folder, t.CUDA_API):  # absent, or damaged (named in the run's problems)
        return []
    rows = summarise_durations(folder.table_file(t.CUDA_API), "name", "api", start_ns, end_ns, source)
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


def phases(run: Run) -> list[Phase]:
    """whole, startup, warmup, steady, teardown (those the run has) and one phase per epoch, on the
    trace's clock (`analyzers.figures.phase_cuts.trace_phases`, computed once per run)."""
    return list(trace_phases(run).phases)


@per_run
def phase_summaries(run: Run) -> dict[str, list[ApiRow]]:
    """Keys "whole", "startup", "warmup", "steady", "teardown" and "epoch N"; a phase the run does not
    have (no marks to cut at, no epoch after the warm-up) is an empty list. Computed once per run."""
    cut = phases(run)
    run.has_table(t.CUDA_API)  # a damaged table is named in the run's problems (and summarised as none)
    rows = summarise_ranges(run.table_file(t.CUDA_API), "name", "api", [(p.start_ns, p.end_ns) for p in cut])
    out: dict[str, list[ApiRow]] = {name: [] for name in ph.PHASES}
    return out | {p.name: [ApiRow(*r) for r in summary] for p, summary in zip(cut, rows)}
