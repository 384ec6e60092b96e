"""Steady-state throughput: the one definition of a run's headline speed, and of the study's Table 1/2 cell.

The first epoch(s) pay for graph tracing, kernel selection and cold caches (TensorFlow's first epoch
can take three times the next ones), so the headline is the *steady state*: the epochs after a warm-up
of `WARMUP_EPOCHS` (or a declared number), the warm-up shown apart. A run with no epoch after its
warm-up falls back to all its epochs and says so (`includes_warmup`). Repeats of one spec are pooled
as the median of their per-run steady means, with the min-max spread.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from analyzers.figures.phases import WARMUP_EPOCHS, split_epochs
from tracer.core.records import EpochRecord

__all__ = ["WARMUP_EPOCHS", "EpochStats", "Spread", "Throughput", "epoch_stats", "spread", "throughput"]

# The definition, for captions and help texts (one wording everywhere).
STEADY_DEFINITION = (
    "steady state = the epochs after the first {warmup} (warm-up shown apart); "
    "a run with no epoch after its warm-up counts all its epochs, marked *"
)


def definition(warmup: int = WARMUP_EPOCHS) -> str:
    return STEADY_DEFINITION.format(warmup=warmup)


@dataclass(frozen=True)
class EpochStats:
    """One run's epochs split into warm-up and steady state."""

    epochs: int
    warmup: int  # epochs left out (0 when the run fell back to all its epochs)
    first_epoch_s: float | None
    steady_epochs: int
    steady_epoch_s: float | None  # mean epoch time over the steady epochs
    steady_images_per_s: float | None  # steady images over steady seconds
    includes_warmup: bool  # True when too few epochs: the steady numbers count every epoch
    steady_epoch_numbers: tuple[int, ...] = ()  # which epochs those are (analyzers.figures.phases.split_epochs)


def epoch_stats(epochs: Sequence[EpochRecord], warmup: int = WARMUP_EPOCHS) -> EpochStats:
    ordered = sorted(epochs, key=lambda e: e.epoch)
    split = split_epochs([e.epoch for e in ordered], warmup)  # the one warm-up/steady cut (analyzers.figures.phases)
    steady = [e for e in ordered if e.epoch in split.steady]
    seconds = sum(e.duration_s for e in steady)
    images = sum(e.images for e in steady)  # 0: samples not counted (a command's optimizer-counted steps)
    return EpochStats(
        epochs=len(ordered),
        warmup=len(split.warmup),
        first_epoch_s=ordered[0].duration_s if ordered else None,
        steady_epochs=len(steady),
        steady_epoch_s=statistics.fmean(e.duration_s for e in steady) if steady else None,
        steady_images_per_s=images / seconds if seconds > 0 and images > 0 else None,
        includes_warmup=split.includes_warmup,
        steady_epoch_numbers=split.steady,
    )


@dataclass(frozen=True)
class Spread:
    """Median of repeats with their range; `n` = 1 is a single run (no spread)."""

    median: float
    low: float
    high: float
    n: int

    def text(self, spec: str = ".2f") -> str:
        head = format(self.median, spec)
        return head if self.n < 2 else f"{head} ({format(self.low, spec)}-{format(self.high, spec)}, n={self.n})"


def spread(values: Sequence[float | None]) -> Spread | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Spread(statistics.median(present), min(present), max(present), len(present))


@dataclass(frozen=True)
class Throughput:
    """A Table 1/2 cell: the steady-state numbers of the ok repeats of one spec."""

    runs: int
    epoch_s: Spread | None  # per-run steady mean epoch time
    images_per_s: Spread | None  # per-run steady images/s
    first_epoch_s: Spread | None
    includes_warmup: bool  # some run had no epoch after its warm-up
    warmup: int


def throughput(runs_epochs: Sequence[Sequence[EpochRecord]], warmup: int = WARMUP_EPOCHS) -> Throughput:
    """THE Table 1 function (report, campaign table and benchmarks/table1.py all call it): each run's
    steady state first, then the median and range over the runs, so a repeat with more epochs does not
    weigh more than another."""
    stats = [epoch_stats(epochs, warmup) for epochs in runs_epochs if epochs]
    return Throughput(
        runs=len(stats),
        epoch_s=spread([s.steady_epoch_s for s in stats]),
        images_per_s=spread([s.steady_images_per_s for s in stats]),
        first_epoch_s=spread([s.first_epoch_s for s in stats]),
        includes_warmup=any(s.includes_warmup for s in stats),
        warmup=warmup,
    )
