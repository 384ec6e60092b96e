"""`tracer runs` and `tracer show`: what is in the runs folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from tracer.cli.blocks import print_diagnosis, print_step_parts
from tracer.cli.common import (
    add_runs_dir,
    add_warmup,
    console,
    err_console,
    fits,
    open_run,
    print_wrapped,
    run_or_trace,
    table_lines,
    warn_problems,
)
from tracer.cli.summary_text import (
    print_problems,
    print_repeats,
    print_summary,
)
from tracer.core.errors import UserError
from tracer.core.records import RunStatus


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("runs", help="list run folders")
    add_runs_dir(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.set_defaults(func=cmd_runs)
    s = sub.add_parser("show", help="print one run's summary")
    s.add_argument("run", help=run_or_trace())
    add_runs_dir(s)
    add_warmup(s)
    s.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    s.set_defaults(func=cmd_show)


def cmd_runs(args: argparse.Namespace) -> int:
    """The columns, each run's row, its marks and their legend are analyzers.summaries.run_rows' (the viewer's run
    browser shows the same rows)."""
    from analyzers.run.run import Run
    from analyzers.summaries import run_rows
    from analyzers.summaries.run_rows import LEGEND, RUNS_HEADERS
    from tracer.core.runfolder import list_runs, short_ids

    runs = [Run.open(f) for f in list_runs(args.runs_dir)]
    if args.format == "json":
        return _runs_json(runs, args.runs_dir)
    if not runs:
        err_console().print(f"no runs in {args.runs_dir}: make one with `tracer profile ...`")
        return 0
    out = console()
    ids = short_ids([f.run_id for f in runs])
    rows: list[tuple[str, ...]] = []
    for run in runs:
        try:
            rows.append(run_rows.run_row(run))
        except UserError as e:
            print(f"tracer: warning: {e}", file=sys.stderr)
            rows.append(run_rows.damaged_row(run.run_id))
        run.release()  # its row is made: a folder of many runs holds one run's tables at a time
    shown, shared = _split_shared(rows)
    if shared:
        print_wrapped(out, "every run: " + "; ".join(f"{h} {v}" for h, v in shared))
    # The whole ids where the table then fits the terminal (piped: always), else the ids' tails, else one
    # block per run (whole ids).
    tail_ids = False
    for short in (False, True):
        table = Table(*(RUNS_HEADERS[i] for i in shown), box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
        for row in rows:
            table.add_row(ids[row[0]] if short else row[0], *(row[i] for i in shown[1:]))
        lines = table_lines(out, table)
        if not fits(out) or max(line.cell_len for line in lines) <= out.width:  # piped without COLUMNS: no width
            for table_line in lines:
                out.print(table_line, highlight=False, soft_wrap=True)
            tail_ids = short
            break
    else:
        _print_narrow([RUNS_HEADERS[i] for i in shown], [[row[i] for i in shown] for row in rows], out)
    for mark, legend in LEGEND.items():
        if mark in ("img/s", "load") or any(mark in row[-3] for row in rows):
            print_wrapped(out, legend)
    where = f"in {args.runs_dir.resolve()}"
    print_wrapped(out, where + ("; id: the run id's tail, which every command takes" if tail_ids else ""))
    warn_problems(runs)
    return 0


def _runs_json(runs: list[Any], runs_dir: Path) -> int:
    """`runs --format json`: every run's row as column header -> cell (analyzers.summaries.run_rows)."""
    from analyzers.summaries import run_rows
    from analyzers.summaries.run_rows import RUNS_HEADERS
    from tracer.cli.json_output import dump

    rows = []
    for run in runs:
        try:
            cells = run_rows.run_row(run)
        except UserError as e:
            print(f"tracer: warning: {e}", file=sys.stderr)
            cells = run_rows.damaged_row(run.run_id)
        run.release()
        rows.append(dict(zip(RUNS_HEADERS, cells)))
    dump("runs", {"runs_dir": str(runs_dir.resolve()), "runs": rows})
    warn_problems(runs)
    return 0


def _split_shared(rows: list[tuple[str, ...]]) -> tuple[list[int], list[tuple[str, str]]]:
    """The columns that differ between rows (the id always), and (header, value) of those all rows share."""
    shown, shared = [], []
    from analyzers.summaries.run_rows import RUN_COLUMNS

    for i, column in enumerate(RUN_COLUMNS):
        values = {row[i] for row in rows}
        if i == 0 or len(rows) == 1 and i < 2 or len(values) > 1:
            shown.append(i)
        else:
            shared.append((column.header, values.pop() or column.none))
    return shown, shared


def _print_narrow(headers: list[str], rows: list[list[str]], out: Console) -> None:
    """One run per block when the table is wider than the terminal: the id on its own line, then
    `header value` pairs wrapped at spaces, never cut."""
    for row in rows:
        out.print(row[0], soft_wrap=True, markup=False)
        print_wrapped(out, ", ".join(f"{h} {v}" for h, v in zip(headers[1:], row[1:]) if v), "  ", "  ")


def cmd_show(args: argparse.Namespace) -> int:
    """Open, analyse once (analyzers.report.shown), then print: no analysis between the lines."""
    from analyzers.report.shown import shown
    from analyzers.run.run import Run

    run = open_run(args.run, args.runs_dir, args.warmup)
    if args.format == "json":
        return _show_json(run)
    repeats: tuple[Run, ...] = ()
    try:
        s = shown(run)
        repeats = s.repeats
        _print_shown(s, console())
    finally:
        warn_problems([r for r in repeats if r.run_id != run.run_id])
    return 0


def _print_shown(s: Any, out: Console) -> None:
    from analyzers.figures.straggler import summary_lines

    print_summary(s.summary, out)
    print_step_parts(s.step_parts, out)
    if s.repeat_summaries:
        print_repeats(list(s.repeat_summaries), out)
    record = s.run.record
    if record.world_size > 1:  # a run of several ranks: who they are (`tracer analyze RUN` has their table)
        infos = record.rank_infos
        devices = ", ".join(dict.fromkeys(r.device for r in infos if r.device)) or "devices not recorded"
        backend = ", ".join(dict.fromkeys(r.backend for r in infos if r.backend)) or "backend not recorded"
        out.print(
            f"ranks: {len(infos)} of world size {record.world_size} ({backend}; {devices}); per rank: "
            f"`tracer analyze {s.run.run_id}`, `--rank R`",
            markup=False,
        )
        for line in summary_lines(s.straggler) if s.straggler is not None and s.straggler.summary else []:
            out.print(f"  {line}", markup=False)
    if record.outcome.stderr_tail and record.outcome.status is not RunStatus.OK:
        out.print("last lines of the worker's output:")
        for line in record.outcome.stderr_tail[-10:]:
            out.print(f"  {line}", markup=False)
    print_diagnosis(s.diagnosis, out)
    print_problems(s.run, out)


def _show_json(run: Any) -> int:
    """`show --format json`: the run's summary record (analyzers.figures.run_summary.RunSummary), whole."""
    import dataclasses

    from analyzers.figures.run_summary import summarise
    from tracer.cli.json_output import dump

    try:
        summary = dataclasses.asdict(summarise(run))
    finally:
        warn_problems([run])
    dump("show", {"run": run.run_id, "summary": summary, "problems": [dataclasses.asdict(p) for p in run.problems]})
    return 0
