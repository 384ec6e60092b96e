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
from typing import Iterable, Sequence

# the package alone, not its `Run`: no Arrow, so a phase's name and label cost none (`analyze FILE`)
from analyzers.run import WARMUP_EPOCHS

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


PROFILER_STEP_PREFIX = "ProfilerStep#"
"""PyTorch's profiler step range: a `user_annotation` (an NVTX-like range) since 2022, an `Operator` in the 2021
Kineto format, which the ingest files under operators."""
