"""`tracer` command line: one module per subcommand (group), each `add_parser(sub)` registering
functions that return an exit code. Errors a user can cause are `UserError`s: one line on stderr,
exit code 2. The CLI is the application shell: it may import analyzers (and, lazily, viewer);
nothing else in tracer does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tracer.cli import analyze, campaign, compare, data, diagnose, env, import_trace, profile, report, runs, view
from tracer.core.errors import UserError

COMMAND_MODULES = [profile, runs, data, env, analyze, import_trace, report, compare, campaign, view, diagnose]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracer", description="Profile deep-learning training across frameworks.")
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
