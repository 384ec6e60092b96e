"""`tracer import`'s work: a run folder made from traces someone already has (an nsys export or report,
Kineto JSON, XPlane, rocpd, nsys-jax: `tracer.core.trace_formats`; several ranks' Kineto traces), so it can be
analysed, viewed and compared like a run of ours. The CLI parses, calls `import_trace` and prints its result.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzers.ingest import ranks as rank_ingest
from analyzers.ingest import readers, trace_steps
from analyzers.ingest.archives import is_archive
from analyzers.ingest.pipeline import (
    import_target,
    ingest_trace,
    not_readable,
    sibling_export,
    span_ns,
    trace_kind,
)
from analyzers.ingest.readers import reader_of
from analyzers.ingest.sniff import trace_files
from analyzers.trace.tables import (
    ALIGNMENT_FACT,
    BATCH_FACT,
    SOURCE_KINETO,
    SOURCE_MXNET,
    SOURCE_PADDLE,
    TRACE_OF_SOURCE,
)
from tracer.core import trace_formats as tf
from tracer.core.cases import IMPORTED_FRAMEWORK, UNKNOWN_MODEL
from tracer.core.errors import UserError
from tracer.core.records import EnvironmentInfo, Outcome, RankInfo, RunRecord, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.workload import ImportedWorkload, Measurement, TraceClock


@dataclass(frozen=True)
class ImportLabels:
    """What the user says the trace is of: recorded as given, not checked as run options."""

    framework: str = IMPORTED_FRAMEWORK
    model: str = UNKNOWN_MODEL
    device: str = "gpu"
    batch: int | None = None  # `--batch N`: the batch the trace does not record (its steps' images)


@dataclass(frozen=True)
class Imported:
    """A finished import: the run folder, what it was made from, its tables and ranks."""

    folder: RunFolder
    label: Path  # what the user named (the folder or archive of several ranks' traces, or the one file)
    tables: tuple[str, ...]
    ranks: int  # ranks on one clock (0: a trace of one process)
    alignment: str | None  # how the ranks' clocks were put on one, where there are several


RUN_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
MAX_RUN_ID = 120


def _run_id(path: Path) -> str:
    """The time, then the file's whole stem (anything but letters, digits, `.`, `_`, `-` as `-`), so
    files of one folder (`run_nsys2024.5.sqlite`, `run_nsys2024.6.sqlite`) get ids that tell them apart."""
    stem = RUN_ID_CHARS.sub("-", readers.stem(path.name)).strip("-.") or "trace"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-imported-{stem}"[:MAX_RUN_ID]


def _made(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)


def import_trace(
    paths: list[Path],
    out: Path,
    labels: ImportLabels,
    prepare_out: Callable[[Path], object] = _made,
    link_files: bool = False,
) -> Imported:
    """One run folder under `out` from `paths`: one trace (a file, a folder that is a trace, a profile folder's
    newest XPlane), or several ranks' traces (files, a folder of them, an archive). `prepare_out(out)` makes
    the folder once the inputs are known to be traces (a wrong input is named before a wrong `--out`); a
    failure leaves nothing of the run behind. `link_files`: raw/ links to the traces instead of holding
    copies (the cache's imports of a file named on a command, `analyzers.ingest.cached_run`)."""
    place = _link if link_files else _copy
    if len(paths) == 1 and not is_archive(paths[0]) and not _several_traces(paths[0]):
        path = import_target(paths[0])
        if trace_kind(path) not in readers.file_kinds():
            raise not_readable(path)
        prepare_out(out)
        return _import(labels, out, path, [path], place=place)
    with tempfile.TemporaryDirectory(prefix="tracer-ranks-") as scratch:
        files = rank_ingest.expand(paths, Path(scratch))
        prepare_out(out)
        # the files of an archive are unpacked into `scratch`, gone after the import: copied, never linked
        place = _copy if any(is_archive(p) for p in paths) else place
        if len(files) == 1:
            return _import(labels, out, files[0], paths, place=place)
        return _import(labels, out, files[0], paths, files, place=place)


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)


def _link(source: Path, target: Path) -> None:
    target.symlink_to(source.resolve())


def _several_traces(path: Path) -> bool:
    """A folder holding two or more trace files (several ranks' traces), not itself a trace."""
    if not path.is_dir() or trace_kind(path) is not None:
        return False
    return len(trace_files(path)) > 1


