"""`tracer import FILE`: a run folder made from a trace someone already has (an nsys export or report,
Kineto JSON: `tracer.core.trace_formats`), so it can be analysed, viewed and compared like a run of ours.
The work is `analyzers.ingest.import_run.import_trace`'s; this parses, calls it and prints what it made."""

from __future__ import annotations

import argparse
from pathlib import Path

from analyzers.ingest.readers import readable
from tracer.cli.common import add_out_dir, console
from tracer.cli.outputs import output_dir
from tracer.core.cases import IMPORTED_FRAMEWORK, UNKNOWN_MODEL
from tracer.core.frameworks import framework_info


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import", help="make a run folder from a trace file (nsys, Kineto, XPlane, rocpd, nsys-jax)")
    p.add_argument(
        "files",
        type=Path,
        nargs="+",
        help=f"a trace file or folder ({readable()}); or several ranks' Kineto traces",
    )
    add_out_dir(p)
    p.add_argument(
        "--framework", default=IMPORTED_FRAMEWORK, help="label the run with the framework that made the trace"
    )
    p.add_argument("--model", default=UNKNOWN_MODEL, help="label the run with the model that was traced")
    p.add_argument("--device", default="gpu", choices=["cpu", "gpu"], help="where it ran (default gpu)")
    p.add_argument(
        "--batch",
        type=_positive,
        default=None,
        help="the batch size of each step, where the trace does not record it (then diff compares per image)",
    )
    p.set_defaults(func=cmd_import)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a batch size (a whole number from 1)")
    return value


def cmd_import(args: argparse.Namespace) -> int:
    from analyzers.ingest.import_run import ImportLabels, import_trace

    if args.framework != IMPORTED_FRAMEWORK:
        framework_info(args.framework)
    out_existed = args.out.exists()
    try:
        labels = ImportLabels(args.framework, args.model, args.device, args.batch)
        done = import_trace(list(args.files), args.out, labels, prepare_out=output_dir)
    except BaseException:
        if not out_existed and args.out.is_dir() and not any(args.out.iterdir()):
            args.out.rmdir()  # made for this import, which left nothing in it
        raise
    said = f", {done.ranks} ranks on one clock ({done.alignment})" if done.ranks else ""
    console().print(f"imported {done.label} -> {done.folder.path} ({', '.join(done.tables) or 'no CUDA tables'}{said})")
    return 0
