"""`tracer` command line: one module per subcommand (group), each `add_parser(sub)` registering
functions that return an exit code. Errors a user can cause are `UserError`s: one line on stderr,
exit code 2. The CLI is the application shell: it may import analyzers (and, lazily, viewer);
nothing else in tracer does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tracer.cli import analyze, campaign, compare, data, env, import_trace, profile, report, runs, view
from tracer.errors import UserError

COMMAND_MODULES = [profile, runs, data, env, analyze, import_trace, report, compare, campaign, view]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracer", description="Profile deep-learning training across frameworks.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"tracer: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("tracer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _quiet_after_broken_pipe()


def _quiet_after_broken_pipe() -> int:
    """The reader of stdout went away (`tracer analyze ... | head`): stop quietly, as `cat` does. stdout is
    pointed at /dev/null so that Python's flush at exit does not raise a second time."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _version() -> str:
    """The installed distribution's version (pyproject.toml), or the source tree's when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dl-tracer")
    except PackageNotFoundError:
        return "unknown (not installed)"
