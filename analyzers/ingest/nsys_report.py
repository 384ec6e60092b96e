"""A `.nsys-rep` report read through an export: the export beside it where there is one fresh enough to be
its own (`sibling_export`), else `nsys export` with the nsys found here, and one line saying why when
neither can be had (no nsys, an nsys older than the report, an export beside it too old to be its own)."""

from __future__ import annotations

from pathlib import Path

from analyzers.ingest import readers
from analyzers.ingest.sniff import sniff
from tracer.core import trace_formats as tf
from tracer.core.errors import UserError
from tracer.measure.tracing import nsys as tracing_nsys


def export_nsys_rep(path: Path, out: Path, kind: str = "sqlite") -> None:
    """`nsys export --type kind` of a report into `out`, with the nsys `tracer.measure.tracing.nsys` finds;
    UserError (one line) when that fails."""
    try:
        nsys = tracing_nsys.find_nsys()
    except UserError as e:
        made = tracing_nsys.report_version(path)
        origin = "" if made is None else f" (the report was written by nsys {tracing_nsys.version_text(made)})"
        skipped = skipped_export(path)
        raise UserError(
            f"{path}: reading a .nsys-rep needs Nsight Systems{origin}: {e}{'; ' + skipped if skipped else ''}"
        ) from None
    tracing_nsys.check_can_read(nsys, path)
    failed = tracing_nsys.export(nsys, path, out, kind)
    if failed:
        made = tracing_nsys.report_version(path)
        have = tracing_nsys.version_text(tracing_nsys.nsys_version(str(nsys)))
        origin = "" if made is None else f"; the report is from nsys {tracing_nsys.version_text(made)}"
        raise UserError(
            f"{path}: `nsys export` by nsys {have} ({nsys}) failed ({failed}){origin}: for a report from a "
            "newer nsys, set NSYS to one at least as new, or export .sqlite where the report was made"
        )


EXPORTS = tuple(readers.READERS[kind].suffixes[0] for kind in (tf.NSYS_ARROW, tf.NSYS_SQLITE))
"""How `nsys export` names its Arrow and SQLite exports of `x.nsys-rep` (`x.arrow`, `x.sqlite`): each format's first
suffix, Arrow first (read rather than SQLite where both are there)."""
SQLITE_EXPORT = EXPORTS[1]
REPORT_SUFFIX = readers.READERS[tf.NSYS_REP].suffixes[0]
"""`.nsys-rep`: the report an export beside it was made from."""


def sibling_export(report: Path) -> Path | None:
    """An export of the report beside it (`x.nsys-rep` -> `x.arrow`, else `x.sqlite`, as `nsys export`
    names them): read instead of exporting again, which needs an nsys at least as new as the report's."""
    for suffix in EXPORTS:
        candidate = beside(report, suffix)
        if candidate is not None and sniff(candidate).kind in (tf.NSYS_ARROW, tf.NSYS_SQLITE):
            return candidate
    return None


EXPORT_SLACK_S = 2.0
"""An export may be this much older than its report and still be taken for its export: nsys finishes the report
after writing some exports, and copies (`cp -p`, rsync, zip) keep or round times to a second or two. Older
than that, a file of the same name is another trace, never this one's export."""


def beside(trace: Path, suffix: str) -> Path | None:
    """The file of the same whole stem (`readers.stem`, which keeps every dot of the name) with
    `suffix`, when it is a file written no earlier than `trace` (less EXPORT_SLACK_S): an export is made from
    its report, so a much older file of that name is another trace, never this one's export."""
    candidate = trace.with_name(readers.stem(trace.name) + suffix)
    try:
        fresh = candidate.stat().st_mtime >= trace.stat().st_mtime - EXPORT_SLACK_S
        return candidate if candidate.is_file() and fresh else None
    except OSError:
        return None


def skipped_export(report: Path) -> str:
    """Why an export beside `report` was not read ('' where there is none, or it was read)."""
    for suffix in EXPORTS:
        candidate = report.with_name(readers.stem(report.name) + suffix)
        try:
            if not candidate.is_file() or beside(report, suffix) is not None:
                continue
            older = report.stat().st_mtime - candidate.stat().st_mtime
        except OSError:
            continue
        return (
            f"{candidate.name} beside it is {older:.0f} s older than the report, so it is not taken for its export "
            f"(import {candidate.name} itself if it is)"
        )
    return ""
