"""The phases of one run, declared once: start-up, each epoch, the warm-up epochs, the steady epochs and
teardown. Every view that says "steady" (show, compare, Tables 1-2, the CUDA split, the kernel and thread
tables, the diagnosis, the viewer) cuts the run here, so the word means one thing everywhere.

The cuts come from the run's own epoch marks: on the sampler's clock (samples, the steps table) the
worker's `epoch_start`/`epoch_end` events; on a trace's clock the NVTX ranges `epoch N` the worker
pushes, else the worker's events (nsys, CUPTI and Kineto traces share their Unix clock). The first
`WARMUP_EPOCHS` epochs are the warm-up (graph tracing, autotuning, lazy module loading, cold caches);
the epochs after them are the steady state. A run with no epoch after its warm-up counts all its epochs
as steady and says so (`Split.includes_warmup`).

A phase holds what *starts* inside it, so the four phases partition a run:
start-up [.., first epoch start), warm-up [first epoch start, first steady epoch start),
steady [first steady epoch start, last epoch end), teardown [last epoch end, ..).
A trace without epoch marks is cut at its NVTX step ranges (the first step is the warm-up), else at its
first and last kernel launch; the phase's `note` says which.

A run traced in a window (`--trace-window`, analyzers.trace.trace_window) has trace rows only there: on the
trace's clock its phases are the window ("whole"), the window again as "steady" when it lies after the
warm-up epochs, and its epochs; each carries the window, and its label says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from analyzers.trace import api_names
from analyzers.trace import table_names as t

if TYPE_CHECKING:  # read where a run is cut, so that a phase's name and label cost no Arrow (`analyze FILE`)
    from tracer.core.runfolder import RunFolder

WARMUP_EPOCHS = 1  # leading epochs left out of the steady state unless a caller declares another number

WHOLE, STARTUP, WARMUP, STEADY, TEARDOWN = "whole", "startup", "warmup", "steady", "teardown"
PHASES = (WHOLE, STARTUP, WARMUP, STEADY, TEARDOWN)  # the named phases, in the order of a run

EPOCH_NAME = re.compile(r"^epoch[ _]?(\d+)$", re.IGNORECASE)  # the worker's NVTX epoch range
STEP_NAME = re.compile(r"^((train_)?step[ _#]?\d*|ProfilerStep#\d+)", re.IGNORECASE)  # a training-step range

BASIS_NVTX = "NVTX epoch ranges"
BASIS_EVENTS = "the worker's epoch events"
STEPS_NOTE = "no epoch marks: warm-up = the first traced step, steady state = the later steps"
FALLBACK_NOTE = "no step or epoch markers: steady state = first to last kernel launch"
ONE_EPOCH_NOTE = "no epoch after the warm-up: the steady state counts every epoch"


@dataclass(frozen=True)
class Split:
    """Which epochs are the warm-up and which the steady state."""

    warmup: tuple[int, ...]
    steady: tuple[int, ...]
    includes_warmup: bool  # too few epochs: the steady state counts the warm-up too


def split_epochs(numbers: Iterable[int], warmup: int = WARMUP_EPOCHS) -> Split:
    """THE warm-up/steady split of a run's epoch numbers (every caller that picks steady epochs uses it)."""
    if warmup < 0:
        raise ValueError("warm-up must be 0 or more epochs")
    ordered = sorted(set(numbers))
    if ordered and not ordered[warmup:]:
        return Split((), tuple(ordered), warmup > 0)
    return Split(tuple(ordered[:warmup]), tuple(ordered[warmup:]), False)


@dataclass(frozen=True)
class Phase:
    name: str
    start_ns: int | None  # None: from the beginning of what was recorded
    end_ns: int | None  # None: to its end
    epochs: tuple[int, ...] = ()  # the epochs it covers
    note: str = ""  # how the cut was made where no epoch mark said it
    window: str = ""  # "window: epoch 2" when the trace recorded only a window of the run

    def holds(self, t_ns: int) -> bool:
        return (self.start_ns is None or t_ns >= self.start_ns) and (self.end_ns is None or t_ns < self.end_ns)

    def label(self) -> str:
        """What a table's title says it covers: 'steady state (epochs 2-3)', 'start-up (before epoch 1)',
        'whole run (window: epoch 2)'."""
        base = self._base_label()
        return f"{base} ({self.window})" if self.window else base

    def _base_label(self) -> str:
        span = _epochs_text(self.epochs)
        if self.name == WHOLE:
            return "whole run"
        if self.name == STARTUP:
            return f"start-up (before epoch {self.epochs[0]})" if self.epochs else "start-up"
        if self.name == WARMUP:
            return f"warm-up ({span})"
        if self.name == STEADY:
            return f"steady state ({span})" if span else "steady state"
        if self.name == TEARDOWN:
            return "teardown (after the last epoch)" if self.epochs else "teardown"
        return self.name


def _epochs_text(epochs: Sequence[int]) -> str:
    if not epochs:
        return ""
    if len(epochs) == 1:
        return f"epoch {epochs[0]}"
    return f"epochs {epochs[0]}-{epochs[-1]}"


@dataclass(frozen=True)
class EpochMark:
    epoch: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class RunPhases:
    """The named phases that exist for the run (whole first), then one phase per epoch ('epoch N')."""

    phases: tuple[Phase, ...]
    split: Split
    basis: str  # what the cuts came from (BASIS_NVTX, BASIS_EVENTS, a note)

    def get(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def steady(self) -> Phase | None:
        return self.get(STEADY)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.phases]


