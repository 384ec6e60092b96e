"""`python -m tracer` and the `tracer` script: Ctrl-C or another terminal signal while the command is
still importing (its first few tenths of a second) ends it with one line, as later, not a traceback."""

import os
import sys

STREAMS = ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w"))


def mend_closed_streams() -> None:
    """A standard stream closed by the caller (`tracer ... >&-`) becomes /dev/null: Python leaves
    `sys.stdout` None (an AttributeError wherever it is used), and the first file or pipe the tracer
    opened would take descriptor 1 and receive what is printed."""
    for fd, name, mode in STREAMS:
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: `fd` itself
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 - the process's own stream


def entry() -> int:
    try:
        mend_closed_streams()
        from tracer.core.signals import raise_on_terminal_signals

        raise_on_terminal_signals()
        from tracer.cli import main

        return main()
    except KeyboardInterrupt as e:
        return _interrupted(getattr(e, "exit_code", 130))
    except RuntimeError as e:  # a signal inside a class's __set_name__ while a module is imported
        from tracer.core.signals import interrupt_in

        cause = interrupt_in(e)
        if cause is None:
            raise
        return _interrupted(cause.exit_code)


def _interrupted(code: int) -> int:
    try:
        print("tracer: interrupted", file=sys.stderr)
    except OSError:  # the terminal that sent SIGHUP is gone
        pass
    return code


if __name__ == "__main__":
    sys.exit(entry())
