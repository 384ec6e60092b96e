"""`tracer analyze RUN` (CUDA API split, kernels, memory operations, threads) and
`tracer export-trace RUN OUT.json` (Chrome trace for Perfetto)."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from analyzers.ingest.import_cache import cache_name
from analyzers.trace import table_names as t
from tracer.cli.common import TOP_BOUND, add_runs_dir, check_bound, console, open_run, run_or_trace, warn_problems
from tracer.cli.outputs import output_file, path_arg
from tracer.core import schema
from tracer.core.errors import UserError

THREADS_SECTION = "threads"  # per-thread sums of the thread timeline (analyzers.summaries.threads.thread_summary)
CLASSES_SECTION = "kernel_classes"  # kernel time by what the kernels do (analyzers.summaries.rows.class_summary)
SECTIONS = (t.OPERATORS, t.CUDA_API, CLASSES_SECTION, t.KERNELS, t.MEMCPY, THREADS_SECTION)
"""The sections of `analyze`'s output, each named after the table it sums."""
RANKS_SECTION = "ranks"
"""For a run of several ranks: one row per rank (analyzers.figures.ranks.RankRow)."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("analyze", help="print a run's CUDA API split, kernel, memory and thread summaries")
    p.add_argument("run", help=run_or_trace())
    add_runs_dir(p)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    p.add_argument(
        "--phase",
        default="whole",
        help="whole (default), startup, warmup, steady (the epochs after the warm-up), teardown, or 'epoch N'",
    )
    p.add_argument("--top", type=int, default=20, help="rows per table in table format (default 20)")
    p.add_argument(
        "--rank", type=int, default=None, help="one rank of a run of several ranks (every table holds its rows only)"
    )
    p.set_defaults(func=cmd_analyze)
    e = sub.add_parser("export-trace", help="write a run as Chrome-trace JSON (open it in Perfetto)")
    e.add_argument("run", help=run_or_trace())
    e.add_argument("output", type=path_arg, help="the .json file to write (never inside a run folder or a dataset)")
    add_runs_dir(e)
    e.set_defaults(func=cmd_export)


def analysis(run: Any, phase: str) -> dict[str, list[dict[str, Any]]]:
    """Every section as plain rows, for one phase of a `Run` (analyzers.run) on the trace's clock."""
    from analyzers.summaries import cuda_api, kernels, operators, threads

    p = trace_phase(run, phase)
    return sections(
        operators.operator_summary(run, p.start_ns, p.end_ns),
        _api_rows(run, p),
        kernels.kernel_summary(run, p.start_ns, p.end_ns),
        kernels.memcpy_summary(run, p.start_ns, p.end_ns),
        threads.thread_summary(run, p.start_ns, p.end_ns),
        cuda_api.api_family(run),
    )


def sections(
    operator_rows: Any, api_rows: Any, kernel_rows: Any, memcpy_rows: Any, thread_rows: Any, family: str
) -> dict[str, list[dict[str, Any]]]:
    """The sections of `analyze`'s output from their rows, whether a run's tables or a file's summary gave
    them: kernel classes from the kernel rows, copy kinds labelled for the API family (CUDA or HIP)."""
    from analyzers.summaries.rows import class_summary

    return {
        t.OPERATORS: [dataclasses.asdict(r) for r in operator_rows],
        t.CUDA_API: [dataclasses.asdict(r) for r in api_rows],
        CLASSES_SECTION: [dataclasses.asdict(r) for r in class_summary(kernel_rows)],
        t.KERNELS: [dataclasses.asdict(r) for r in kernel_rows],
        t.MEMCPY: [dataclasses.asdict(r) | {"name": t.family_label(r.name, family)} for r in memcpy_rows],
        THREADS_SECTION: [dataclasses.asdict(r) for r in thread_rows],
    }


def trace_phase(run: Any, phase: str) -> Any:
    """The phase named `phase` ("steady", "epoch 2") among the run's phases on the trace's clock."""
    from analyzers.figures.phase_cuts import trace_phases

    wanted = " ".join(phase.split())
    found = trace_phases(run).get(wanted)
    if found is None:
        raise UserError(f"no phase '{phase}' in {run.path}: this run has {', '.join(trace_phases(run).names)}")
    return found


def _api_rows(run: Any, p: Any) -> list[Any]:
    """The CUDA API split of one phase: the run's per-phase split (one scan for every phase)."""
    from analyzers.summaries.cuda_api import api_summary
    from analyzers.timeline.view_store import api_phases

    if p.name in api_phases(run):
        return list(api_phases(run)[p.name])
    return api_summary(run, p.start_ns, p.end_ns)


