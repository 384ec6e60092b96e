"""`tracer diagnose RUN`: every rule's verdict on one run (why it is as fast as it is, what to try),
and what measuring it cost; `--format json` for scripts."""

from __future__ import annotations

import argparse
import dataclasses

from tracer.cli.blocks import print_cost
from tracer.cli.common import add_runs_dir, console, open_run, print_wrapped, run_or_trace, warn_problems


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diagnose",
        help="every diagnosis rule's verdict on one run, with its evidence and the knob to try",
        description="Run the diagnosis rules (docs/guide/diagnosis.md) over one run folder's tables.",
    )
    p.add_argument("run", help=run_or_trace())
    add_runs_dir(p)
    p.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or json")
    p.set_defaults(func=cmd_diagnose)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from analyzers.diagnosis import diagnose
    from analyzers.diagnosis.cost import measurement_cost

    run = open_run(args.run, args.runs_dir)
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
    from analyzers.diagnosis.verdict_text import verdict_body, verdict_head

    out = console()
    for v in verdicts:  # one block per rule: a table of six columns cut its knobs at 120 columns
        out.print(verdict_head(v), markup=False, highlight=False, soft_wrap=True)
        for paragraph in verdict_body(v):
            print_wrapped(out, paragraph, "  ", "  ")
    print_cost(cost.lines(), out)
    return 0
