"""`tracer compare RUN RUN [RUN ...]`: runs or groups of repeats side by side, as ratios to the first."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tracer.cli.blocks import print_data_pairs
from tracer.cli.common import (
    TOP_BOUND,
    add_runs_dir,
    add_warmup,
    check_bound,
    console,
    err_console,
    open_run,
    print_wrapped,
    warn_problems,
)
from tracer.cli.outputs import output_file, path_arg
from tracer.core.errors import UserError
from tracer.core.workload import NOT_RECORDED


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "compare",
        help="compare runs or groups of repeats: steady-state speed, CPU, RSS, threads, GPU, energy, CUDA API, "
        "as ratios",
        description="Headline numbers of runs side by side with each one's ratio to the first (above 1: larger). "
        "Runs of one spec (repeats, e.g. from `tracer profile --repeat N`) are pooled into one column: "
        "median, with the min-max range. A folder holding run folders stands for all of them.",
    )
    p.add_argument(
        "runs",
        metavar="RUN",
        nargs="+",
        help="run folder, run id (or a unique part) in --runs, a folder of runs, or a trace (imported into the "
        "cache on first use, as `tracer import` imports it); two columns at least",
    )
    add_runs_dir(p)
    p.add_argument(
        "--csv", type=path_arg, metavar="FILE", help="also write the comparison as CSV (never inside a run or dataset)"
    )
    p.add_argument("--top", type=int, default=5, help="CUDA API functions to list (default 5)")
    p.add_argument("--no-group", action="store_true", help="one column per run even where runs are repeats")
    add_warmup(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format (default table)")
    p.set_defaults(func=cmd_compare)


# What makes runs comparable: framework and model are what a comparison is about, these are not.
SETTINGS = ("dataset", "device", "batch", "epochs", "limit", "image_size", "lr", "momentum", "workers",
            "prefetch", "pipeline", "sync_every", "threads", "amp", "trace")  # fmt: skip


def _shown(value: object) -> str:
    """A setting as the run records it, or "not recorded" (an import's batch: never the option's default)."""
    return NOT_RECORDED if value is None else str(value)


def _pipeline(record: Any) -> object:
    """The input pipeline the worker ran (JAX has no native one: its knobs say shared), else the one asked for."""
    return record.knobs.get("pipeline", record.setting("pipeline"))


def cmd_compare(args: argparse.Namespace) -> int:
    from analyzers.run.run import Run
    from tracer.core.runfolder import list_runs
    from tracer.core.schema import RUN_JSON

    check_bound(TOP_BOUND, args.top)
    if args.csv is not None:
        output_file(args.csv, "--csv")
    folders = []
    for ref in args.runs:
        path = Path(ref)
        inside = list_runs(path) if path.is_dir() and not (path / RUN_JSON).exists() else []
        found = [Run.open(f, args.warmup) for f in _readable(inside)]
        folders += found or [open_run(ref, args.runs_dir, args.warmup)]
    try:
        return _compare(folders, args)
    finally:
        warn_problems(folders)


def _compare(folders: list[Any], args: argparse.Namespace) -> int:
    from analyzers.comparison.compare import compare
    from analyzers.comparison.compare_output import noise_notes, rows_for_print, write_csv
    from analyzers.figures.energy import NO_SOURCE
    from analyzers.figures.noise import REPEATS_DISAGREE, disagreement
    from analyzers.figures.repeats import group_repeats

    records = [folder.read_record() for folder in folders]  # a damaged run named alone: one line, exit 2
    differ = []
    for name in SETTINGS:
        values = list(dict.fromkeys(_shown(r.setting(name)) for r in records))
        if len(values) > 1:
            differ.append(f"{name} {' vs '.join(values)}")
    # What the worker ran, where it differs from what was asked: JAX has no native pipeline (knobs: shared).
    ran = list(dict.fromkeys(f"{r.measurement.framework} {_shown(_pipeline(r))}" for r in records))
    if len({_pipeline(r) for r in records}) > 1:
        differ.append(f"input pipeline as run {' vs '.join(ran)} (a shared pipeline decodes with PIL for all)")
    if differ:
        said = ", ".join(differ)
        warning = f"tracer: warning: the runs differ in settings ({said}); ratios compare unlike runs"
        print_wrapped(err_console(), warning)
    groups = [[f] for f in folders] if args.no_group else group_repeats(folders)
    if len(groups) < 2 <= len(folders):  # repeats of one spec, named one by one: compare them as runs
        groups = [[f] for f in folders]
    result = compare(groups, top_cuda=args.top, warmup=args.warmup)
    if args.format == "json":
        from tracer.cli.json_output import comparison_json, dump

        dump("compare", comparison_json(result))
        if args.csv is not None:
            write_csv(result, args.csv)
        return 0
    out = console()
    for column in result.columns:
        s = column.head
        status = s.status + (f" ({s.cause})" if s.cause else "")
        runs = " ".join(column.run_ids) if len(column.summaries) < 4 else f"{len(column.summaries)} repeats"
        what = f"{s.framework} {s.model} {s.device} batch {_shown(s.batch)}, data {_shown(s.data or None)}"
        if s.command:  # the script's own model, data and batch
            what = f"{s.framework}: {s.command}, {s.device}"
        out.print(f"{column.letter}: {runs}  [{what}, {status}]", markup=False)
        if not column.head.rankable and not any(x.rankable for x in column.summaries):
            out.print(f"   {column.letter}: speed not ranked ({column.head.not_rankable_why})", markup=False)
        for s_out in column.left_out:
            out.print(
                f"   {column.letter}: {s_out.run_id} left out of the speed medians ({s_out.not_rankable_why})",
                markup=False,
            )
        if column.contended:
            out.print(
                f"   warning: {column.contended} of {len(column.summaries)} run(s) contended "
                "(other processes held a large share of the CPU; see `tracer show`)",
                markup=False,
            )
        for letter, metric, value in result.disagreements():
            if letter == column.letter:
                out.print(
                    f"   warning: {letter}: the repeats disagree: {metric} {disagreement(value)} (more than "
                    f"{100 * REPEATS_DISAGREE:.0f} % of their median): their median stands for none of them, "
                    f"and no ratio against {letter} is a finding",
                    markup=False,
                )
        if not s.energy:
            why = "; ".join(s.energy_unavailable)
            out.print(f"   energy of {column.letter}: {NO_SOURCE}" + (f" ({why})" if why else ""), markup=False)
    letters = [c.letter for c in result.columns]
    from analyzers.figures.steady import definition

    table = Table(
        "metric",
        *letters,
        *(f"{x} / A" for x in letters[1:]),
        caption=f"(steady): {definition(args.warmup)}; (whole run): every epoch, start-up and teardown included",
    )
    for row in rows_for_print(result):
        table.add_row(*row)
    out.print(table)
    for note in result.api_notes:
        out.print(note, markup=False)
    for note in noise_notes(result):
        out.print(note, markup=False)
    for letter, gaps in result.learning_gaps:
        head = result.columns[0].head.framework, next(c.head.framework for c in result.columns if c.letter == letter)
        out.print(
            f"learning differs: A ({head[0]}) and {letter} ({head[1]}) train the same workload but their curves part"
            " beyond their repeats' spread (the models or the pipelines may differ):",
            markup=False,
        )
        for gap in gaps:
            out.print(f"   {gap.text('A', letter)}", markup=False)
    print_data_pairs(result.pairs, out)
    print_ranks(result.columns, groups, out)
    print_top_operators([(c.letter, g[0]) for c, g in zip(result.columns, groups)], out)
    first = groups[0][0]
    for column, group in zip(result.columns[1:], groups[1:]):
        print_verdict_differences(first, group[0], f"A ({result.columns[0].head.framework})",
                                  f"{column.letter} ({column.head.framework})", out)  # fmt: skip
    if args.csv is not None:
        write_csv(result, args.csv)
        out.print(f"written to {args.csv}")
    return 0


def print_ranks(columns: Any, groups: list[list[Any]], out: Console) -> None:
    """Each column of several ranks (its first run) with its ranks side by side."""
    from analyzers.figures.ranks import RANK_COLUMNS, cells, rank_table

    for column, group in zip(columns, groups):
        ranks = rank_table(group[0])
        if ranks is None:
            continue
        table = Table(*(h for _, h in RANK_COLUMNS), title=f"{column.letter}: ranks of {group[0].run_id}",
                      caption=f"{ranks.basis}; communication from {ranks.comm_source}")  # fmt: skip
        for row in ranks.rows:
            table.add_row(*cells(row))
        out.print(table)


def print_top_operators(columns: list[tuple[str, Any]], out: Console) -> None:
    """Each column's top framework operators by self time per traced image, named as its own profiler
    names them (only where two columns or more have an operator table)."""
    from analyzers.render.display import duration_unit, significant
    from analyzers.summaries.operator_compare import TOP_OPERATORS, operator_source, top_operators

    tops = {letter: top_operators(folder) for letter, folder in columns}
    shown = [letter for letter, rows in tops.items() if rows]
    if len(shown) < 2:
        return
    folders = dict(columns)
    heads = [f"{x}: {folders[x].read_record().measurement.framework}, {operator_source(folders[x])}" for x in shown]
    per_image = [r.self_ns_per_image for x in shown for r in tops[x] if r.self_ns_per_image]
    unit, scale = duration_unit(max(per_image, default=0.0))
    table = Table("rank", *heads, title="top framework operators by self time, per traced image (each one's own names)")
    for i in range(TOP_OPERATORS):
        cells = []
        for letter in shown:
            rows = tops[letter]
            if i >= len(rows):
                cells.append("-")
                continue
            r = rows[i]
            each = (
                f"{significant(r.self_ns_per_image / scale)} {unit}/image" if r.self_ns_per_image else "images unknown"
            )
            cells.append(f"{escape(r.name)}: {each} ({r.self_pct:.1f} %)")
        table.add_row(str(i + 1), *cells)
    out.print(table)


def _readable(folders: list[Any]) -> list[Any]:
    """The runs of a folder whose run.json reads; each other one is named once and left out."""
    kept = []
    for folder in folders:
        try:
            folder.read_record()
        except UserError as e:
            print(f"tracer: warning: {e}; left out", file=sys.stderr)
            continue
        kept.append(folder)
    return kept


def print_verdict_differences(a: object, b: object, label_a: str, label_b: str, out: Console) -> None:
    """Which diagnosis verdicts differ between two runs, faster run first."""
    from analyzers.diagnosis.across import Labelled, pair_lines
    from analyzers.run.run import Run

    assert isinstance(a, Run) and isinstance(b, Run)
    lines = [line for _f, _s, diffs in pair_lines([Labelled(label_a, a), Labelled(label_b, b)])
             for line in diffs]  # fmt: skip
    out.print(f"[bold]Diagnosis: verdicts that differ, {label_a} and {label_b}[/bold]")
    for line in lines or ["none: the same rules fire with similar numbers"]:
        out.print(f"  {line}", markup=False)