def cmd_analyze(args: argparse.Namespace) -> int:
    check_bound(TOP_BOUND, args.top)
    direct = file_summary(args)
    if direct is not None:
        return direct
    run = open_run(args.run, args.runs_dir)
    try:
        return _print_analysis(run, args)
    finally:
        warn_problems([run])


def _print_analysis(run: Any, args: argparse.Namespace) -> int:
    from analyzers.figures.ranks import rank_table
    from analyzers.figures.run_summary import summarise
    from analyzers.render import display
    from analyzers.summaries.cuda_api import api_family

    by_rank = rank_table(run)
    if args.rank is not None:
        if by_rank is None:
            raise UserError(f"{run.path.name} is a run of one process: --rank is for runs of several ranks")
        run = run.rank(args.rank)  # every table below holds that rank's rows only
    data = analysis(run, args.phase)
    if by_rank is not None:
        data[RANKS_SECTION] = [r.to_json() for r in by_rank.rows if args.rank in (None, r.rank)]
        if args.rank is not None:  # every row says which rank it is of
            data = {k: [row | {schema.RANK: args.rank} for row in rows] for k, rows in data.items()}
    span = run.window
    cut = trace_phase(run, args.phase)
    head: dict[str, Any] = {"run": run.run_id, "phase": args.phase, "covers": cut.label(), "api": api_family(run)}
    head |= summarise(run).utilisation.to_json()  # FLOPs, peak, MFU (steady)
    if by_rank is not None:
        head |= {schema.RANK: args.rank, "ranks_basis": by_rank.basis, "comm_source": by_rank.comm_source}
        if args.format == "json" and args.rank is None:
            from tracer.cli.comm import comm_json

            head |= comm_json(run)
    head |= {"window": span.window.text, "window_ns": [span.start_ns, span.end_ns]} if span else {}
    title = window = operators_from = ""
    if args.format == "table":
        from analyzers.summaries.operator_compare import operator_source

        title = f"{run.run_id}, {cut.label()}{'; ' + cut.note if cut.note else ''}"
        title = f"{title}, rank {args.rank}" if args.rank is not None else title
        window = span.label if span and not cut.window else ""
        operators_from = operator_source(run)
    emit(data, args, head, title, window, operators_from)
    if args.format == "table" and by_rank is not None:
        headers, cells = display.table(data[RANKS_SECTION])
        table = Table(*headers, title=f"ranks — {by_rank.basis}; communication: {by_rank.comm_source}")
        for row in cells:
            table.add_row(*row)
        console().print(table)
        if args.rank is None:
            from tracer.cli.comm import print_collectives

            print_collectives(run, console())
    return 0


def emit(
    data: dict[str, list[dict[str, Any]]],
    args: argparse.Namespace,
    head: dict[str, Any],
    title: str,
    window: str = "",
    operators_from: str = "",
) -> None:
    """`data` printed in `args.format`: JSON (`head`, then every section), one CSV table, or the tables."""
    from analyzers.render import display

    if args.format == "json":
        head = head | ({"kernel_other_pct": other_pct(data[CLASSES_SECTION])} if data[CLASSES_SECTION] else {})
        from tracer.cli.json_output import dump

        dump("analyze", _finite(head | data))
    elif args.format == "csv":
        # One well-formed table: a `section` column, then every section's columns (empty where a
        # section has no such column), so a CSV reader gets one header, not one per section.
        sections = [*SECTIONS, *([RANKS_SECTION] if RANKS_SECTION in data else [])]
        columns = list(dict.fromkeys(key for section in sections for row in data[section] for key in row))
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["section", *columns])
        for section in sections:
            for r in data[section]:
                writer.writerow([section, *(display.csv_value(r[c]) if c in r else "" for c in columns)])
    else:
        print_tables(data, args.top, title, head["api"], window, operators_from)


