"""`tracer compare RUN RUN [RUN ...]`: runs or groups of repeats side by side, as ratios to the first."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from tracer.cli.common import add_warmup, console


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "compare",
        help="compare runs or groups of repeats: steady-state speed, CPU, RSS, threads, GPU, CUDA API, as ratios",
        description="Headline numbers of runs side by side with each one's ratio to the first (above 1: larger). "
        "Runs of one spec (repeats, e.g. from `tracer profile --repeat N`) are pooled into one column: "
        "median, with the min-max range. A folder holding run folders stands for all of them.",
    )
    p.add_argument(
        "runs",
        metavar="RUN",
        nargs="+",
        help="run folder, run id (or a unique part) in --out, or a folder of runs; two columns at least",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="folder of runs for ids (default runs/)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="also write the comparison as CSV")
    p.add_argument("--top", type=int, default=5, help="CUDA API functions to list (default 5)")
    p.add_argument("--no-group", action="store_true", help="one column per run even where runs are repeats")
    add_warmup(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from analyzers.compare import compare, rows_for_print, write_csv
    from analyzers.repeats import group_repeats
    from tracer.runfolder import RUN_JSON, find_run, list_runs

    folders = []
    for ref in args.runs:
        path = Path(ref)
        inside = list_runs(path) if path.is_dir() and not (path / RUN_JSON).exists() else []
        folders += inside or [find_run(args.out, ref)]
    for folder in folders:
        folder.read_record()  # a damaged run.json is one line before anything is printed
    groups = [[f] for f in folders] if args.no_group else group_repeats(folders)
    result = compare(groups, top_cuda=args.top, warmup=args.warmup)
    out = console()
    for column in result.columns:
        s = column.head
        status = s.status + (f" ({s.cause})" if s.cause else "")
        runs = " ".join(column.run_ids) if len(column.summaries) < 4 else f"{len(column.summaries)} repeats"
        out.print(
            f"{column.letter}: {runs}  [{s.framework} {s.model} {s.device} batch {s.batch}, {status}]", markup=False
        )
        if column.contended:
            out.print(
                f"   warning: {column.contended} of {len(column.summaries)} run(s) contended "
                "(other processes held a large share of the CPU; see `tracer show`)",
                markup=False,
            )
    letters = [c.letter for c in result.columns]
    table = Table("metric", *letters, *(f"{x} / A" for x in letters[1:]))
    for row in rows_for_print(result):
        table.add_row(*row)
    out.print(table)
    if args.csv is not None:
        write_csv(result, args.csv)
        out.print(f"written to {args.csv}")
    return 0
