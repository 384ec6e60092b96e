"""`tracer diff A B`: why B's step per image differs from A's, in a few ranked sentences, then the tables."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from tracer.cli.common import add_runs_dir, add_warmup, console, open_run, run_or_trace, warn_problems


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff",
        help="why two runs differ: the per-image step-time gap split into data wait, host and GPU time by "
        "kernel class, ranked",
        description="The steady step per image of two runs split into waiting for data, compute or host time and "
        "GPU time by kernel class (where a trace exists), the gap between them ranked by part, in sentences, "
        "then the tables. Imported traces without steps compare their GPU time by kernel class over each window.",
    )
    p.add_argument("a", metavar="A", help=run_or_trace())
    p.add_argument("b", metavar="B", help="the run to explain against A")
    add_runs_dir(p)
    add_warmup(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from analyzers.comparison.diff import diff

    runs = [open_run(args.a, args.runs_dir), open_run(args.b, args.runs_dir)]
    try:
        result = diff(runs[0], runs[1], args.warmup)
        if args.format == "json":
            from tracer.cli.json_output import dump

            dump("diff", result.to_json())
        else:
            print_diff(result)
    finally:
        warn_problems(runs)
    return 0


def print_diff(result: Any) -> None:
    """The diff's words (analyzers.comparison.diff_output), its tables drawn with rich."""
    from analyzers.comparison.diff_output import side_lines, tables

    out = console()
    for line in side_lines(result):
        out.print(line, markup=False)
    out.print()
    for line in result.sentences:
        out.print(line, markup=False)
    for t in tables(result):
        table = Table(*t.headers, title=t.title)
        for row in t.rows:
            table.add_row(*row)
        out.print(table)
