"""Why a command run's probe did not load where it did not: in the command itself (its argv: `python -I`,
`-E`, `-S`, `env -i python ...`) or in a Python process a probed one started (the probe's
`probe_missed` events), so the run says why its steps went unseen instead of "no loop the probe knows".
The reasons are `tracer.core.schema.probe_kept_out`'s, the probe's own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tracer.core.records import RunRecord, RunStatus
from tracer.core.schema import KIND, PROBE_RUN_DIR_ENV, Event, probe_kept_out
from tracer.core.text import printable

_GIVEN = "<the tracer's folder>"
"""The PYTHONPATH entry the tracer gave the command (its value does not matter: only the command's argv is read)."""


def never_loaded(record: RunRecord) -> bool:
    """A finished command run whose probe was on but started in none of its Python processes."""
    command = record.command
    return bool(
        command and command.probe == "on" and not command.interpreter and record.outcome.status is not RunStatus.RUNNING
    )


def missed(record: RunRecord, events: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """One reason per process the probe could not enter: the command's own (where it never loaded), then
    each one a probed process started."""
    out = []
    if never_loaded(record) and record.command is not None:
        env = {"PYTHONPATH": _GIVEN, PROBE_RUN_DIR_ENV: "run"}
        reason = probe_kept_out(list(record.command.argv), env, _GIVEN, PROBE_RUN_DIR_ENV)
        if reason:
            out.append(reason)
    for e in events:
        if e.get(KIND) != Event.PROBE_MISSED or not isinstance(e.get("reason"), str):
            continue
        argv = e.get("argv")
        words = " ".join(str(a) for a in argv) if isinstance(argv, list) else "a child"
        out.append(printable(f"{e['reason']} (in `{words}`, started by pid {e.get('pid')})"))
    return tuple(dict.fromkeys(out))
