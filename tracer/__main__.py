"""`python -m tracer` and the `tracer` script: Ctrl-C or another terminal signal while the command is
still importing (its first few tenths of a second) ends it with one line, as later, not a traceback."""

import sys


def entry() -> int:
    try:
        from tracer.core.signals import raise_on_terminal_signals

        raise_on_terminal_signals()
        from tracer.cli import main

        return main()
    except KeyboardInterrupt as e:
        code = getattr(e, "exit_code", 130)
        try:
            print("tracer: interrupted", file=sys.stderr)
        except OSError:  # the terminal that sent SIGHUP is gone
            pass
        return code


if __name__ == "__main__":
    sys.exit(entry())
