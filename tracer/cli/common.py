"""What every subcommand module shares: consoles, number formatting, and the folder options
(`--runs` is always the folder of runs to read, `--out` always where to write)."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tracer.cli.outputs import path_arg
from tracer.core.errors import UserError

DEFAULT_RUNS_DIR = Path("runs")


@dataclass(frozen=True)
class Bound:
    """The accepted range of a numeric option of one subcommand (run options carry theirs in
    tracer/core/options.py); every number must also be finite."""

    flag: str
    low: float
    high: float
    why: str = ""


TOP_BOUND = Bound("--top", 1, 100_000)
VIEW_SIZE_BOUND = Bound("--size", 200, 10_000, "pixels per side")


def check_bound(bound: Bound, value: float) -> None:
    """One line for a value outside its range or not a finite number (NaN passes every < and >)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not bound.low <= value <= bound.high:
        why = f" ({bound.why})" if bound.why else ""
        raise UserError(f"{bound.flag} {value}: give a number from {bound.low:g} to {bound.high:g}{why}")


def add_runs_dir(parser: argparse.ArgumentParser) -> None:
    """`--runs DIR`: the folder of runs a subcommand reads (run ids are looked up there)."""
    parser.add_argument(
        "--runs",
        dest="runs_dir",
        type=Path,
        default=DEFAULT_RUNS_DIR,
        metavar="DIR",
        help="folder of runs to read (default runs/)",
    )


def add_out_dir(parser: argparse.ArgumentParser, what: str = "run folders", required: bool = False) -> None:
    """`--out DIR`: where a subcommand writes; the same name in every subcommand that writes."""
    default = None if required else DEFAULT_RUNS_DIR
    where = "" if required else f" (default {DEFAULT_RUNS_DIR}/)"
    parser.add_argument(
        "--out", type=path_arg, default=default, required=required, metavar="DIR", help=f"where {what} go{where}"
    )


def add_warmup(parser: argparse.ArgumentParser) -> None:
    """`--warmup N`: leading epochs left out of the steady-state headline (analyzers.steady)."""
    from analyzers.steady import WARMUP_EPOCHS

    parser.add_argument(
        "--warmup",
        type=_non_negative_int,
        default=WARMUP_EPOCHS,
        metavar="N",
        help=f"leading epochs left out of the steady-state numbers (default {WARMUP_EPOCHS})",
    )


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


class _PipeConsole(Console):
    """rich exits with 1 when the reader of a pipe goes away; `tracer ... | head` should end quietly,
    so the broken pipe goes up to `tracer.cli.main`, which ends with 0 as `cat` does."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console() -> Console:
    """Wide when piped, so tables are not cut to 80 columns in logs."""
    return _PipeConsole(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 200)


def err_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def fmt(value: float | int | None, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)
