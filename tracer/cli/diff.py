"""`tracer diff A B`: why B's step per image differs from A's, in a few ranked sentences, then the tables."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from tracer.cli.common import RUN_OR_TRACE, add_runs_dir, add_warmup, console, open_run, warn_problems


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff",
        help="why two runs differ: the per-image step-time gap split into data wait, host and GPU time by "
        "kernel class, ranked",
        description="The steady step per image of two runs split into waiting for data, compute or host time and "
        "GPU time by kernel class (where a trace exists), the gap between them ranked by part, in sentences, "
        "then the tables. Imported traces without steps compare their GPU time by kernel class over each window.",
    )
    p.add_argument("a", metavar="A", help=RUN_OR_TRACE)
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
    from analyzers.render import sentences as say

    out = console()
    for letter, d in (("A", result.a), ("B", result.b)):
        what = " ".join(x for x in (d.framework, d.model, d.device) if x)
        what += "".join(f", {k} {v}" for k, v in (("batch", d.batch), ("data", d.data)) if v)
        images = f"{d.images:,} images" if d.per == "image" else "images not recorded"
        covered = f"{d.steps} steps, {images}" if d.steps else f"{say.seconds(d.window_s or 0.0)}"
        out.print(f"{letter}: {d.run_id} [{what}, trace {d.trace}; {d.basis}: {covered}]", markup=False)
        for note in d.notes:
            out.print(f"   {letter}: {note}", markup=False)
    out.print()
    for line in result.sentences:
        out.print(line, markup=False)
    unit = f"per {result.per}"
    if result.parts:
        table = Table("part of the step", "A", "B", "B - A", "share of the gap", title=f"the steady step, {unit}")
        gap = result.gap_s or 0.0
        for p in result.parts:
            fraction = say.share(p.delta, gap)
            a, b = say.seconds_pair(p.a, p.b)
            table.add_row(p.label, a, b, _signed(p.delta), say.percent(fraction) if fraction is not None else "-")
        e = result.explanation
        if e is not None and e.effect_s > 0:  # what the parts leave of the gap: they and it add up to the whole
            table.add_row("unexplained (the gap less its parts)", "", "", "", f"{round(e.unexplained_pct)} %")
        out.print(table)
    if result.classes:
        table = Table("kernel class", "A", "B", "B - A", title=f"GPU time by kernel class, {unit}")
        for c in result.classes:
            a, b = say.seconds_pair(c.a, c.b)
            table.add_row(c.label, a, b, _signed(c.delta))
        out.print(table)
    if result.kernels:
        table = Table(
            "kernel", "A", "B", "B - A", title=f"{result.classes[0].label}: the kernels that changed most, {unit}"
        )
        for k in result.kernels:
            a, b = say.seconds_pair(k.a, k.b)
            table.add_row(k.label, a, b, _signed(k.delta))
        out.print(table)


def _signed(value: float) -> str:
    from analyzers.render import sentences as say

    return "0" if value == 0 else ("+" if value > 0 else "-") + say.seconds(abs(value))


def print_step_parts(run: Any, out: Any) -> None:
    """`tracer show`'s line on where the steady step's time goes per image (analyzers.figures.step_parts); nothing
    for a run with neither steps nor a trace."""
    from analyzers.figures.step_parts import decompose
    from analyzers.render import sentences as say
    from tracer.core.errors import UserError

    try:
        d = decompose(run, run.warmup)
    except UserError:
        return
    if not d.parts or not d.step_s:
        return
    ranked = sorted(d.parts, key=lambda p: -p.seconds)
    text = ", ".join(
        f"{p.label} {say.seconds(p.seconds)} ({say.percent(p.seconds / d.step_s)})" for p in ranked if p.seconds > 0
    )
    out.print(f"steady step per image ({d.basis}): {say.seconds(d.step_s)} = {text}", markup=False)
    for note in d.notes:
        out.print(f"   {note}", markup=False)