def _import(
    labels: ImportLabels,
    out: Path,
    path: Path,
    named: list[Path],
    ranks_files: list[Path] | None = None,
    place: Callable[[Path, Path], None] = _copy,
) -> Imported:
    """One run folder from `path` (one trace: Kineto, with its rank where it names one, nsys, split by
    process, XPlane, rocpd, nsys-jax) or from `ranks_files` (several ranks' Kineto traces); `named` is what
    the user gave."""
    label = named[0] if len(named) == 1 else path
    run_id = _run_id(label)
    n = 1
    while (out / run_id).exists():
        n += 1
        run_id = f"{_run_id(label)}-{n}"
    # Built under a hidden name and renamed into place once its run.json is written: a signal or a crash
    # at any instant leaves a whole run or none (after SIGKILL, a hidden folder that holds no run.json).
    folder = RunFolder.create(out, f".{run_id}{STAGING_SUFFIX}")
    try:
        return _import_into(labels, out, folder, run_id, label, path, ranks_files, place)
    except BaseException as e:
        shutil.rmtree(folder.path, ignore_errors=True)
        full = disk_full(out, e) if isinstance(e, Exception) else ""
        if full:
            raise UserError(f"{full}: free some space and import {label} again") from None
        raise


STAGING_SUFFIX = ".importing"


def _import_into(
    labels: ImportLabels,
    out: Path,
    folder: RunFolder,
    run_id: str,
    label: Path,
    path: Path,
    ranks_files: list[Path] | None,
    place: Callable[[Path, Path], None],
) -> Imported:
    """Ingests into the staging `folder`, copies (or links, `place`) the files into raw/, writes run.json,
    renames it `run_id`."""
    files = ranks_files or [path]
    for f in files:
        if f.is_dir():
            refuse_links_out(f)
    rank_infos: tuple[RankInfo, ...] = ()
    gpus: tuple[Any, ...] = ()
    # streamed straight into the folder (memory flat in the rows); a bad file leaves nothing behind
    # what the ingest wrote to trace_meta.json is handed on here, not read back
    if trace_kind(path) == tf.KINETO:
        read = rank_ingest.read_kineto_ranks(files)
        aligned = rank_ingest.align(read)
        written = rank_ingest.write_ranks(folder, read, aligned)
        if len(read) > 1 or read[0].info.world_size > 1:
            rank_infos = tuple(r.info for r in read)
        gpus = _used_gpus(read)
        source, read_clock, facts = SOURCE_KINETO, read[0].clock, rank_ingest.facts_of(read)
        traced = rank_ingest.step_ranges(read, aligned)
    else:
        if ranks_files:
            raise UserError(f"{path}: several nsys exports are not one run; import one export holding every rank")
        ingested = ingest_trace(path, folder)
        written = ingested.tables
        split, rank_of_pid = rank_ingest.split_nsys(folder, written)
        rank_infos = tuple(split)
        source, read_clock, facts, aligned = ingested.source, ingested.clock, ingested.facts, rank_ingest.NSYS_RANKS
        ranges = trace_steps.written_ranges(folder, written)
        traced = [trace_steps.Ranges(ranges, batch=facts.get(BATCH_FACT), rank_of_pid=rank_of_pid)]
    trace_steps.write_steps(folder, traced)  # every format's steps from its own ranges, in this one place
    try:
        for f in files:
            place(f, folder.raw_dir / f.name)
        beside = sibling_export(path) if trace_kind(path) == tf.NSYS_REP else None
        if beside is not None:  # what was read: the folder is re-ingested from it, with no nsys needed
            place(beside, folder.raw_dir / beside.name)
    except OSError as e:
        raise UserError(f"{disk_full(out, e) or e}: {label} was not imported") from None
    # each rank's file and shift stay in trace_meta.json; the run says how they were put on one clock
    alignment = aligned.text() if rank_infos else None
    clock: dict[str, Any] = read_clock.to_json() | {k: v for k, v in facts.items() if k != BATCH_FACT}
    clock |= {ALIGNMENT_FACT: alignment} if alignment else {}
    batch = facts.get(BATCH_FACT)  # Kineto with recorded shapes names it; nothing else does
    batch_from = "the trace's first convolution input (recorded shapes)"
    if labels.batch is not None:
        if batch is not None and int(batch) != labels.batch:
            raise UserError(f"{label}: --batch {labels.batch}, but the trace records batch {batch}; drop --batch")
        batch, batch_from = labels.batch, "given on import (--batch)"
        _steps_with_images(folder, labels.batch)
    starts, ends = span_ns(folder, written)
    framework = labels.framework
    if framework == IMPORTED_FRAMEWORK:
        # the framework whose own profiler wrote the rows
        of_source = {SOURCE_KINETO: "pytorch", SOURCE_PADDLE: "paddle", SOURCE_MXNET: "mxnet"}
        reader = reader_of(trace_kind(path))  # a format that only one framework writes (nsys-jax)
        framework = of_source.get(source, reader.framework if reader and reader.framework else framework)
    workload = ImportedWorkload(
        source=str(label.resolve()),
        format=trace_kind(path) or "",
        model=labels.model,  # the user's words, recorded as given
        batch=int(batch) if batch is not None else None,  # None: not recorded (never a made-up batch)
        batch_from=batch_from if batch is not None else "",
        clock=TraceClock(str(clock.pop("clock", "")), int(clock.pop("offset_ns", 0)), alignment),
    )
    record = RunRecord(
        run_id=run_id,
        workload=workload,
        # what the trace says of how it was measured; nothing was sampled, timed or watched by the tool
        measurement=Measurement(framework, labels.device, trace=TRACE_OF_SOURCE.get(source, "none")),
        # The trace was made elsewhere: this machine's facts would mislead, so they stay unknown; the
        # GPUs a trace names (Kineto's deviceProperties, those its ranks used) are the trace's own facts.
        environment=EnvironmentInfo("unknown", "unknown", "unknown", 0, 0, 0.0, sys.version.split()[0], gpus=gpus),
        outcome=Outcome(status=RunStatus.OK, cause=f"imported from {label.name}"),
        wall_start_ns=starts if starts is not None else 0,
        wall_end_ns=ends,
        trace_files=tuple(f"raw/{f.name}" for f in files),
        ranks=rank_infos,
    )
    folder.write_record(record)
    os.rename(folder.path, out / run_id)
    ranks = len(rank_infos) if len(rank_infos) > 1 else 0
    return Imported(RunFolder(out / run_id), label, tuple(written), ranks, alignment if ranks else None)


