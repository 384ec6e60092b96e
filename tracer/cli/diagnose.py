"""`tracer diagnose RUN`: every rule's verdict on one run (why it is as fast as it is, what to try),
and what measuring it cost; `--format json` for scripts."""

from __future__ import annotations

import argparse
import dataclasses

from rich.console import Console

from tracer.cli.common import add_runs_dir, console, print_wrapped, warn_problems


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diagnose",
        help="every diagnosis rule's verdict on one run, with its evidence and the knob to try",
        description="Run the diagnosis rules (docs/guide/diagnosis.md) over one run folder's tables.",
    )
    p.add_argument("run", help="run id (or a unique part of it) or a run folder path")
    add_runs_dir(p)
    p.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or json")
    p.set_defaults(func=cmd_diagnose)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from analyzers.diagnosis import diagnose
    from analyzers.diagnosis.cost import measurement_cost
    from analyzers.run.run import Run
    from tracer.core.runfolder import find_run

    run = Run.open(find_run(args.runs_dir, args.run))
    run.read_record()
    try:
        verdicts = diagnose(run)
        cost = measurement_cost(run)
    finally:
        warn_problems([run])
    if args.format == "json":
        data = {
            "run": run.run_id,
            "verdicts": [v.to_json() for v in verdicts],
            "measurement_cost": cost.__dict__,
            "problems": [dataclasses.asdict(p) for p in run.problems],
        }
        from tracer.cli.json_output import dump

        dump("diagnose", data)
        return 0
    out = console()
    for v in verdicts:  # one block per rule: a table of six columns cut its knobs at 120 columns
        severity = f", {v.severity.name.lower()}" if v.fired else ""
        out.print(f"{v.rule}: {v.state}{severity}", markup=False, highlight=False, soft_wrap=True)
        print_wrapped(out, v.finding, "  ", "  ")
        if v.evidence:
            print_wrapped(out, "evidence: " + "; ".join(e.text() for e in v.evidence), "  ", "  ")
        if v.fired and v.knob:
            print_wrapped(out, f"try: {v.knob}", "  ", "  ")
    print_cost(cost.lines(), out)
    return 0


def print_block(folder: object, out: Console) -> None:
    """The "Diagnosis" block of `tracer profile` and `tracer show`: the three verdicts that matter
    most, one line each, then what measuring cost. A rule that breaks costs the block, not the run."""
    from analyzers.diagnosis import diagnose, top
    from analyzers.diagnosis.cost import measurement_cost
    from analyzers.run.run import Run

    assert isinstance(folder, Run)
    out.print("[bold]Diagnosis[/bold]")
    try:
        verdicts = top(diagnose(folder))
        cost = measurement_cost(folder)
    except Exception as e:  # noqa: BLE001 - the run is complete without its diagnosis
        out.print(f"  not available: {type(e).__name__}: {e}", markup=False)
        return
    if not verdicts:
        out.print("  no rule fired (`tracer diagnose` lists every rule)")
    for v in verdicts:
        print_wrapped(out, f"- {v.headline()}", "  ", "  ")
    print_cost(cost.lines(), out)


def print_cost(lines: list[str], out: Console) -> None:
    out.print("[bold]Measurement cost[/bold]")
    for line in lines:
        print_wrapped(out, line, "  ", "  ")
