"""Where a run's loss stopped being a number, read from its events.

The worker checks every loss it reads and writes a `diverged` event at the first NaN or infinity
(tracer/worker/base.py). Folders written before it did hold the non-finite loss itself in their
`progress` and `epoch_end` events (a bare `NaN`, or null named under `nonfinite`); both are read here,
so the runner and every reader of an old folder reach the same verdict.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from tracer.core.records import Divergence, Outcome, RunStatus
from tracer.core.schema import KIND, NONFINITE, Event

LOSS = "loss"  # the loss field of progress, epoch_end and diverged events


def loss_value(event: Mapping[str, Any]) -> float | None:
    """An event's loss as a float: NaN or infinity where it was non-finite (a bare NaN in old folders,
    null named under `nonfinite` in strict ones), None where it has none."""
    raw = event.get(LOSS)
    if raw is None:
        named = (event.get(NONFINITE) or {}).get(LOSS)
        return float(named) if named else None
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


def divergence(events: Iterable[Mapping[str, Any]], lr: float | None = None) -> Divergence | None:
    """The first non-finite loss of a run: its `diverged` event (the worker's own check, with the
    step), else the first progress or epoch_end event whose loss is not finite (old folders)."""
    events = list(events)
    for e in events:
        if e.get(KIND) == Event.DIVERGED:
            return Divergence(
                epoch=int(e.get("epoch") or 0),
                step=e.get("step"),
                loss=str(e.get(LOSS) or "nan"),
                last_finite_loss=e.get("last_finite_loss"),
                lr=e.get("lr", lr),
                continued=bool(e.get("continued")),
                images=e.get("images"),
            )
    last_finite: float | None = None
    for e in events:
        if e.get(KIND) not in (Event.PROGRESS, Event.EPOCH_END):
            continue
        value = loss_value(e)
        if value is None:
            continue
        if math.isfinite(value):
            last_finite = value
            continue
        name = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        images = e.get("images")
        return Divergence(
            epoch=int(e.get("epoch") or 0),
            step=None,
            loss=name,
            last_finite_loss=last_finite,
            lr=lr,
            images=int(images) if isinstance(images, int) else None,
        )
    return None


def diverged_outcome(outcome: Outcome, found: Divergence | None) -> Outcome:
    """`outcome` as `diverged` where the run would otherwise be ok (or stopped at its divergence);
    a run that also failed, timed out or was interrupted keeps that state, the divergence attached."""
    if found is None:
        return outcome
    if outcome.status in (RunStatus.OK, RunStatus.DIVERGED):
        return Outcome(RunStatus.DIVERGED, found.describe(), outcome.exit_code, None, outcome.stderr_tail, found)
    return Outcome(outcome.status, outcome.cause, outcome.exit_code, outcome.signal, outcome.stderr_tail, found)