def _steps_with_images(folder: RunFolder, batch: int) -> None:
    """The steps table's missing images filled with the batch the user gave (each step one batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tracer.core import schema

    path = folder.sample_parquet_path(schema.STEPS_TABLE)
    if not path.exists():
        return
    table = pq.read_table(path)
    i = table.schema.get_field_index("images")
    filled = pc.fill_null(table["images"], pa.scalar(batch, table.schema.field(i).type))
    pq.write_table(table.set_column(i, table.schema.field(i), filled), path)


def refuse_links_out(folder: Path) -> None:
    """A trace folder is copied into the run as it is: a link in it to a folder (a link to `/` would copy the
    machine, one to `..` round a loop), to a file outside it, or to nothing is refused in one line, before
    anything is read or copied."""
    root = folder.resolve()
    for where, dirs, files in os.walk(folder):  # links are not followed
        for name in (*dirs, *files):
            link = Path(where) / name
            if not link.is_symlink():
                continue
            try:
                target = link.resolve(strict=True)
            except (OSError, RuntimeError):
                raise UserError(
                    f"{link}: a link round a loop or to nothing; remove it and import {folder} again"
                ) from None
            if target.is_dir() or not target.is_relative_to(root):
                what = "a folder" if target.is_dir() else "a file outside the folder"
                raise UserError(
                    f"{link}: a link to {what} ({str(target)[:200]}); copy what the trace needs into {folder} "
                    "and import it again"
                )


def _used_gpus(read: list[Any]) -> tuple[Any, ...]:
    """The GPUs the ranks ran on, as their traces' deviceProperties name them (each once)."""
    used = {r.info.local_rank for r in read}
    by_index = {g.index: g for r in read for g in r.gpus}
    return tuple(by_index[i] for i in sorted(used) if i in by_index)


LOW_SPACE_BYTES = 1 << 20


def disk_full(out: Path, error: BaseException) -> str:
    """'disk full ...' when the import failed for want of space under `out` (its file system is nearly
    full, or the error says so): a full disk is not a damaged input file."""
    said = f"{error} {getattr(error, 'strerror', '') or ''}"
    where = next((p for p in (out, *out.parents) if p.exists()), out)  # `out` may have been removed again
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return ""
    if free >= LOW_SPACE_BYTES and "No space left" not in said and getattr(error, "errno", None) != errno.ENOSPC:
        return ""
    return f"disk full: {free // 1024} KiB free under {out}"
