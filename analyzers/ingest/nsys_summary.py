"""The CUDA API, kernel and memory-operation summaries of an nsys export, computed straight from the file.

Why: `tracer analyze trace.sqlite` asks for three small tables of statistics. Importing the export first
(`nsys_duckdb.write_sqlite`: every column of every table sorted into Parquet) costs several times the
summary itself; here DuckDB's sqlite scanner (or the Arrow export mapped in place, `nsys_arrow`) reads
only the columns the statistics need (name id, start, end, event class) and aggregates them as it
scans, on every core, with no row in Python. The statistics are the ones `analyzers.summaries.cuda_api.
summarise_ranges` computes over the imported tables (same DuckDB aggregates, same rounding), grouped by
the export's ids and named afterwards with the export's own labels (`nsys_export`), so the rows equal
the imported path's and `nsys stats`'. The result is kept in the tool's cache (`summary_cache`) under
a key of the file's resolved path, size and mtime, so a second call reads a small JSON file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from analyzers.ingest import import_cache, readers
from analyzers.ingest import nsys_export as ex
from analyzers.ingest.import_cache import SUMMARIES_DIR
from analyzers.trace import table_names as t
from analyzers.trace.duration_stats import STATS
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.reading import read_bytes

VERSION = 2
"""Of the cached summary's layout and rules: a cache written by another version is recomputed."""

Stat = tuple[Any, float, int, int, float, float, int, int, float]
"""(group id, % of all, total, count, avg, median, min, max, stddev) as DuckDB returns them."""


@dataclass(frozen=True)
class FileSummary:
    """The summaries of one export, as `analyzers.summaries.rows`' `ApiRow`, `KernelRow`, `MemcpyRow` and
    `ThreadRow` take them, rows in the order the summaries of an imported run give."""

    cuda_api: list[tuple[Any, ...]]
    kernels: list[tuple[Any, ...]]
    memcpy: list[tuple[Any, ...]]
    threads: list[tuple[Any, ...]]
    processes: int  # that ran kernels: more than one, the import makes each a rank (`ranks.split_nsys`)

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION} | asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> FileSummary | None:
        if data.get("version") != VERSION:
            return None
        api, kernels, memcpy, threads = (
            [tuple(r) for r in data[k]] for k in ("cuda_api", "kernels", "memcpy", "threads")
        )
        return FileSummary(api, kernels, memcpy, threads, int(data["processes"]))


def readable(path: Path) -> bool:
    """Whether `path` is an nsys export this module reads (SQLite or Arrow), or a report (.nsys-rep)."""
    from analyzers.ingest.sniff import sniff

    return sniff(path).kind in (tf.NSYS_SQLITE, tf.NSYS_ARROW, tf.NSYS_REP)


def cached_summary(path: Path) -> FileSummary:
    """The summaries of `path`, from the cache where an earlier call left them, else computed and kept
    there (written to a scratch file and renamed: a crash never leaves half a file). Where the cache may
    be and how much of it is kept: `analyzers.ingest.import_cache`, as for imports. A summary that cannot
    be kept (a full disk, named once on stderr) only costs the next call the computation."""

    path = Path(path)
    root = import_cache.cache_folder(SUMMARIES_DIR)
    stored = root / f"{import_cache.cache_name(path)}.json"
    kept = read_bytes(stored)  # None when absent; a FIFO or other odd file planted there is not opened
    if isinstance(kept, bytes):
        try:
            found = FileSummary.from_json(json.loads(kept))
            if found is not None:
                import_cache.touch(stored)
                return found
        except (ValueError, KeyError, TypeError):
            pass
    summary = summarise(path)
    scratch: str | None = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=root, prefix=".", suffix=".tmp", delete=False) as f:
            scratch = f.name
            json.dump(summary.to_json(), f)
        os.replace(scratch, stored)  # a link planted at `stored` is replaced, never written through
    except OSError as e:
        if scratch is not None:
            Path(scratch).unlink(missing_ok=True)
        full = import_cache.full_cache(root, e)
        if full is not None:
            print(f"tracer: warning: the summary of {path.name} is not kept: {full}", file=sys.stderr)
        return summary
    import_cache.evict(root, stored, import_cache.SUMMARIES_KEPT)
    return summary


