"""Every analysis is a typed function of a `Run`; `per_run` keeps its result in the run's memo, keyed by the
function and the run's warm-up, so phases, the summary, the step decomposition, contention and the
diagnosis's inputs are computed once per run whoever asks (the CLI, the viewer, the report, another
analysis). No part is looked up by a name: a caller imports the function that computes it.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

from analyzers.run.run import HOLD_TABLES, Run
from tracer.core.runfolder import RunFolder

T = TypeVar("T")


def per_run(fn: Callable[[Run], T]) -> Callable[[Run], T]:
    """`fn(run)`, computed once per run and warm-up. A bare `RunFolder` (a test's, a notebook's) is opened
    as a `Run` for the call: computed now, as a run opened once would compute it."""

    @functools.wraps(fn)
    def once(run: Run) -> T:
        if not isinstance(run, Run):
            run = Run.open(run) if isinstance(run, RunFolder) else run
        key = (once, run.warmup)
        if key not in run.memo:
            run.memo[key] = fn(run)
        value: T = run.memo[key]
        return value

    return once


def per_run_holding_tables(fn: Callable[[Run], T]) -> Callable[[Run], T]:
    """`per_run` for an analysis whose result holds the run's tables: `Run.release` drops it with them."""
    once = per_run(fn)
    HOLD_TABLES.add(once)
    return once
