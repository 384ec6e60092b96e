"""The ingest of a trace file, or of a run's traces, into a run folder's tables (the package's docstring
says what it reads); apart from the package so that its submodules (`nsys_summary`, which answers
`tracer analyze FILE` from the file) can be imported without Arrow."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.ingest import readers
from analyzers.ingest.nsys_report import REPORT_SUFFIX, SQLITE_EXPORT, beside, export_nsys_rep, sibling_export
from analyzers.ingest.readers import Read, readable, reader_of
from analyzers.ingest.run_files import rank_traces, run_traces
from analyzers.ingest.sniff import sniff, trace_files, xplanes
from analyzers.ingest.writing import _refuse_negative, install_parts, write_tables
from analyzers.trace import tables as t
from analyzers.trace.clock import Clock
from tracer.core import arrow_build as build
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder, write_json_atomic
from tracer.measure.tracing import nsys as tracing_nsys


def trace_kind(path: Path) -> str | None:
    """One of `tracer.core.trace_formats`' kinds, or None: read from the content (`analyzers.ingest.sniff`)."""
    return sniff(Path(path)).kind


def not_readable(path: Path) -> UserError:
    """The refusal of a file or folder that is no trace this tracer reads, naming what it is."""
    return UserError(f"{path}: {sniff(Path(path)).what}, not a trace this tracer reads ({readable()})")


def holds_trace(folder: Path) -> bool:
    """Whether `tracer import FOLDER` finds a trace where `import_target` looks: the folder itself (our CUPTI
    records, an unpacked nsys-jax archive), a profile folder's XPlane files, or trace files at its top."""
    if trace_kind(folder) is not None or xplanes(folder):
        return True
    return bool(trace_files(folder))


def import_target(path: Path) -> Path:
    """The trace `tracer import PATH` reads: a file as it is; a folder that is a trace (our CUPTI
    records, an unpacked nsys-jax archive); the newest XPlane of a profile folder (`logdir/plugins/
    profile/<run>/<host>.xplane.pb`, as jax.profiler and TensorFlow write it); else the one trace
    file in the folder. UserError (one line) for anything else, saying what was found."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    if not path.is_dir() or trace_kind(path) is not None:
        return path
    found = xplanes(path)
    if found:
        return found[0]
    inside = trace_files(path)
    if len(inside) == 1:
        return inside[0]
    if inside:
        names = ", ".join(p.name for p in inside[:4]) + (", ..." if len(inside) > 4 else "")
        raise UserError(f"{path}: a folder of {len(inside)} traces ({names}): import one of them")
    raise UserError(f"{path}: a folder with no trace this tracer reads in it ({readable()})")


def read_trace(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The normalised tables of one trace, without writing anything; a trace whose events end before
    they start is refused rather than summed (a negative share would pass for a real one)."""
    tables, clock = _read_trace(path)
    _refuse_negative(path, tables)
    return tables, clock


def _refuse_negative_durations(path: Path, folder: RunFolder, names: list[str]) -> None:
    """The streamed path's version of `read_trace`'s check: the row groups' statistics say where a
    negative duration can be, and only those row groups are read."""
    import pyarrow.parquet as pq

    for name in names:
        parquet = pq.ParquetFile(folder.table_path(name))
        if "dur_ns" not in parquet.schema_arrow.names:
            continue
        negative = 0
        for group, stats in enumerate(t.row_group_statistics(parquet, "dur_ns")):
            if stats is not None and stats.has_min_max and stats.min >= 0:
                continue
            durations = parquet.read_row_group(group, columns=["dur_ns"])["dur_ns"]
            negative += pc.sum(pc.less(durations, build.int_scalar(0))).as_py() or 0
        if negative:
            raise UserError(f"{path}: {negative} {name} events end before they start: the trace is damaged")


