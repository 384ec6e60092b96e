"""The signals a terminal (or a user's `kill`) sends to end a command, declared once and handled alike
everywhere: Ctrl-C (SIGINT), a closed terminal or dropped SSH session (SIGHUP), Ctrl-\\ (SIGQUIT) and
`kill` (SIGTERM). `tracer profile` and `tracer campaign` count them (the run ends `interrupted`, its
folder finalised); every other command turns them into `Interrupted`, a KeyboardInterrupt, so the
clean-ups that already run on Ctrl-C (temporary files and folders removed) run for all four."""

from __future__ import annotations

import signal
from typing import Any

TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Interrupted(KeyboardInterrupt):
    """One of TERMINAL_SIGNALS arrived; `exit_code` is the shell's 128 + its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interrupt_in(error: BaseException) -> Interrupted | None:
    """The `Interrupted` that `error` was raised from, where one was: a signal that lands while Python runs a
    class's `__set_name__` (a dataclass field, during an import) reaches the caller as a RuntimeError
    caused by it (Python 3.11)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def raise_on_terminal_signals() -> None:
    """From here on each of TERMINAL_SIGNALS raises `Interrupted` in the main thread; one ignored at
    start (a background job's SIGINT, `nohup`'s SIGHUP) stays ignored."""
    for sig in TERMINAL_SIGNALS:
        try:
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, _raise)
        except ValueError:  # not the main thread (a test calling main() from one): its caller decides
            return


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


#: How a person sent each of TERMINAL_SIGNALS, for the cause of an interrupted run.
SENT_BY = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "kill, a scheduler's preemption or timeout",
    signal.SIGHUP: "the terminal or SSH session closed",
    signal.SIGQUIT: "Ctrl-\\",
}


def described(signum: int) -> str:
    """`SIGHUP (the terminal or SSH session closed)`: a signal named with how it usually comes."""
    how = SENT_BY.get(signal.Signals(signum))
    return f"{signal_name(signum)} ({how})" if how else signal_name(signum)


def shell_code(signum: int) -> int:
    """The exit status a shell gives a process that signal `signum` ended: 128 + its number."""
    return 128 + int(signum)
