"""What `tracer gate` holds a candidate to, declared once: each steady headline metric with the direction
that is worse and its default threshold (how one run measures them: `gate_measure`). Plain data, no Arrow:
the command line builds its help text from it.
"""

from __future__ import annotations

from dataclasses import dataclass

HIGHER_IS_WORSE, LOWER_IS_WORSE = 1, -1


@dataclass(frozen=True)
class GateMetric:
    """One metric the gate judges. `threshold` is the smallest change in the worse direction that may fail
    the gate: % of the baseline, or percentage points where `points` (a share or a utilisation)."""

    key: str  # as `--threshold KEY=PCT` names it
    label: str
    unit: str
    worse: int  # HIGHER_IS_WORSE or LOWER_IS_WORSE
    threshold: float
    points: bool = False
    timed: bool = True  # depends on the machine's load: a contended side's value is not judged
    cause: bool = False  # a part of the step (named before the totals it explains)


GATE_METRICS: tuple[GateMetric, ...] = (
    GateMetric("data_wait", "data wait share of the steady step", "%", HIGHER_IS_WORSE, 5.0, points=True, cause=True),
    GateMetric("cuda_api", "CUDA API time per image (steady, traced)", "ms", HIGHER_IS_WORSE, 10.0, cause=True),
    GateMetric("gpu_util", "GPU utilisation (steady)", "%", LOWER_IS_WORSE, 5.0, points=True, cause=True),
    GateMetric("peak_rss", "peak RSS (steady)", "MiB", HIGHER_IS_WORSE, 10.0, timed=False),
    GateMetric("gpu_memory", "GPU memory peak, NVML (steady)", "MiB", HIGHER_IS_WORSE, 10.0, timed=False),
    GateMetric("step_time", "step time (steady)", "ms", HIGHER_IS_WORSE, 5.0),
    GateMetric("epoch_time", "epoch time (steady)", "s", HIGHER_IS_WORSE, 5.0),
    GateMetric("images_per_s", "images/s (steady)", "img/s", LOWER_IS_WORSE, 5.0),
    GateMetric("mfu", "model FLOP utilisation (steady)", "%", LOWER_IS_WORSE, 5.0),  # speed over the peak: a total
)
METRIC_BY_KEY = {m.key: m for m in GATE_METRICS}
