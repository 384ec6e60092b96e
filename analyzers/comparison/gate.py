"""`tracer gate`: did a candidate regress against its baseline beyond noise and threshold? Pure: `gate`
judges, `gate_output` writes the Markdown and JUnit forms, the CLI prints and sets the exit code.

Each metric of `gate_metrics.GATE_METRICS` is judged on its steady value (the median over a side's runs).
A change in the worse direction fails the gate only when it passes the metric's threshold *and* lies
beyond noise as `analyzers.figures.noise.why_not_ordered` reads it: the two sides' ranges (their repeats'
values, or a single run's own steps or steady epochs) must not overlap, no side's repeats may disagree,
and no side may be contended where the figure depends on the machine's load (then it is not judged).
Regressions come first, the parts of the step (data wait, API time, utilisation) before the totals they
explain, each group by how far past its threshold; `tracer diff` between the sides' middle runs says why.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from analyzers.comparison.diff import diff
from analyzers.comparison.gate_measure import Measure, contended, measure
from analyzers.comparison.gate_metrics import GATE_METRICS, GateMetric
from analyzers.figures.noise import REPEATS, why_not_ordered
from analyzers.figures.steady import WARMUP_EPOCHS, Spread
from analyzers.run.run import Run
from tracer.core.errors import UserError

REGRESSED, NOT_JUDGED, WITHIN_NOISE = "regressed", "not judged", "within noise"
WITHIN_THRESHOLD, IMPROVED, NOT_MEASURED = "within threshold", "improved", "not measured"
NOT_COMPARED = "not compared"  # both measured it, on different bases
STATES = (REGRESSED, NOT_JUDGED, WITHIN_NOISE, WITHIN_THRESHOLD, IMPROVED, NOT_COMPARED, NOT_MEASURED)
"""Every verdict on a metric, in the order the summary lists them."""
UNJUDGED_NOISE = ("contended", "repeats disagree")  # noise reasons that leave a change unknown, not small
A_RUN = "run"  # a side of one run with a single figure (no samples inside it)


@dataclass(frozen=True)
class Side:
    """One side's value of a metric: the median over its runs, the range it is read against, what that
    range is over (REPEATS, the run's blocks of steps or its "epochs", or A_RUN) and whether a run of it
    was contended."""

    runs: int
    value: float
    spread: Spread
    over: str
    contended: bool
    basis: str


@dataclass(frozen=True)
class Judgement:
    metric: GateMetric
    threshold: float
    state: str  # one of STATES
    baseline: Side | None
    candidate: Side | None
    change: float | None  # in the worse direction: % of the baseline, or points where metric.points
    why: str = ""  # the noise reason, or what was not measured

    @property
    def past_threshold(self) -> float:
        """How many thresholds the change is worth (the order of regressions)."""
        if self.change is None:
            return 0.0
        return self.change / self.threshold if self.threshold > 0 else math.inf

    def to_json(self) -> dict[str, object]:
        def side(s: Side | None) -> dict[str, object] | None:
            if s is None:
                return None
            low, high = s.spread.low, s.spread.high
            return {"runs": s.runs, "value": s.value, "low": low, "high": high, "range_over": s.over,
                    "contended": s.contended, "basis": s.basis}  # fmt: skip

        return {
            "metric": self.metric.key,
            "label": self.metric.label,
            "unit": self.metric.unit,
            "state": self.state,
            "threshold": self.threshold,
            "threshold_unit": "points" if self.metric.points else "% of baseline",
            "change": self.change,
            "why": self.why,
            "baseline": side(self.baseline),
            "candidate": side(self.candidate),
        }


@dataclass(frozen=True)
class GateResult:
    baseline: tuple[str, ...]
    candidate: tuple[str, ...]
    judgements: tuple[Judgement, ...]  # in STATES order, regressions first
    reason: tuple[str, ...] = ()  # `tracer diff`'s sentences, baseline's middle run as A, candidate's as B
    explained: tuple[str, str] = ("", "")  # the runs `diff` compared
    notes: tuple[str, ...] = field(default=())

    @property
    def regressions(self) -> tuple[Judgement, ...]:
        return tuple(j for j in self.judgements if j.state == REGRESSED)

    @property
    def failed(self) -> bool:
        return bool(self.regressions)

    def to_json(self) -> dict[str, object]:
        return {
            "passed": not self.failed,
            "baseline": list(self.baseline),
            "candidate": list(self.candidate),
            "regressed": [j.metric.key for j in self.regressions],
            "metrics": [j.to_json() for j in self.judgements],
            "reason": list(self.reason),
            "explained_by_diff": list(self.explained),
            "notes": list(self.notes),
        }


def thresholds(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Every metric's threshold: its declared default, or the override given for its key."""
    given = dict(overrides or {})
    unknown = sorted(set(given) - {m.key for m in GATE_METRICS})
    if unknown:
        keys = ", ".join(m.key for m in GATE_METRICS)
        raise UserError(f"--threshold {unknown[0]}: no such metric; give one of {keys}")
    for key, value in given.items():
        if not math.isfinite(value) or value < 0:
            raise UserError(f"--threshold {key}={value}: give a finite number 0 or more (a percentage)")
    return {m.key: given.get(m.key, m.threshold) for m in GATE_METRICS}


def gate(
    baseline: Sequence[Run],
    candidate: Sequence[Run],
    overrides: Mapping[str, float] | None = None,
    warmup: int = WARMUP_EPOCHS,
) -> GateResult:
    """Every metric judged, regressions first, with `diff`'s reason between the sides' middle runs."""
    if not baseline or not candidate:
        raise UserError("gate needs a baseline run and a candidate run at least")
    limits = thresholds(overrides)
    measured = [[measure(f, warmup) for f in side] for side in (baseline, candidate)]
    busy = [any(contended(f, warmup) for f in side) for side in (baseline, candidate)]
    judged = [_judge(m, limits[m.key], measured[0], measured[1], busy[0], busy[1]) for m in GATE_METRICS]
    if all(j.state in (NOT_MEASURED, NOT_COMPARED) for j in judged):
        raise UserError(
            "nothing to gate: no metric of the gate is measured on both sides on one basis (a trace with neither "
            "steps nor samples has none; `tracer show RUN` says what a run measured)"
        )
    order = {state: i for i, state in enumerate(STATES)}
    judged.sort(key=lambda j: (order[j.state], not j.metric.cause if j.state == REGRESSED else 0,
                               -j.past_threshold if j.state == REGRESSED else 0))  # fmt: skip
    a, b = _middle(baseline, measured[0]), _middle(candidate, measured[1])
    try:
        reason = diff(a, b, warmup).sentences if a.path != b.path else ("the baseline and the candidate are one run",)
    except UserError as e:
        reason = (f"not explained by `tracer diff`: {e}",)
    notes = tuple(
        f"the {name} is {n} runs, read as repeats of one another: its value is their median, its range theirs"
        for name, n in (("baseline", len(baseline)), ("candidate", len(candidate)))
        if n > 1
    )
    ids = (tuple(f.run_id for f in baseline), tuple(f.run_id for f in candidate))
    return GateResult(ids[0], ids[1], tuple(judged), tuple(reason), (a.run_id, b.run_id), notes)


def _side(values: list[Measure], is_contended: bool) -> Side:
    """A side's median and the range its noise is read from: its runs' values where it has several, else
    its one run's samples (steps or epochs), else the single figure."""
    if len(values) > 1:
        numbers = [v.value for v in values]
        spread, over = Spread(statistics.median(numbers), min(numbers), max(numbers), len(numbers)), REPEATS
    elif len(values[0].samples) > 1:
        one = values[0]
        spread, over = Spread(one.value, min(one.samples), max(one.samples), len(one.samples)), one.samples_of
    else:
        spread, over = Spread(values[0].value, values[0].value, values[0].value, 1), A_RUN
    return Side(len(values), spread.median, spread, over, is_contended, values[0].basis)


def _judge(
    metric: GateMetric,
    threshold: float,
    base: list[dict[str, Measure]],
    cand: list[dict[str, Measure]],
    base_busy: bool,
    cand_busy: bool,
) -> Judgement:
    values = [[m[metric.key] for m in side if metric.key in m] for side in (base, cand)]
    missing = [name for name, v, side in zip(("baseline", "candidate"), values, (base, cand)) if len(v) < len(side)]
    if missing:
        where = "in either side" if len(missing) == 2 else f"in the {missing[0]}"
        return Judgement(metric, threshold, NOT_MEASURED, None, None, None, f"not measured {where}")
    b, c = _side(values[0], base_busy), _side(values[1], cand_busy)
    if len({v.basis for side in values for v in side}) > 1:
        bases = " and ".join(dict.fromkeys(v.basis for side in values for v in side))
        return Judgement(metric, threshold, NOT_COMPARED, b, c, None, f"measured on different bases: {bases}")
    if metric.points:
        change: float | None = metric.worse * (c.value - b.value)
    elif b.value > 0:
        change = metric.worse * 100 * (c.value - b.value) / b.value
    else:
        return Judgement(metric, threshold, NOT_COMPARED, b, c, None, "the baseline's value is 0: no change in %")
    assert change is not None
    noise = why_not_ordered(
        b.spread, c.spread, (b.contended, c.contended), metric.timed, 0.0, (_kind(b.over), _kind(c.over))
    )
    if abs(change) <= threshold:
        return Judgement(metric, threshold, WITHIN_THRESHOLD, b, c, change, noise)
    if noise:
        state = NOT_JUDGED if noise in UNJUDGED_NOISE else WITHIN_NOISE
        return Judgement(metric, threshold, state, b, c, change, noise)
    return Judgement(metric, threshold, REGRESSED if change > 0 else IMPROVED, b, c, change)


def _kind(over: str) -> str:
    """The word for what a side's range is over, as the noise reasons name it."""
    return over if over != A_RUN else "single figures"


def _middle(side: Sequence[Run], measured: Sequence[dict[str, Measure]]) -> Run:
    """The run of a side whose step time (else epoch time) is nearest the side's median: what `diff` explains."""
    for key in ("step_time", "epoch_time"):
        values = [m[key].value for m in measured if key in m]
        if len(values) == len(side):
            median = statistics.median(values)
            return side[min(range(len(side)), key=lambda i: abs(values[i] - median))]
    return side[0]
