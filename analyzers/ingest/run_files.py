"""Which files of a run folder's raw/ are its traces: what a tracing backend wrote (a command's own logs
are never read as a trace, whatever they hold), with an export winning over its report; and which of them
are the ranks of one imported job, read together."""

from __future__ import annotations

from pathlib import Path

from analyzers.ingest import readers
from analyzers.ingest.sniff import sniff
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder
from tracer.measure.tracing import nsys as tracing_nsys


def _kind(path: Path) -> str | None:
    return sniff(Path(path)).kind


def run_traces(folder: RunFolder) -> list[Path]:
    """The traces under raw/ worth ingesting: an export (.arrow or .sqlite) wins over the .nsys-rep it
    was exported from, and Arrow over SQLite."""
    raw = folder.raw_dir
    if not raw.is_dir():
        return []
    written = _backend_files(folder)
    entries = [p for p in sorted(raw.iterdir()) if p.suffix != LOG_SUFFIX and (written is None or p.name in written)]
    found = [p for p in entries if _kind(p) in (*readers.file_kinds(), tf.CUPTI)]
    found = [p for p in found if not tf.is_pyspy(p.name)]  # read by the thread timeline
    stems = {kind: {readers.stem(p.name) for p in found if _kind(p) == kind} for kind in tf.NSYS_KINDS}
    shadowed = {tf.NSYS_REP: stems[tf.NSYS_SQLITE] | stems[tf.NSYS_ARROW], tf.NSYS_SQLITE: stems[tf.NSYS_ARROW]}
    return [p for p in found if readers.stem(p.name) not in shadowed.get(_kind(p) or "", set())]


LOG_SUFFIX = ".log"
"""raw/'s logs (the worker's, a command's stdout and stderr, the ingest's, nsys export's): never a trace,
whatever their first character."""


def _backend_files(folder: RunFolder) -> set[str] | None:
    """The names under raw/ a trace backend wrote, for a user's command's run: the files its record lists
    and nsys's own outputs (a report whose export failed is still there). None for other runs, whose raw/
    holds only what the tool wrote. A command's stdout and stderr are kept in raw/ too, and may hold
    anything, a Chrome trace among it: they are never read as the run's trace."""
    try:
        record = folder.read_record()
    except (UserError, OSError, ValueError):
        return None
    if record.command is None:
        return None
    listed = {Path(name).name for name in record.trace_files}
    return listed | {Path(name).name for name in (tracing_nsys.REPORT, *tracing_nsys.EXPORTS.values())}


def rank_traces(folder: RunFolder, paths: list[Path]) -> list[Path]:
    """The Kineto files of an imported run of several ranks, or of a command's ranks, read together as
    `tracer import` reads them (one at a time, each rank's rows would replace the last's)."""
    kineto = [p for p in paths if _kind(p) == tf.KINETO]
    if len(kineto) < 2:
        return []
    try:
        record = folder.read_record()
    except (UserError, OSError, ValueError):
        return []
    # an import of several ranks, or a command's ranks under `--trace torch` (one Kineto file each)
    return kineto if (record.imported is not None or record.command is not None) and len(record.ranks) > 1 else []
