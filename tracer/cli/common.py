"""What every subcommand module shares: consoles and number formatting."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console


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