def file_summary(args: argparse.Namespace) -> int | None:
    """`analyze FILE` of a whole nsys export: the CUDA API, kernel, memory and thread summaries straight
    from the file (`analyzers.ingest.nsys_summary`, cached by the file's identity), with no import, as the
    imported run would print them (an export has no framework operators). None where that path does not
    apply: another format, a phase or a rank asked for."""
    path = Path(args.run)
    if args.rank is not None or " ".join(args.phase.split()) != "whole" or not path.is_file():
        return None
    from analyzers.ingest import nsys_summary

    if not nsys_summary.readable(path):
        return None
    from analyzers.figures.phases import WHOLE, Phase
    from analyzers.figures.utilisation import of_unnamed_trace
    from analyzers.summaries.rows import ApiRow, KernelRow, MemcpyRow, ThreadRow, shown

    found = nsys_summary.cached_summary(path)
    if found.processes > 1:  # its import makes each process a rank, with a table of them: read from the import
        return None
    api = [ApiRow(*r) for r in found.cuda_api]
    family = t.api_family(r.name for r in api)
    data = sections(
        [],
        api,
        [KernelRow(*r) for r in found.kernels],
        [MemcpyRow(*m) for m in found.memcpy],
        [ThreadRow(*r) for r in found.threads if shown(r[1], r[2])],
        family,
    )
    whole = Phase(WHOLE, None, None)
    run_id = cache_name(path)
    head = {"run": run_id, "phase": args.phase, "covers": whole.label(), "api": family}
    # as the import's run says it: no GPU named, no FLOPs counted (why, from the kernels' names)
    head |= of_unnamed_trace(r[0] for r in found.kernels).to_json()
    emit(data, args, head, f"{run_id}, {whole.label()}")
    return 0


def print_tables(
    data: dict[str, list[dict[str, Any]]],
    top: int,
    title: str,
    family: str = "CUDA",
    window: str = "",
    operators_from: str = "",
) -> None:
    """Durations in one adaptive unit per column (the unit in the header), names shortened (analyzers.render.display);
    a ROCm trace's tables say HIP (`family`, from analyzers.summaries.cuda_api.api_family). `window` ("window: epoch 2")
    is added to the title of every trace table: a run traced in a window has trace rows only there (the
    threads table's CPU times come from the sampler, which saw the whole run)."""
    from analyzers.render import display
    from analyzers.trace.tables import family_label

    out = console()
    titles = {
        t.OPERATORS: f"framework operators{' from ' + operators_from if operators_from else ''} (self time as the "
        "PyTorch profiler's key_averages sums it)",
        t.CUDA_API: family_label("CUDA API (as nsys cuda_api_sum)", family),
        CLASSES_SECTION: "GPU kernel time by class (what the kernels do)",
        t.KERNELS: "GPU kernels (as nsys cuda_gpu_kern_sum)",
        t.MEMCPY: "GPU memory operations (as nsys cuda_gpu_mem_time_sum)",
        THREADS_SECTION: "threads",
    }
    for section in SECTIONS:
        rows = data[section]
        if not rows:
            if section != t.OPERATORS:  # only a framework's own profiler records operators: no line for the others
                out.print(f"{titles[section]}: none in {_windowed(title, window, section)}")
            continue
        shown = rows if section == CLASSES_SECTION else rows[:top]  # a dozen classes at most: all of them
        headers, cells = display.table(shown)
        table = Table(*headers, title=f"{titles[section]} — {_windowed(title, window, section)}")
        for row in cells:
            table.add_row(*(escape(c) for c in row))  # `[float]` in a kernel's label is text, not markup
        out.print(table)
        if section == CLASSES_SECTION:
            out.print(other_line(rows), markup=False)
        if len(rows) > len(shown):
            out.print(f"... {len(rows) - top} more rows (--top N, or --format csv for all)")


def other_pct(rows: list[dict[str, Any]]) -> float:
    """The share (%) of kernel time no class took (the `kernel_classes` rows of `analysis`)."""
    from analyzers.trace.kernel_classes import OTHER

    total = sum(r["total_ns"] for r in rows)
    return 100.0 * sum(r["total_ns"] for r in rows if r["kernel_class"] == OTHER) / total if total else 0.0


def other_line(rows: list[dict[str, Any]]) -> str:
    """The share of kernel time no class took: printed under every class table, 0 % included."""
    from analyzers.trace.kernel_classes import OTHER, label

    return f"kernel time in '{label(OTHER)}' (no class): {other_pct(rows):.1f} %"


def _windowed(title: str, window: str, section: str) -> str:
    if not window or section == "threads" or window in title:
        return title
    return f"{title[:-1]}; {window})" if title.endswith(")") else f"{title} ({window})"


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: a share of nothing (0 / 0) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def cmd_export(args: argparse.Namespace) -> int:
    from analyzers.timeline import chrome_trace

    output_file(args.output, "export-trace")
    run = open_run(args.run, args.runs_dir)
    try:
        n = chrome_trace.export(run, args.output)
    finally:
        warn_problems([run])
    console().print(f"wrote {n} events to {args.output} (open it in Perfetto or chrome://tracing)")
    return 0
