"""How a run ended, as one status and a cause a person can read: from the worker's exit status, what
ended it (timeout, Ctrl-C, a stall, a failed rank), its events and the tail of its log."""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracer.core.divergence import diverged_outcome, divergence
from tracer.core.records import (
    Outcome,
    RunSpec,
    RunStatus,
)
from tracer.core.runfolder import RunFolder
from tracer.core.schema import EXIT_DIVERGED, KIND, Event
from tracer.core.signals import described, shell_code
from tracer.measure import rank_launch
from tracer.measure.process import STALL_STACKS
from tracer.measure.tracing.nsys_launch import NOTE as LAUNCHER_NOTE

STDERR_TAIL_LINES = 25
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


def causes(*parts: str) -> str:
    """Several reasons as one cause, `; ` between those that say something (never "kept; ; sampler")."""
    return "; ".join(p.strip().strip(";").strip() for p in parts if p and p.strip().strip(";").strip())


def stderr_tail(folder: RunFolder, lines: int = STDERR_TAIL_LINES, path: Path | None = None) -> tuple[str, ...]:
    """The last non-empty lines of the worker's log (or of `path`)."""
    try:
        with (path or folder.worker_log).open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ()
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return tuple(kept[-lines:])


def last_said(tail: Sequence[str], none: str = "no output") -> str:
    """A stderr tail's last line that is not a note of the nsys launcher (a wait, a retry): what a
    failed process said last, not that nsys was started twice."""
    said = [line for line in tail if not line.startswith(LAUNCHER_NOTE)]
    return said[-1] if said else none


EXIT_RUN_FAILED = 1  # the tracer's exit status for a run that did not end well (other than below)


def classify(
    returncode: int,
    ended_by: str | None,
    events: Sequence[Mapping[str, Any]],
    folder: RunFolder,
    spec: RunSpec,
    signum: int = signal.SIGINT,
) -> Outcome:
    """Turns how the process ended into a status and a cause a person can read; a non-finite loss
    makes a run that otherwise ended well (or stopped at it) `diverged`. `signum`: the signal that
    interrupted the tracer, where one did."""
    return diverged_outcome(_ended(returncode, ended_by, events, folder, spec, signum), divergence(events, spec.lr))


def interrupted_cause(signum: int, forwarded_to: str = "") -> str:
    """The cause of an interrupted run (after the status `interrupted`, so it does not say it again)."""
    sent = f"{described(signum)} to the tracer"
    return f"{sent}; forwarded to {forwarded_to} as {signal.Signals(signum).name}" if forwarded_to else sent


def exit_status(outcome: Outcome, ended_by: str | None, signum: int, command: bool) -> int:
    """The tracer's own exit status for a run, one rule for the built-in worker and a command: 0 when it
    ended well; interrupted, 128 + the signal the tracer got, whatever the command made of it (its own
    status is in run.json); a command's own status otherwise (128 + N where signal N ended it), unless the
    tracer ended it (timeout, stall), the probe stopped it at a divergence (its status is the probe's, not
    the script's), or it exited 0 into a bad end: then 1, as a failed built-in run."""
    code = outcome.exit_code
    if outcome.status is RunStatus.OK and not code:
        return 0
    if ended_by == "interrupted":
        return shell_code(signum)
    if not command or ended_by in ("timeout", "stalled") or not code or outcome.status is RunStatus.DIVERGED:
        return EXIT_RUN_FAILED
    return shell_code(-code) if code < 0 else code


def _ended(
    returncode: int,
    ended_by: str | None,
    events: Sequence[Mapping[str, Any]],
    folder: RunFolder,
    spec: RunSpec,
    signum: int = signal.SIGINT,
) -> Outcome:
    finished = any(e.get(KIND) == Event.END for e in events)
    errors = [e for e in events if e.get(KIND) == Event.ERROR]
    tail = stderr_tail(folder)
    if returncode == 0 and finished:  # every epoch trained, whatever came after (a signal as it exited)
        return Outcome(RunStatus.OK, "", 0)
    if finished and ended_by in ("timeout", "interrupted"):  # every epoch trained; stopped in its teardown
        return Outcome(RunStatus.OK, f"every epoch trained; {ended_by} during the worker's teardown", returncode)
    if returncode == EXIT_DIVERGED and any(e.get(KIND) == Event.DIVERGED for e in events):
        return Outcome(RunStatus.DIVERGED, "", returncode, None, tail)  # before a signal that came after the stop
    if ended_by == "timeout":
        return Outcome(RunStatus.TIMEOUT, f"ran past --timeout {spec.timeout_s:g} s", returncode, None, tail)
    if ended_by == "interrupted":
        return Outcome(RunStatus.INTERRUPTED, interrupted_cause(signum), returncode, None, tail)
    if ended_by == "stalled":
        cause = (
            f"no progress for {spec.stall_s:g} s (no event, no step, no CPU): ended; where each process waited"
            f" is in {STALL_STACKS}"
        )
        return Outcome(RunStatus.STALLED, cause, returncode, None, tail)
    if returncode < 0:
        return ended_by_signal(returncode, "worker", tail)
    if errors:
        return Outcome(RunStatus.FAILED, errors[-1].get("error", "worker error"), returncode, None, tail)
    if returncode == 0 and not folder.events_path.exists():
        cause = f"{folder.events_path} is gone (the run folder was deleted during the run?): the worker exited 0"
        return Outcome(RunStatus.FAILED, cause, 0, None, tail)
    if returncode == 0:
        return Outcome(RunStatus.FAILED, "worker exited 0 without finishing its epochs", 0, None, tail)
    return Outcome(RunStatus.FAILED, f"worker exited with code {returncode}: {last_said(tail)}", returncode, None, tail)


def rank_failed(rank: int, returncode: int, folder: RunFolder, spec: RunSpec) -> Outcome:
    """A run whose rank `rank` ended badly: failed, naming the rank and that rank's own cause."""
    where = rank_launch.rank_folder(folder, rank)
    own = _ended(returncode, None, where.events(), where, spec)
    return dataclasses.replace(own, status=RunStatus.FAILED, cause=f"rank {rank} failed: {own.cause}")


def ended_by_signal(returncode: int, who: str, tail: tuple[str, ...]) -> Outcome:
    """A process the signal `-returncode` ended: a crash signal (SIGSEGV ...) fails the run with its name,
    any other killed it (SIGKILL is named for both senders it may have: a process, or the kernel's
    out-of-memory killer)."""
    sig = signal.Signals(-returncode)
    if sig in CRASH_SIGNALS:
        return Outcome(RunStatus.FAILED, f"{who} crashed with {sig.name}", returncode, sig.name, tail)
    hint = ", from another process or the kernel's out-of-memory killer" if sig == signal.SIGKILL else ""
    return Outcome(RunStatus.KILLED, f"{who} was killed by {sig.name}{hint}", returncode, sig.name, tail)