def _read_trace(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    read = _read(path)
    return read.tables, read.clock


def _read(path: Path) -> Read:
    """One trace read by its format's reader (`analyzers.ingest.readers`); nsys's, streamed, through a
    scratch folder."""
    reader = reader_of(trace_kind(path))
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if reader is None:
        raise not_readable(path)
    if reader.read is not None:
        return reader.read_trace(path)
    with tempfile.TemporaryDirectory(prefix="tracer-nsys-") as tmp:
        names, clock = _write_nsys(path, Path(tmp))
        return Read({name: pq.read_table(Path(tmp) / f"{name}.parquet") for name in names}, clock)


def ingest_nsys(path: Path, folder: RunFolder) -> tuple[list[str], Clock]:
    """An nsys export (or a .nsys-rep, exported first) streamed into the run folder's tables: memory
    stays flat in the number of rows (see `nsys_duckdb.write_sqlite`). The tables written, and their clock."""
    folder.path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ingest-", dir=folder.path) as tmp:
        names, clock = _write_nsys(path, Path(tmp))
        return install_parts(folder, Path(tmp), names, t.SOURCE_NSYS, clock), clock


def _write_nsys(path: Path, staged: Path) -> tuple[list[str], Clock]:
    """The tables of an nsys export written under `staged`. A .nsys-rep with an export beside it
    (`sibling_export`) is read from that; else it is exported there first, to Arrow where this nsys
    offers it, else to SQLite. An Arrow export this reader cannot take (another
    nsys release may lay it out otherwise) is replaced by a SQLite export of its report, when the
    report is there: `--trace nsys` leaves `raw/trace.nsys-rep` beside `raw/trace.arrow`."""
    from analyzers.ingest import nsys_arrow, nsys_duckdb

    kind = trace_kind(path)
    report = path if kind == tf.NSYS_REP else path.with_name(readers.stem(path.name) + REPORT_SUFFIX)
    sibling = sibling_export(path) if kind == tf.NSYS_REP else None
    if sibling is not None:
        path = sibling
    elif kind == tf.NSYS_REP:
        try:
            nsys_bin = tracing_nsys.nsys_if_any()
        except UserError:  # $NSYS names no nsys: export_nsys_rep says so, with what the report says of itself
            nsys_bin = None
        # with no nsys, export_nsys_rep says so in one line
        export = tracing_nsys.best_export(str(nsys_bin)) if nsys_bin is not None else "sqlite"
        path = staged / f"{readers.stem(path.name)}.{export}"
        export_nsys_rep(report, path, export)
    if trace_kind(path) == tf.NSYS_ARROW:
        try:
            return nsys_arrow.write_arrow(path, staged)
        except UserError:
            sqlite = beside(report if report.is_file() else path, SQLITE_EXPORT)
            if sqlite is not None and trace_kind(sqlite) == tf.NSYS_SQLITE:
                path = sqlite
            elif not report.is_file() or tracing_nsys.nsys_if_any() is None:
                raise
            else:
                path = staged / (readers.stem(report.name) + SQLITE_EXPORT)
                export_nsys_rep(report, path, "sqlite")
    return nsys_duckdb.write_sqlite(path, staged)


def source_of(path: Path) -> str:
    """Whose rows the trace's reader gives (the tables' `source`), from the registry; "other" for no format."""
    reader = reader_of(trace_kind(path))
    return reader.source if reader is not None else "other"


@dataclass(frozen=True)
class Ingested:
    """One trace ingested: the tables written, whose rows they are (their `source`), their clock, and what
    the trace says of its run; what trace_meta.json records of it, handed on rather than read back."""

    tables: list[str]
    source: str
    clock: Clock
    facts: dict[str, int]


def ingest_file(path: Path, folder: RunFolder) -> list[str]:
    """Reads one trace and writes its tables into the run folder; returns the table names written."""
    return ingest_trace(path, folder).tables


def ingest_trace(path: Path, folder: RunFolder) -> Ingested:
    """Reads one trace by its format's reader and writes its tables into the run folder."""
    path = Path(path)
    reader = reader_of(trace_kind(path))
    if reader is not None and reader.read is None:  # nsys: streamed into the folder
        if not path.exists():
            raise UserError(f"{path}: no such file")
        written, clock = ingest_nsys(path, folder)
        _refuse_negative_durations(path, folder, written)
        return Ingested(written, reader.source, clock, {})
    read = _read(path)
    _refuse_negative(path, read.tables)
    source = _written_by(read.tables) or source_of(path)
    return Ingested(write_tables(folder, read.tables, source, read.clock, read.facts), source, read.clock, read.facts)


def _written_by(tables: dict[str, pa.Table]) -> str | None:
    """The `source` the reader gave the rows (a Chrome-trace JSON may be Kineto's, paddle's or MXNet's)."""
    for table in tables.values():
        if table.num_rows and "source" in table.column_names:
            return str(table["source"][0].as_py())
    return None


def ingest_run(folder: RunFolder) -> list[str]:
    """Ingests every known trace under raw/, then writes the thread timeline from them and the samples
    (`analyzers.ingest.threads`) and, for a big trace, the run's view (`analyzers.timeline.view_store`); returns
    the distinct table names written. A run traced in a window says
    so in TRACE_META, under each source: `window` (its --trace-window) and `window_ns`."""
    from analyzers.ingest import threads

    written: list[str] = []
    paths = run_traces(folder)
    ranks = rank_traces(folder, paths)
    if ranks:  # an import of several ranks' Kineto files: one table per kind, a RANK column, one clock
        from analyzers.ingest import ranks as rank_ingest
        from analyzers.ingest import trace_steps

        read = rank_ingest.read_kineto_ranks(ranks)
        aligned = rank_ingest.align(read)
        written += rank_ingest.write_ranks(folder, read, aligned)
        trace_steps.write_steps(folder, rank_ingest.step_ranges(read, aligned))
        paths = [p for p in paths if p not in ranks]
    for path in paths:
        for name in ingest_file(path, folder):
            if name not in written:
                written.append(name)
    _record_window(folder)
    if threads.write(folder):
        written.append(t.THREAD_TIMELINE)
    _store_view(folder)
    return written


def _store_view(folder: RunFolder) -> None:
    """The run's view for the viewer (`analyzers.timeline.view_store`), stored for a big trace so that it opens at
    once; a failure here loses nothing (the viewer builds the view itself): one line, not a failed ingest."""
    from analyzers.run.run import Run
    from analyzers.timeline import view_store  # here: view_store reads the tables this package writes

    try:
        view_store.store_if_big(Run.open(folder))
    except Exception as e:  # noqa: BLE001 - the tables are written; the view is an optimisation
        print(
            f"tracer: warning: the viewer's view of {folder.path.name} was not stored ({type(e).__name__}: {e})",
            file=sys.stderr,
        )


def ingest_if_needed(folder: RunFolder) -> RunFolder:
    """The folder to read a run's tables from: the run's own, ingested first where its raw traces have no
    tables yet (a run whose ingest failed or was never done); nothing is done for one already ingested,
    whose tables (its thread timeline with what py-spy said) stay as the ingest wrote them. A run folder
    that cannot be written (read-only, another user's) is ingested into the tool's cache instead, as the
    view store does: a folder there that links to every file of the run and holds the tables beside them."""
    if not run_traces(folder) or (folder.path / t.TRACE_META).exists():  # every ingested trace records its clock
        return folder
    if os.access(folder.path, os.W_OK):
        ingest_run(folder)
        return folder
    return _ingested_in_cache(folder)


INGESTED_DIR = "ingested"
"""Under the tool's cache (`tracer.core.paths.cache_root`): the tables of read-only run folders."""


def _ingested_in_cache(folder: RunFolder) -> RunFolder:
    import hashlib

    from tracer.core.paths import cache_root

    st = folder.run_json.stat()
    key = hashlib.sha256(f"{folder.path.resolve()}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    final = cache_root() / INGESTED_DIR / key / folder.run_id
    if (final / t.TRACE_META).exists():
        return RunFolder(final)
    final.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{key}-", dir=final.parent.parent) as tmp:
        scratch = Path(tmp) / folder.run_id
        scratch.mkdir()
        for entry in folder.path.iterdir():  # links: nothing of the run is copied, or ever written
            (scratch / entry.name).symlink_to(entry.resolve())
        ingest_run(RunFolder(scratch))
        final.parent.mkdir(exist_ok=True)
        try:
            os.replace(scratch, final)
        except OSError:  # another process finished first: theirs is as good
            if not (final / t.TRACE_META).exists():
                raise
    return RunFolder(final)


def _record_window(folder: RunFolder) -> None:
    from analyzers.trace.trace_window import window_span

    meta_path = folder.path / t.TRACE_META
    span = window_span(folder)
    if span is None or not meta_path.exists():
        return
    meta = json.loads(meta_path.read_text())
    for entry in meta.values():
        entry |= {t.WINDOW_FACT: span.window.text, t.WINDOW_NS_FACT: [span.start_ns, span.end_ns]}
    write_json_atomic(meta_path, meta)


def span_ns(folder: RunFolder, names: list[str]) -> tuple[int | None, int | None]:
    """First start and last end over the given tables, from the Parquet footers' statistics (no rows
    read: an imported file may hold tens of millions)."""
    starts: list[int] = []
    ends: list[int] = []
    for name in names:
        meta = pq.ParquetFile(folder.table_path(name)).metadata
        cols = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for col, out, pick in (("start_ns", starts, "min"), ("end_ns", ends, "max")):
                stats = rg.column(cols[col]).statistics
                if stats is not None and stats.has_min_max:
                    out.append(int(getattr(stats, pick)))
    return (min(starts) if starts else None, max(ends) if ends else None)
