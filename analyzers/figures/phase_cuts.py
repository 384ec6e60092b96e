"""Where a run is cut into its phases (`analyzers.figures.phases` declares them): on the sampler's clock from
the worker's epoch events, on the trace's from its NVTX epoch or step ranges, its window, else its kernel
launches. Each cut is a function of the `Run`, computed once per run and warm-up (`per_run`): the summary,
the CUDA API split, the diagnosis and the viewer cut a run the same way and once.
"""

from __future__ import annotations

from analyzers.figures.phases import (
    BASIS_EVENTS,
    BASIS_NVTX,
    EPOCH_NAME,
    FALLBACK_NOTE,
    PROFILER_STEP_PREFIX,
    STARTUP,
    STEADY,
    STEP_NAME,
    STEPS_NOTE,
    TEARDOWN,
    WARMUP,
    WHOLE,
    EpochMark,
    Phase,
    RunPhases,
    from_marks,
    split_epochs,
)
from analyzers.run.memo import per_run
from analyzers.run.run import Run
from analyzers.trace import api_names
from analyzers.trace import table_names as t


@per_run
def run_phases(run: Run) -> RunPhases:
    """The phases on the sampler's clock, from the worker's epoch events (samples, steps, threads)."""
    return from_marks([EpochMark(e.epoch, e.start_ns, e.end_ns) for e in run.epochs()], run.warmup, BASIS_EVENTS)


@per_run
def trace_phases(run: Run) -> RunPhases:
    """The phases on the trace's clock: the NVTX `epoch N` ranges, else the worker's epoch events, else
    the NVTX step ranges (first step = warm-up), else the first to the last kernel launch. A run traced
    in a window is cut by `windowed_phases`."""
    windowed = windowed_phases(run)
    if windowed is not None:
        return windowed
    nvtx = nvtx_ranges(run)
    marks = [EpochMark(int(m.group(1)), s, e) for name, s, e in nvtx if (m := EPOCH_NAME.match(name))]
    if marks:
        return from_marks(marks, run.warmup, BASIS_NVTX)
    events = run_phases(run)
    if events.steady is not None:
        return events
    steps = sorted((s, e) for name, s, e in nvtx if STEP_NAME.match(name))
    whole = Phase(WHOLE, None, None)
    if steps:
        first, last_end = steps[0], max(e for _s, e in steps)
        steady_start = steps[1][0] if len(steps) > 1 else first[0]
        named = [whole, Phase(STARTUP, None, first[0], note=STEPS_NOTE)]
        if len(steps) > 1:
            named.append(Phase(WARMUP, first[0], steady_start, note=STEPS_NOTE))
        named.append(Phase(STEADY, steady_start, last_end, note=STEPS_NOTE))
        named.append(Phase(TEARDOWN, last_end, None, note=STEPS_NOTE))
        return RunPhases(tuple(named), split_epochs([]), STEPS_NOTE)
    span = launch_span(run)
    if span is None:
        return RunPhases((whole,), split_epochs([]), "no marks")
    lo, hi = span
    named = [
        whole,
        Phase(STARTUP, None, lo, note=FALLBACK_NOTE),
        Phase(STEADY, lo, hi, note=FALLBACK_NOTE),
        Phase(TEARDOWN, hi, None, note=FALLBACK_NOTE),
    ]
    return RunPhases(tuple(named), split_epochs([]), FALLBACK_NOTE)


def windowed_phases(run: Run) -> RunPhases | None:
    """A window-traced run's phases on the trace's clock (None for a run traced whole): the window, the
    window as the steady state when it starts after the warm-up epochs, and the epochs it overlaps."""
    span = run.window
    if span is None:
        return None
    label = span.label
    events = run_phases(run)
    inside = [
        Phase(p.name, p.start_ns, p.end_ns, p.epochs, p.note, label)
        for p in events.phases
        if p.name.startswith("epoch ") and p.start_ns is not None and p.end_ns is not None
        and p.start_ns < span.end_ns and p.end_ns > span.start_ns
    ]  # fmt: skip
    epochs = tuple(n for p in inside for n in p.epochs)
    named = [Phase(WHOLE, None, None, epochs, window=label)]
    if span.window.first_epoch > run.warmup:
        named.append(Phase(STEADY, span.start_ns, span.end_ns, epochs, window=label))
    return RunPhases(tuple(named + inside), events.split, label)


@per_run
def nvtx_ranges(run: Run) -> list[tuple[str, int, int]]:
    """The run's NVTX ranges (name, start, end), oldest first, with the profiler's step ranges the operators
    table holds (a 2021 Kineto trace's); empty without either."""
    import duckdb

    from analyzers.trace.tables import sql_table

    parts = []
    con = duckdb.connect()
    nvtx = sql_table(con, run.table_file(t.NVTX), t.NVTX) if run.has_table(t.NVTX) else ""
    if run.has_table(t.NVTX):
        parts.append(f"SELECT name, start_ns, end_ns FROM {nvtx}")
    if run.has_table(t.OPERATORS):  # only where the annotations hold no step range (never twice)
        unless = (
            f" AND NOT EXISTS (SELECT 1 FROM {nvtx} WHERE starts_with(name, '{PROFILER_STEP_PREFIX}'))" if parts else ""
        )
        parts.append(
            f"SELECT name, start_ns, end_ns FROM {sql_table(con, run.table_file(t.OPERATORS), t.OPERATORS)} "
            f"WHERE starts_with(name, '{PROFILER_STEP_PREFIX}'){unless}"
        )
    if not parts:
        return []
    sql = f"SELECT * FROM ({' UNION '.join(parts)}) ORDER BY start_ns, name"
    rows = con.execute(sql).fetchall()
    return [(str(n), int(s), int(e)) for n, s, e in rows if s is not None and e is not None]


def launch_span(run: Run) -> tuple[int, int] | None:
    """The first kernel launch's start and the last one's end, from the CUDA API table."""
    import duckdb

    from analyzers.trace.tables import sql_table

    if not run.has_table(t.CUDA_API):
        return None
    con = duckdb.connect()
    api = sql_table(con, run.table_file(t.CUDA_API), t.CUDA_API)
    sql = f"SELECT min(start_ns), max(end_ns) FROM {api} WHERE {api_names.sql_in('name', api_names.LAUNCH_CALLS)}"
    row = con.execute(sql).fetchone()
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))