def from_marks(marks: Sequence[EpochMark], warmup: int = WARMUP_EPOCHS, basis: str = BASIS_EVENTS) -> RunPhases:
    """The phases cut at a run's epoch marks (see the module docstring for the cuts)."""
    ordered = sorted(marks, key=lambda m: m.epoch)
    split = split_epochs([m.epoch for m in ordered], warmup)
    whole = Phase(WHOLE, None, None, tuple(m.epoch for m in ordered))
    if not ordered:
        return RunPhases((whole,), split, basis)
    by_epoch = {m.epoch: m for m in ordered}
    first, last = ordered[0], ordered[-1]
    steady_start = by_epoch[split.steady[0]].start_ns
    note = ONE_EPOCH_NOTE if split.includes_warmup else ""
    named = [whole, Phase(STARTUP, None, first.start_ns, (first.epoch,))]
    if split.warmup:
        named.append(Phase(WARMUP, first.start_ns, steady_start, split.warmup))
    named.append(Phase(STEADY, steady_start, last.end_ns, split.steady, note))
    named.append(Phase(TEARDOWN, last.end_ns, None, (last.epoch,)))
    per_epoch = [Phase(f"epoch {m.epoch}", m.start_ns, m.end_ns, (m.epoch,)) for m in ordered]
    return RunPhases(tuple(named + per_epoch), split, basis)


def run_phases(folder: RunFolder, warmup: int = WARMUP_EPOCHS) -> RunPhases:
    """The phases on the sampler's clock, from the worker's epoch events (samples, steps, threads)."""
    return from_marks([EpochMark(e.epoch, e.start_ns, e.end_ns) for e in folder.epochs()], warmup, BASIS_EVENTS)


def trace_phases(folder: RunFolder, warmup: int = WARMUP_EPOCHS) -> RunPhases:
    """The phases on the trace's clock: the NVTX `epoch N` ranges, else the worker's epoch events, else
    the NVTX step ranges (first step = warm-up), else the first to the last kernel launch. A run traced
    in a window is cut by `windowed_phases`."""
    windowed = windowed_phases(folder, warmup)
    if windowed is not None:
        return windowed
    nvtx = nvtx_ranges(folder)
    marks = [EpochMark(int(m.group(1)), s, e) for name, s, e in nvtx if (m := EPOCH_NAME.match(name))]
    if marks:
        return from_marks(marks, warmup, BASIS_NVTX)
    events = run_phases(folder, warmup)
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
    span = launch_span(folder)
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


def windowed_phases(folder: RunFolder, warmup: int = WARMUP_EPOCHS) -> RunPhases | None:
    """A window-traced run's phases on the trace's clock (None for a run traced whole): the window, the
    window as the steady state when it starts after the warm-up epochs, and the epochs it overlaps."""
    from analyzers.trace.trace_window import window_span

    span = window_span(folder)
    if span is None:
        return None
    label = span.label
    events = run_phases(folder, warmup)
    inside = [
        Phase(p.name, p.start_ns, p.end_ns, p.epochs, p.note, label)
        for p in events.phases
        if p.name.startswith("epoch ") and p.start_ns is not None and p.end_ns is not None
        and p.start_ns < span.end_ns and p.end_ns > span.start_ns
    ]  # fmt: skip
    epochs = tuple(n for p in inside for n in p.epochs)
    named = [Phase(WHOLE, None, None, epochs, window=label)]
    if span.window.first_epoch > warmup:
        named.append(Phase(STEADY, span.start_ns, span.end_ns, epochs, window=label))
    return RunPhases(tuple(named + inside), events.split, label)


def _sql_path(path: object) -> str:
    return str(path).replace("'", "''")


PROFILER_STEP_PREFIX = "ProfilerStep#"
"""PyTorch's profiler step range: a `user_annotation` (an NVTX-like range) since 2022, an `Operator` in the 2021
Kineto format, which the ingest files under operators."""


def nvtx_ranges(folder: RunFolder) -> list[tuple[str, int, int]]:
    """The run's NVTX ranges (name, start, end), oldest first, with the profiler's step ranges the operators
    table holds (a 2021 Kineto trace's); empty without either."""
    import duckdb

    from analyzers.trace.tables import present

    parts = []
    nvtx = f"read_parquet('{_sql_path(folder.table_path(t.NVTX))}')"
    if present(folder, t.NVTX):
        parts.append(f"SELECT name, start_ns, end_ns FROM {nvtx}")
    if present(folder, t.OPERATORS):  # only where the annotations hold no step range (never twice)
        unless = (
            f" AND NOT EXISTS (SELECT 1 FROM {nvtx} WHERE starts_with(name, '{PROFILER_STEP_PREFIX}'))" if parts else ""
        )
        parts.append(
            f"SELECT name, start_ns, end_ns FROM read_parquet('{_sql_path(folder.table_path(t.OPERATORS))}') "
            f"WHERE starts_with(name, '{PROFILER_STEP_PREFIX}'){unless}"
        )
    if not parts:
        return []
    sql = f"SELECT * FROM ({' UNION '.join(parts)}) ORDER BY start_ns, name"
    rows = duckdb.connect().execute(sql).fetchall()
    return [(str(n), int(s), int(e)) for n, s, e in rows if s is not None and e is not None]


def launch_span(folder: RunFolder) -> tuple[int, int] | None:
    """The first kernel launch's start and the last one's end, from the CUDA API table."""
    import duckdb

    from analyzers.trace.tables import present

    path = folder.table_path(t.CUDA_API)
    if not present(folder, t.CUDA_API):
        return None
    where = api_names.sql_in("name", api_names.LAUNCH_CALLS)
    sql = f"SELECT min(start_ns), max(end_ns) FROM read_parquet('{_sql_path(path)}') WHERE {where}"
    row = duckdb.connect().execute(sql).fetchone()
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))
