"""What every subcommand module shares: consoles, number formatting, and the folder options
(`--runs` is always the folder of runs to read, `--out` always where to write)."""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.text import Text

from tracer.cli.outputs import path_arg
from tracer.core.errors import UserError

DEFAULT_RUNS_DIR = Path("runs")


def run_or_trace() -> str:
    """The help of every argument that names one run (`open_run` takes each of these), made when that
    command's parser is built: the formats' list comes from the registry, which a command naming no run
    (`profile`, `env`, `campaign`) does not import at start-up."""
    from analyzers.ingest.readers import readable

    return (
        f"run id (or a unique part of it), a run folder, or a trace ({readable()}; imported into the cache on "
        "first use, as `tracer import` imports it)"
    )


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
    """`--warmup N`: leading epochs left out of the steady-state headline (analyzers.figures.steady)."""
    from analyzers.figures.steady import WARMUP_EPOCHS

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


PIPED_WIDTH = 200  # piped without COLUMNS: wide, so tables are not cut to 80 columns in logs


def columns_asked() -> int | None:
    """The width a user asked for with COLUMNS (piped output keeps within it), or None."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) >= 20 else None


def fits(out: Console) -> bool:
    """Whether output is fitted to a width: on a terminal, or piped with COLUMNS set (`COLUMNS=120 tracer
    show ... | less` ran to 216 columns); piped without it, a line stays whole for grep."""
    return out.is_terminal or columns_asked() is not None


def console() -> Console:
    """Wide when piped (COLUMNS wide where set)."""
    piped = columns_asked() or PIPED_WIDTH
    return _PipeConsole(stderr=False, highlight=False, width=None if sys.stdout.isatty() else piped)


def err_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else columns_asked() or PIPED_WIDTH)


def print_wrapped(out: Console, text: str, indent: str = "", hanging: str = "    ") -> None:
    """One line of prose: on a terminal (or piped with COLUMNS) wrapped at its width at spaces (a long word
    folded, never cut), later lines indented by `hanging`; piped, one line as it is (grep finds it whole)."""
    if not fits(out):
        out.print(indent + text, soft_wrap=True, markup=False, highlight=False)
        return
    import textwrap

    width = max(20, out.width)
    lines = textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + hanging, break_on_hyphens=False
    )
    for line in lines or [indent]:
        out.print(line, soft_wrap=True, markup=False, highlight=False)


def table_lines(out: Console, table: Any) -> list[Text]:
    """A rich table as the lines it prints at its natural width, trailing blanks removed (rich pads
    every cell to its column, so a piped table would end each line in spaces); `cell_len` is a line's width."""
    natural = Measurement.get(out, out.options.update_width(100_000), table).maximum
    wide = Console(  # `out` will not print wider than itself; this one is as wide as the table
        file=io.StringIO(), width=natural, force_terminal=out.is_terminal, no_color=not out.is_terminal
    )
    wide.print(table)
    lines = [Text.from_ansi(line) for line in wide.file.getvalue().splitlines()]  # type: ignore[attr-defined]
    for line in lines:
        line.rstrip()
    while lines and not lines[0].plain:
        lines.pop(0)
    while lines and not lines[-1].plain:
        lines.pop()
    return lines


def print_pairs(out: Console, rows: Sequence[tuple[str, str]], indent: str = "") -> None:
    """`key  value` rows with the values lined up; a value wraps under itself on a terminal. No table, so
    no line is padded to the terminal's width (a piped `show` stays as wide as its text)."""
    key_width = max((len(k) for k, _ in rows), default=0) + 2
    for key, value in rows:
        head = f"{indent}{key:<{key_width}}"
        if not fits(out) or len(head) + len(value) <= out.width:
            out.print(head + value, soft_wrap=True, markup=False, highlight=False)
            continue
        import textwrap

        room = out.width - len(head)
        if room < 20 or max(len(word) for word in value.split()) > room:  # a long id stays whole below its key
            out.print(f"{indent}{key}", soft_wrap=True, markup=False, highlight=False)
            print_wrapped(out, value, indent + "  ", "")
            continue
        lines = textwrap.wrap(value, room, break_on_hyphens=False) or [""]
        out.print(head + lines[0], soft_wrap=True, markup=False, highlight=False)
        for line in lines[1:]:
            out.print(" " * len(head) + line, soft_wrap=True, markup=False, highlight=False)


def fmt(value: float | int | None, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def warn_problems(runs: Any) -> None:
    """One line on stderr per damaged file the runs met (`Run.problems`): what it held was skipped."""
    from analyzers.run.run import problems_of

    for problem in problems_of(runs):
        print(f"tracer: warning: {problem.text()}", file=sys.stderr)


def open_run(ref: str, runs_dir: Path, warmup: int | None = None) -> Any:
    """The run `ref` names, opened as a `Run`: a run id or folder, or a trace file (or trace folder) imported
    into the cache by `tracer import`'s own path (`analyzers.ingest.cached_run`), so every command answers the
    same for a file and for its import; ingested first where its raw traces have no tables yet."""
    from analyzers.ingest.cached_run import run_folder
    from analyzers.ingest.pipeline import ingest_if_needed
    from analyzers.run.run import Run

    folder = ingest_if_needed(run_folder(ref, runs_dir))
    return Run.open(folder) if warmup is None else Run.open(folder, warmup)
