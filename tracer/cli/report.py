"""`tracer report`: the study's tables and figures, regenerated from run folders into one folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tracer.cli.common import add_out_dir, add_warmup, console, err_console, warn_problems
from tracer.cli.outputs import output_dir


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="write Tables 1-2, the findings and the figures (PNG, SVG, PDF, index.html) for a set of runs",
        description="Tables (CSV, Markdown), findings in sentences and figures (PNG, SVG, PDF) from run folders, "
        "and an index.html that shows them all and opens without a server.",
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_OR_DIR", help="run folders, or folders of runs")
    add_out_dir(p, "the report's tables, figures and index.html", required=True)
    p.add_argument(
        "--single-file",
        action="store_true",
        help="make index.html self-contained (figures embedded, no links to other files), to mail or attach",
    )
    add_warmup(p)
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from analyzers.report import collect_runs

    runs, warnings = collect_runs(args.runs)
    try:
        return _report(runs, warnings, args)
    finally:
        warn_problems(runs)


def _report(runs: list[Any], warnings: list[str], args: argparse.Namespace) -> int:
    from analyzers.report import charts, contention_warnings, plan_report, write_report
    from analyzers.report.outputs import Step

    err = err_console()
    output_dir(args.out)
    for warning in [*warnings, *contention_warnings(runs)]:  # the page lists the contended runs itself
        err.print(f"[yellow]warning:[/yellow] {warning}", markup=True, highlight=False)
    formats = charts.FORMATS
    total = len(plan_report(runs, args.out, formats, args.warmup))
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    with progress:
        task = progress.add_task("report", total=total)
        started = [0]

        def on_step(step: Step) -> None:
            progress.update(task, description=step.description, completed=started[0])
            started[0] += 1

        index, outputs = write_report(
            runs, args.out, formats, warnings, on_step=on_step, warmup=args.warmup, single_file=args.single_file
        )
        progress.update(task, completed=total)
    figures = sum(o.kind == "figure" for o in outputs)
    console().print(f"{len(runs)} runs: 2 tables and {figures} figures in {args.out}; open {index}")
    return 0