def summarise(path: Path) -> FileSummary:
    """The summaries of one SQLite or Arrow export, or of a report through its export (the one beside it,
    else one made in a scratch folder); UserError (one line) for a damaged or foreign file."""
    from analyzers.ingest.sniff import sniff

    kind = sniff(path).kind
    if kind == tf.NSYS_REP:
        return _summarise_report(path)
    if kind == tf.NSYS_ARROW:
        return _summarise_arrow(path)
    from analyzers.ingest import duckdb_sqlite

    extension = duckdb_sqlite.sqlite_scanner()
    if extension is None:
        raise UserError(
            f"{path}: reading nsys SQLite needs DuckDB's sqlite scanner: "
            f"pip install duckdb-extension-sqlite-scanner=={duckdb_sqlite.duckdb.__version__}"
        )
    with ex.open_readonly(path) as db, tempfile.TemporaryDirectory(prefix="tracer-summary-") as scratch:
        names = ex.check_nsys(path, db)
        con = duckdb_sqlite.connect(Path(scratch))
        try:
            try:
                duckdb_sqlite.attach_sqlite(con, db.path, extension)
            except duckdb_sqlite.duckdb.Error as e:
                raise UserError(f"{path}: damaged or truncated SQLite file ({_first_line(e)})") from None
            return _summaries(con, db, names)
        finally:
            con.close()


def _summarise_report(path: Path) -> FileSummary:
    """A report read as the import reads it (`analyzers.ingest.pipeline._write_nsys`): its export beside it, else
    exported to Arrow where this nsys offers it (SQLite where not, or where that Arrow cannot be read)."""
    from analyzers.ingest.nsys_report import export_nsys_rep, sibling_export
    from tracer.measure.tracing import nsys as tracing_nsys

    beside = sibling_export(path)
    if beside is not None:
        return summarise(beside)
    nsys_bin = tracing_nsys.nsys_if_any()  # with none, export_nsys_rep says so in one line
    kinds = [tracing_nsys.best_export(str(nsys_bin)) if nsys_bin is not None else "sqlite"]
    kinds += ["sqlite"] if kinds[0] != "sqlite" else []
    with tempfile.TemporaryDirectory(prefix="tracer-summary-") as scratch:
        for i, kind in enumerate(kinds):
            export = Path(scratch) / f"{readers.stem(path.name)}.{kind}"
            export_nsys_rep(path, export, kind)
            try:
                return summarise(export)
            except UserError:
                if i == len(kinds) - 1:
                    raise
    raise AssertionError("unreachable")


def _summarise_arrow(path: Path) -> FileSummary:
    from analyzers.ingest import nsys_arrow

    with tempfile.TemporaryDirectory(prefix="tracer-summary-") as scratch:
        db = nsys_arrow.ArrowDb(path, Path(scratch))
        try:
            return _summaries(db.con, db, ex.check_nsys(path, db))
        finally:
            db.close()


def _summaries(con: Any, db: ex.Export, names: set[str]) -> FileSummary:
    import duckdb

    try:
        return FileSummary(
            _cuda_api(con, db, names),
            _kernels(con, db, names),
            _memcpy(con, db, names),
            _threads(con, db, names),
            _processes(con, names),
        )
    except duckdb.Error as e:
        raise UserError(f"{db.path}: damaged or truncated export ({_first_line(e)})") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{db.path}: damaged export: a string is not UTF-8 ({_first_line(e)})") from None


def _grouped(con: Any, source: str) -> list[Stat]:
    """The statistics of `source` (a SELECT giving `k` and the duration `d`) grouped by `k`."""
    sql = (
        f"SELECT k, total * 100.0 / sum(total) OVER (), total, n, avg, med, mn, mx, sd "
        f"FROM (SELECT k, {STATS} FROM ({source}) GROUP BY k)"
    )
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _timed(alias: str) -> str:
    """Rows that can be placed in time (the import leaves out a row without a start or an end)."""
    return f'{alias}.start IS NOT NULL AND {alias}."end" IS NOT NULL'


def _rows(stats: list[Stat], label: dict[Any, tuple[str, str]]) -> list[tuple[Any, ...]]:
    """Summary rows (shown name, %, total, count, avg, median, min, max, stddev) largest first, ties by
    shown name then grouping name, as `summarise_ranges` orders them; `label` maps a group id to its
    (grouping name, shown name), one name per id as the export's unique StringIds give."""
    rows = []
    for k, pct, total, n, avg, med, mn, mx, sd in stats:
        key, shown = label[k]
        rows.append((key, (shown, float(pct), int(total), int(n), float(avg), float(med), int(mn), int(mx), float(sd))))
    rows.sort(key=lambda r: (-r[1][2], r[1][0], r[0]))
    return [r for _, r in rows]


def _cuda_api(con: Any, db: ex.Export, names: set[str]) -> list[tuple[Any, ...]]:
    if ex.RUNTIME not in names:
        return []
    excluded = ", ".join(map(str, ex.excluded_event_classes(db, names)))
    stats = _grouped(
        con,
        f'SELECT r.nameId AS k, r."end" - r.start AS d FROM nsys.{ex.RUNTIME} r '
        f"WHERE r.eventClass NOT IN ({excluded}) AND {_timed('r')}",
    )
    strings = _labels(db, [s[0] for s in stats])
    label = {}
    for k, *_ in stats:
        name = strings.get(k, f"<nameId {k}>")
        label[k] = (name, t.api_display_name(name) if k in strings else name)
    return _rows(stats, label)


