"""`tracer` command line: one module per subcommand (group), each `add_parser(sub)` registering
functions that return an exit code. Errors a user can cause are `UserError`s: one line on stderr,
exit code 2. The CLI is the application shell: it may import analyzers (and, lazily, viewer);
nothing else in tracer does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tracer.core.errors import UserError

COMMAND_MODULES = (
    "profile", "runs", "data", "env", "analyze", "import_trace", "report", "compare", "diff", "campaign", "view",
    "diagnose", "gate", "mcp_server",
)  # fmt: skip
"""The modules under tracer.cli that register subcommands, in the order `--help` lists them."""
COMMANDS = {
    "profile": "profile", "runs": "runs", "show": "runs", "data": "data", "env": "env", "analyze": "analyze",
    "export-trace": "analyze", "import": "import_trace", "report": "report", "compare": "compare", "diff": "diff",
    "campaign": "campaign", "view": "view", "diagnose": "diagnose",
    "gate": "gate", "mcp": "mcp_server",
}  # fmt: skip
"""The module that registers each subcommand: a command line that names one imports only that module, not
every other command's (their imports are most of a quick command's start-up: `tracer analyze FILE` is
timed against `nsys stats`). tests/tracer/cli/test_commands.py checks it against the parsers."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line, like every other bad input (its usage block is `--help`'s job). An
    option it does not know is named first, with the one it looks like: argparse itself reports a missing
    required option before an unknown one, so `--framwork pytorch` read "--framework required"."""

    _args: Sequence[str] = ()

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        self._args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        prog, unknown = self._unknown_option(self._args)
        if unknown:
            message = unknown
        self.exit(2, f"{prog}: error: {message} (see {prog} --help)\n")

    def _unknown_option(self, tokens: Sequence[str]) -> tuple[str, str]:
        """(prog, 'unrecognized option --framwork (did you mean --framework?)') for the first option among
        `tokens` that the parser (or the subcommand named in them) does not know; '' when all are known."""
        import difflib

        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for i, token in enumerate(tokens):
                    child = action.choices.get(token)
                    if isinstance(child, _OneLineParser):
                        return child._unknown_option(tokens[i + 1 :])
        known = [s for action in self._actions for s in action.option_strings]
        for token in tokens:
            if token == "--":
                break
            name = token.split("=", 1)[0]
            if name.startswith("--") and name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                return self.prog, f"unrecognized option {name}" + (f" (did you mean {close[0]}?)" if close else "")
        return self.prog, ""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's parser; only `command`'s (its module's) where one of COMMANDS is named."""
    import importlib

    parser = _OneLineParser(prog="tracer", description="Profile deep-learning training across frameworks.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(f"tracer.cli.{name}").add_parser(sub)
    _no_abbreviations(parser)
    return parser


def _no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """`--epoch 2` must not be taken for `--epochs 2`: no prefix matching in any (sub)parser."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _no_abbreviations(child)


def main(argv: Sequence[str] | None = None) -> int:
    tokens = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(tokens[0] if tokens else None).parse_args(tokens)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"tracer: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # before OSError, of which it is one: a reader that left is no error
        return _quiet_after_broken_pipe()
    except OSError as e:  # a path that cannot be read or written (read-only, a folder, a full disk)
        where = f" {e.filename}" if e.filename else ""
        print(
            f"tracer: error: cannot use{where}: {e.strerror or e} (check the path and its permissions)", file=sys.stderr
        )
        return UserError.exit_code
    except KeyboardInterrupt as e:  # Ctrl-C, or another of tracer.core.signals.TERMINAL_SIGNALS
        try:
            print("tracer: interrupted", file=sys.stderr)
        except OSError:  # the terminal that sent SIGHUP is gone
            pass
        return int(getattr(e, "exit_code", 130))


def _quiet_after_broken_pipe() -> int:
    """The reader of stdout went away (`tracer analyze ... | head`): stop quietly, as `cat` does. stdout is
    pointed at /dev/null so that Python's flush at exit does not raise a second time."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


class _VersionAction(argparse.Action):
    """`--version`: the distribution's version looked up only when asked (importlib.metadata costs every
    other command about 50 ms of start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    """The installed distribution's version (pyproject.toml), or the source tree's when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dl-tracer")
    except PackageNotFoundError:
        return "unknown (not installed)"
