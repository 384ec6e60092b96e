"""`tracer import FILE`: a run folder made from a trace someone already has (an nsys export or report,
Kineto JSON: `tracer.core.trace_formats`), so it can be analysed, viewed and compared like a run of ours."""

from __future__ import annotations

import argparse
import errno
import json
import re
import shutil
import sys
import time
from pathlib import Path

from tracer.cli.common import add_out_dir, console
from tracer.cli.outputs import output_dir
from tracer.core import trace_formats as tf
from tracer.core.cases import UNKNOWN_MODEL
from tracer.core.errors import UserError
from tracer.core.frameworks import framework_info


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import", help="make a run folder from a trace file (nsys, Kineto, XPlane, rocpd, nsys-jax)")
    p.add_argument("file", type=Path, help=f"a trace file or folder: {tf.READABLE}")
    add_out_dir(p)
    p.add_argument("--framework", default="imported", help="label the run with the framework that made the trace")
    p.add_argument("--model", default=UNKNOWN_MODEL, help="label the run with the model that was traced")
    p.add_argument("--device", default="gpu", choices=["cpu", "gpu"], help="where it ran (default gpu)")
    p.set_defaults(func=cmd_import)


# The framework a trace format can only come from (Kineto is PyTorch's profiler, nsys-jax wraps JAX);
# nsys, rocprof and XPlane (JAX and TensorFlow both write it) trace any.
FRAMEWORK_OF_FORMAT = {tf.NSYS_JAX: "jax"}
NOT_RECORDED = ("batch", "epochs")  # spec fields an imported trace does not carry: shown as "not recorded"


RUN_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
MAX_RUN_ID = 120


def _run_id(path: Path) -> str:
    """The time, then the file's whole stem (anything but letters, digits, `.`, `_`, `-` as `-`), so
    files of one folder (`run_nsys2024.5.sqlite`, `run_nsys2024.6.sqlite`) get ids that tell them apart."""
    stem = RUN_ID_CHARS.sub("-", tf.stem(path.name)).strip("-.") or "trace"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-imported-{stem}"[:MAX_RUN_ID]


def cmd_import(args: argparse.Namespace) -> int:
    from analyzers.ingest import (
        _source_of,
        import_target,
        ingest_file,
        not_readable,
        sibling_export,
        span_ns,
        trace_kind,
    )
    from analyzers.tables import (
        BATCH_FACT,
        SOURCE_KINETO,
        SOURCE_MXNET,
        SOURCE_PADDLE,
        TRACE_META,
        TRACE_OF_SOURCE,
    )
    from tracer.core.records import EnvironmentInfo, ImportOrigin, Outcome, RunRecord, RunSpec, RunStatus
    from tracer.core.runfolder import RunFolder

    if args.framework != "imported":
        framework_info(args.framework)
    path: Path = import_target(args.file)
    if trace_kind(path) not in tf.FILE_KINDS:
        raise not_readable(path)
    out_existed = args.out.exists()
    run_id = _run_id(path)
    n = 1
    output_dir(args.out)
    while (args.out / run_id).exists():
        n += 1
        run_id = f"{_run_id(path)}-{n}"
    folder = RunFolder.create(args.out, run_id)
    try:  # streamed straight into the folder (memory flat in the rows); a bad file leaves nothing behind
        written = ingest_file(path, folder)
    except BaseException as e:
        shutil.rmtree(folder.path, ignore_errors=True)
        if not out_existed and not any(args.out.iterdir()):
            args.out.rmdir()
        full = disk_full(args.out, e)
        if full:
            raise UserError(f"{full}: free some space and import {path} again") from None
        raise
    try:
        if path.is_dir():
            shutil.copytree(path, folder.raw_dir / path.name)
        else:
            shutil.copyfile(path, folder.raw_dir / path.name)
        beside = sibling_export(path) if trace_kind(path) == tf.NSYS_REP else None
        if beside is not None:  # what was read: the folder is re-ingested from it, with no nsys needed
            shutil.copyfile(beside, folder.raw_dir / beside.name)
    except OSError as e:
        shutil.rmtree(folder.path, ignore_errors=True)
        raise UserError(f"{disk_full(args.out, e) or e}: {path} was not imported") from None
    meta = json.loads((folder.path / TRACE_META).read_text())
    source = _source_of(path) if _source_of(path) in meta else next(iter(meta))  # Kineto's JSON, or paddle's ...
    clock = meta[source]
    clock.pop("tables", None)
    batch = clock.pop(BATCH_FACT, None)  # Kineto with recorded shapes names it; nothing else does
    starts, ends = span_ns(folder, written)
    framework = args.framework
    if framework == "imported":
        # the framework whose own profiler wrote the rows
        of_source = {SOURCE_KINETO: "pytorch", SOURCE_PADDLE: "paddle", SOURCE_MXNET: "mxnet"}
        framework = of_source.get(source, FRAMEWORK_OF_FORMAT.get(trace_kind(path) or "", framework))
    record = RunRecord(
        run_id=run_id,
        # An imported trace's labels are whatever the user says; they are recorded, not checked as options.
        spec=RunSpec(
            framework=framework,  # type: ignore[arg-type]
            model=args.model,
            dataset=str(path),
            device=args.device,  # type: ignore[arg-type]
            trace=TRACE_OF_SOURCE.get(source, "none"),  # type: ignore[arg-type]
            batch=int(batch) if batch is not None else RunSpec.batch,
        ),
        # The trace was made elsewhere: this machine's facts would mislead, so they stay unknown.
        environment=EnvironmentInfo("unknown", "unknown", "unknown", 0, 0, 0.0, sys.version.split()[0]),
        outcome=Outcome(status=RunStatus.OK, cause=f"imported from {path.name}"),
        wall_start_ns=starts if starts is not None else 0,
        wall_end_ns=ends,
        trace_files=(f"raw/{path.name}",),
        knobs={
            **ImportOrigin(
                str(path.resolve()), tuple(f for f in NOT_RECORDED if not (f == "batch" and batch is not None))
            ).to_knobs(),
            "clock": json.dumps(clock),
            **({"batch_from": "the trace's first convolution input (recorded shapes)"} if batch is not None else {}),
        },
    )
    folder.write_record(record)
    console().print(f"imported {path} -> {folder.path} ({', '.join(written) or 'no CUDA tables'})")
    return 0


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