def _kernels(con: Any, db: ex.Export, names: set[str]) -> list[tuple[Any, ...]]:
    """`analyzers.summaries.kernels.kernel_summary`'s rows: grouped by demangled name, with its short label
    and class."""
    if ex.KERNEL not in names:
        return []
    from analyzers.trace import kernel_classes, kernel_names

    stats = _grouped(
        con, f'SELECT k.demangledName AS k, k."end" - k.start AS d FROM nsys.{ex.KERNEL} k WHERE {_timed("k")}'
    )
    strings = _labels(db, [s[0] for s in stats])
    rows = _rows(stats, {k: (strings.get(k, ""), strings.get(k, "")) for k, *_ in stats})
    shorts = kernel_names.short_names(r[0] for r in rows)
    classes = kernel_classes.classify_distinct([r[0] for r in rows])
    return [(kernel_names.demangle(r[0]), *r[1:], shorts[r[0]], c) for r, c in zip(rows, classes)]


def _processes(con: Any, names: set[str]) -> int:
    """The processes that ran kernels (as the import tells ranks apart, by the kernels' pid)."""
    if ex.KERNEL not in names:
        return 0
    return int(con.execute(f"SELECT count(DISTINCT {ex.pid_sql('k.globalPid')}) FROM nsys.{ex.KERNEL} k").fetchone()[0])


def _memcpy(con: Any, db: ex.Export, names: set[str]) -> list[tuple[Any, ...]]:
    """`analyzers.summaries.kernels.memcpy_summary`'s rows: copies by kind, memsets as one kind."""
    parts = []
    if ex.MEMCPY in names:
        parts.append(f'SELECT m.copyKind AS k, m."end" - m.start AS d FROM nsys.{ex.MEMCPY} m WHERE {_timed("m")}')
    if ex.MEMSET in names:
        parts.append(f'SELECT NULL AS k, m."end" - m.start AS d FROM nsys.{ex.MEMSET} m WHERE {_timed("m")}')
    if not parts:
        return []
    stats = _grouped(con, " UNION ALL ".join(parts))
    kinds = ex.memcpy_kinds(db, names) if ex.MEMCPY in names else {}
    label = {}
    for k, *_ in stats:
        kind = t.MEMSET_KIND if k is None else kinds.get(int(k), t.memcpy_kind_label(str(k)))
        label[k] = (kind, kind)
    return _rows(stats, label)


def _threads(con: Any, db: ex.Export, names: set[str]) -> list[tuple[Any, ...]]:
    """`analyzers.summaries.threads.thread_summary`'s rows for an export, whose only thread source is its OS runtime
    calls: per thread, the time in calls that last (`osrt_ns`) and the call that took most of it. A thread
    is named by its first named call (`analyzers.ingest.threads.one_name_per_thread`). Every thread is here:
    which get a row is the summary's rule (`analyzers.summaries.rows.shown`), applied by the reader."""
    if ex.OSRT not in names:
        return []

    calls = con.execute(
        f'SELECT o.globalTid AS g, o.nameId AS k, sum(o."end" - o.start) AS ns, min(o.start) AS first '
        f'FROM nsys.{ex.OSRT} o WHERE {_timed("o")} AND o."end" > o.start GROUP BY g, k'
    ).fetchall()
    strings = _labels(db, [k for _, k, _, _ in calls])
    thread_names = ex.thread_names(db, names)
    per: dict[tuple[int, int], dict[str, int]] = {}
    named: dict[tuple[int, int], tuple[int, str]] = {}
    for g, k, ns, first in calls:
        g = int(g or 0)
        key = ((g >> ex.GTID_BITS) & ex.GTID_MASK, g & ex.GTID_MASK)
        name = strings.get(int(k), "") if k is not None else ""
        per.setdefault(key, {})[name] = per.get(key, {}).get(name, 0) + int(ns)
        label = thread_names.get(g, "")
        if label and (key not in named or int(first) < named[key][0]):
            named[key] = (int(first), label)
    rows = []
    for key, osrt in per.items():
        label = named.get(key, (0, ""))[1]
        top = max(osrt, key=lambda n: osrt[n])
        rows.append((key[0], key[1], label, 0.0, 0, sum(osrt.values()), top, 0, ""))
    return sorted(rows, key=lambda r: (-r[5], r[0], r[1]))


def _labels(db: ex.Export, ids: list[Any]) -> dict[int, str]:
    """StringIds' values of the ids a summary has (dozens), not the whole table (often 100 k strings)."""
    wanted = sorted({int(i) for i in ids if i is not None})
    if not wanted:
        return {}
    return {
        int(i): ex.text(v)
        for i, v in db.rows(f"SELECT id, value FROM StringIds WHERE id IN ({','.join(map(str, wanted))})")
    }


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
