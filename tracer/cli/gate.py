"""`tracer gate --baseline RUN... --candidate RUN...`: exit 1 when the candidate regressed against the
baseline beyond noise and threshold (analyzers.comparison.gate), 0 when not, 2 on bad input; a Markdown
job summary and JUnit XML for CI beside the lines it prints."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from tracer.cli.common import add_runs_dir, add_warmup, console, warn_problems
from tracer.cli.outputs import output_file, path_arg

FAILED_EXIT = 1
"""The exit code of a gate that found a regression (bad input is UserError's 2)."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from analyzers.comparison.gate_metrics import GATE_METRICS

    defaults = ", ".join(f"{m.key}={m.threshold:g}{' points' if m.points else ' %'}" for m in GATE_METRICS)
    p = sub.add_parser(
        "gate",
        help="fail (exit 1) when a candidate regressed against its baseline beyond noise and threshold",
        description="Judge the candidate's steady headline metrics against the baseline's: a change in the worse "
        "direction fails the gate when it passes the metric's threshold and lies beyond noise (the sides' "
        "repeats, or one run's steps or epochs, do not overlap; a contended side is not judged). Exit 0: "
        "nothing regressed; 1: something did (named first, with the reason from `tracer diff`); 2: bad input. "
        f"Default thresholds: {defaults}.",
    )
    p.add_argument(
        "--baseline",
        nargs="+",
        required=True,
        metavar="RUN",
        help="the baseline's runs (repeats; a folder of runs: all)",
    )
    p.add_argument(
        "--candidate", nargs="+", required=True, metavar="RUN", help="the candidate's runs (repeats; a folder: all)"
    )
    add_runs_dir(p)
    add_warmup(p)
    p.add_argument("--summary", type=path_arg, metavar="FILE.md", help="also write a Markdown summary (CI job summary)")
    p.add_argument("--junit", type=path_arg, metavar="FILE.xml", help="also write JUnit XML (CI test reports)")
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        type=_threshold,
        metavar="METRIC=PCT",
        help="a metric's threshold: %% of the baseline, or points for a share (repeatable)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    p.set_defaults(func=cmd_gate)


def _threshold(text: str) -> tuple[str, float]:
    key, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or not key.strip() or not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give METRIC=PCT, e.g. step_time=10")
    return key.strip(), number


def _refs(given: list[str], flag: str) -> list[str]:
    """The runs a side names: a folder holding run folders stands for every run in it (as in `compare`)."""
    from tracer.core.errors import UserError
    from tracer.core.runfolder import list_runs
    from tracer.core.schema import RUN_JSON

    out = []
    for ref in given:
        path = Path(ref)
        if path.is_dir() and not (path / RUN_JSON).exists():
            inside = [str(f.path) for f in list_runs(path)]
            if not inside:
                raise UserError(f"{flag} {ref}: a folder with no run in it; name runs, or a folder of runs")
            out += inside
        else:
            out.append(ref)
    return out


def cmd_gate(args: argparse.Namespace) -> int:
    from analyzers.comparison.gate import gate, thresholds
    from analyzers.comparison.gate_output import junit, markdown, text_lines
    from tracer.cli.common import open_run
    from tracer.cli.json_output import dump
    from tracer.core.output import write_text

    overrides = dict(args.threshold)
    thresholds(overrides)  # an unknown metric: one line before any run is read
    for path, flag in ((args.summary, "--summary"), (args.junit, "--junit")):
        if path is not None:
            output_file(path, flag)
    baseline = [open_run(ref, args.runs_dir) for ref in _refs(args.baseline, "--baseline")]
    candidate = [open_run(ref, args.runs_dir) for ref in _refs(args.candidate, "--candidate")]
    try:
        result = gate(baseline, candidate, overrides, args.warmup)
    finally:
        warn_problems([*baseline, *candidate])
    if args.summary is not None:
        write_text(Path(args.summary), markdown(result), "--summary")
    if args.junit is not None:
        write_text(Path(args.junit), junit(result), "--junit")
    if args.format == "json":
        dump("gate", result.to_json())
    else:
        out = console()
        for line in text_lines(result):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    return FAILED_EXIT if result.failed else 0
