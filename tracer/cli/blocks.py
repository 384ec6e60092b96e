"""The printers several commands share (`profile`, `show`, `diagnose`, `compare`): the Diagnosis block, the
measurement cost, the steady step's parts and the data-mode pairs. A command module imports these, never
another command's printers (the independence contract in pyproject.toml); the words are analyzers.render's."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tracer.cli.common import print_wrapped


def print_block(run: Any, out: Console) -> None:
    """The "Diagnosis" block of `tracer profile`: the run diagnosed (analyzers.report.shown.diagnosis), printed."""
    from analyzers.report.shown import diagnosis
    from analyzers.run.run import Run

    print_diagnosis(diagnosis(run if isinstance(run, Run) else Run.open(run)), out)


def print_diagnosis(d: Any, out: Console) -> None:
    """The Diagnosis block: the three verdicts that matter most, one line each, then what measuring cost;
    or why it is not available."""
    from analyzers.diagnosis.verdict_text import top_lines

    out.print("[bold]Diagnosis[/bold]")
    if d.unavailable:
        out.print(f"  not available: {d.unavailable}", markup=False)
        return
    lines = top_lines(list(d.verdicts))
    if not d.verdicts:
        out.print("  " + lines[0])
    else:
        for line in lines:
            print_wrapped(out, line, "  ", "  ")
    print_cost(d.cost.lines(), out)


def print_cost(lines: list[str], out: Console) -> None:
    out.print("[bold]Measurement cost[/bold]")
    for line in lines:
        print_wrapped(out, line, "  ", "  ")


def print_step_parts(d: Any, out: Console) -> None:
    """`tracer show`'s line on where the steady step's time goes per image (analyzers.figures.step_parts);
    nothing for a run with neither steps nor a trace (`d` None)."""
    from analyzers.render.step_parts import step_parts_lines

    for line in step_parts_lines(d) if d is not None else []:
        out.print(line, markup=False)


def print_data_pairs(pairs: Any, out: Console) -> None:
    """Runs that differ only in --data, side by side: the three throughputs and the input pipeline's share."""
    from analyzers.comparison.pairs import input_share_table

    if not pairs:
        return
    header, rows = input_share_table(pairs)
    table = Table(*header, title="data modes: runs that differ only in --data (steady images/s)")
    for row in rows:
        table.add_row(*row)
    out.print(table)
    for pair in pairs:
        if pair.sentence():
            out.print(f"  {pair.framework} {pair.model}: {pair.sentence()}", markup=False)
