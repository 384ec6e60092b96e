"""`tracer compare RUN_A RUN_B`: what changed from A to B, as ratios B / A."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tracer.cli.analyze import check_output_file
from tracer.cli.common import TOP_BOUND, add_runs_dir, check_bound, console


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "compare",
        help="compare two runs: epoch time, CPU, RSS, threads, GPU, CUDA API, as ratios B / A",
        description="Headline numbers of two runs side by side with the ratio B / A (above 1: B is larger).",
    )
    p.add_argument("run_a", metavar="RUN_A", help="run folder, or run id (or a unique part) in --out")
    p.add_argument("run_b", metavar="RUN_B", help="run folder, or run id (or a unique part) in --out")
    add_runs_dir(p)
    p.add_argument("--csv", type=Path, metavar="FILE", help="also write the comparison as CSV")
    p.add_argument("--top", type=int, default=5, help="CUDA API functions to list (default 5)")
    p.set_defaults(func=cmd_compare)


# What makes two runs comparable: framework and model are what a comparison is about, these are not.
SETTINGS = ("dataset", "device", "batch", "epochs", "limit", "image_size", "lr", "momentum", "workers",
            "prefetch", "threads", "amp", "trace")  # fmt: skip


def cmd_compare(args: argparse.Namespace) -> int:
    from analyzers.compare import compare, rows_for_print, write_csv
    from analyzers.energy import NO_SOURCE
    from tracer.core.runfolder import find_run

    check_bound(TOP_BOUND, args.top)
    if args.csv is not None:
        check_output_file(args.csv)
    a, b = find_run(args.runs_dir, args.run_a), find_run(args.runs_dir, args.run_b)
    spec_a, spec_b = a.read_record().spec, b.read_record().spec
    differ = [f for f in SETTINGS if getattr(spec_a, f) != getattr(spec_b, f)]
    if differ:
        said = ", ".join(f"{f} {getattr(spec_a, f)} vs {getattr(spec_b, f)}" for f in differ)
        print(f"tracer: warning: the runs differ in settings ({said}); ratios compare unlike runs", file=sys.stderr)
    result = compare(a, b, top_cuda=args.top)
    out = console()
    for label, s in (("A", result.a), ("B", result.b)):
        status = s.status + (f" ({s.cause})" if s.cause else "")
        out.print(f"{label}: {s.run_id}  [{s.framework} {s.model} {s.device} batch {s.batch}, {status}]", markup=False)
    table = Table("metric", "A", "B", "B / A")
    for row in rows_for_print(result):
        table.add_row(*row)
    out.print(table)
    for label, s in (("A", result.a), ("B", result.b)):
        if not s.energy:
            why = "; ".join(s.energy_unavailable)
            out.print(f"energy of {label}: {NO_SOURCE}" + (f" ({why})" if why else ""), markup=False)
    print_verdict_differences(a, b, result.a.framework, result.b.framework, out)
    if args.csv is not None:
        write_csv(result, args.csv)
        out.print(f"written to {args.csv}")
    return 0


def print_verdict_differences(a: object, b: object, label_a: str, label_b: str, out: Console) -> None:
    """Which diagnosis verdicts differ between the two runs, faster run first."""
    from analyzers.diagnosis.across import diagnosed_folder, pair_lines

    if label_a == label_b:
        label_a, label_b = f"A ({label_a})", f"B ({label_b})"
    lines = [line for _f, _s, diffs in pair_lines([diagnosed_folder(a, label_a), diagnosed_folder(b, label_b)])
             for line in diffs]  # fmt: skip
    out.print("[bold]Diagnosis: verdicts that differ[/bold]")
    for line in lines or ["none: the same rules fire with similar numbers"]:
        out.print(f"  {line}", markup=False)
