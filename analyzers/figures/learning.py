"""Learning beside speed (issue 24 item 10): is a run still at chance, and do two groups of runs learn alike?

A speed comparison means something only if the runs train the same model on the same data: a framework
whose loss stays at ln(classes) (the loss of a uniform guess) or whose curve departs from another's by
more than run-to-run noise is a sign that the models or the pipelines differ. Pure functions of the
epochs' loss and accuracy, which the worker records from the outputs each step computes anyway.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from analyzers.figures.steady import Spread

# A loss within this share of ln(classes) is a uniform guess (listed with the diagnosis thresholds).
CHANCE_LOSS_PCT = 2.0
# Curves part when their medians differ by more than the wider of their repeats' ranges and this share of
# the larger median (a single run has no range of its own).
CURVE_GAP_MIN_PCT = 10.0

# The settings that decide a learning curve: runs agreeing on all of them should learn alike, whatever
# framework or measurement (trace, sampling, loader workers) they ran with.
LEARNING_SETTINGS = (
    "model",
    "dataset",
    "limit",
    "image_size",
    "batch",
    "epochs",
    "lr",
    "momentum",
    "num_classes",
    "amp",
)


def workload_key(spec: object) -> str:
    """The LEARNING_SETTINGS of a run's spec as one text: equal keys train alike."""
    return ", ".join(f"{name} {getattr(spec, name, None)}" for name in LEARNING_SETTINGS)


def same_workload(a: str, b: str) -> bool:
    """Whether two workload keys (RunSummary.workload) train alike; an empty key (unknown) never does."""
    return bool(a) and a == b


def chance_loss(classes: int) -> float:
    """Cross-entropy of a uniform guess over `classes` classes."""
    return math.log(classes)


def at_chance(loss: float, classes: int, tolerance_pct: float = CHANCE_LOSS_PCT) -> bool:
    """Whether `loss` is within `tolerance_pct` % of ln(classes) (a NaN loss is not: it diverged)."""
    chance = chance_loss(classes)
    return math.isfinite(loss) and abs(loss - chance) <= chance * tolerance_pct / 100


@dataclass(frozen=True)
class CurveGap:
    """Where two groups' per-epoch curves part by more than their noise."""

    metric: str  # "loss" or "accuracy"
    epoch: int
    values: tuple[float, float]  # the two medians
    allowed: float  # the gap their repeats' spread (or the floor) allows

    def text(self, first: str, second: str) -> str:
        a, b = self.values
        return (
            f"{self.metric} at epoch {self.epoch}: {a:.4g} ({first}) vs {b:.4g} ({second}), apart by"
            f" {abs(a - b):.3g}, more than the repeats' spread allows ({self.allowed:.3g})"
        )


def curve_gaps(metric: str, first: Sequence[Spread | None], second: Sequence[Spread | None]) -> list[CurveGap]:
    """Epochs where two groups' curves (one Spread per epoch: median and range over repeats) differ beyond
    the wider range of the two, and beyond CURVE_GAP_MIN_PCT of the larger median (a single run has no
    range of its own: the floor is what it is judged against)."""
    gaps = []
    for epoch, (a, b) in enumerate(zip(first, second), start=1):
        if a is None or b is None or not (math.isfinite(a.median) and math.isfinite(b.median)):
            continue
        noise = max(a.high - a.low, b.high - b.low)
        allowed = max(noise, CURVE_GAP_MIN_PCT / 100 * max(abs(a.median), abs(b.median)))
        if abs(a.median - b.median) > allowed:
            gaps.append(CurveGap(metric, epoch, (a.median, b.median), allowed))
    return gaps
