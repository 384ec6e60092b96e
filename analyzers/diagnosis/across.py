"""Across runs of one case: rank them by epoch time and say, for each pair, which verdicts differ,
and whether the gap in epoch time is mostly data wait."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from analyzers.diagnosis import diagnose
from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.verdict import Verdict
from analyzers.figures.contention import run_contention
from analyzers.figures.noise import why_not_ordered
from analyzers.figures.run_summary import summarise
from analyzers.figures.steady import Spread
from analyzers.render.sentences import Gap, gap_sentence, versus
from analyzers.run.run import Run


@dataclass(frozen=True)
class Labelled:
    """A run under the label a comparison gives it (its framework, or its id where frameworks repeat). It
    copies nothing: its figures are the run's summary and diagnosis, each computed once per run."""

    label: str
    run: Run

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def ok(self) -> bool:
        return self.run.record.rankable

    @property
    def steady_epoch_s(self) -> float | None:
        """Mean steady epoch time (analyzers.figures.phases)."""
        return summarise(self.run).steady_epoch_s

    @property
    def steady_images_per_s(self) -> float | None:
        """What runs of one case are ranked by (their epochs may differ)."""
        return summarise(self.run).steady_images_per_s

    @property
    def contended(self) -> bool:
        """Taken on a busy machine (analyzers.figures.contention): its times are not ordered."""
        return run_contention(self.run).contended

    @property
    def verdicts(self) -> list[Verdict]:
        return diagnose(self.run)

    def verdict(self, rule: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.rule == rule), None)


def ranked_runs(runs: list[Labelled]) -> list[Labelled]:
    """Most steady images/s first (runs of one case may use different --limit, so not epoch time);
    runs that may not be ranked (failed, diverged) and runs without epochs last."""

    def key(r: Labelled) -> tuple[bool, float, float, str]:
        missing = not r.ok or (r.steady_images_per_s is None and r.steady_epoch_s is None)
        return (missing, -(r.steady_images_per_s or 0.0), r.steady_epoch_s or 0.0, r.label)

    return sorted(runs, key=key)


def _value(v: Verdict) -> str:
    """The verdict's number with its unit, and its ratios ('19 %, first epoch 26.1x a later one'): a
    start-up share alone hid a first epoch 26x a later one."""
    if v.value is None:
        return v.state
    shown = f"{v.value:.0f}" if abs(v.value) >= 10 else f"{v.value:.2g}"
    ratios = [f"{e.name} {e.value:.1f}x" for e in v.evidence if e.unit == "x" and e.value is not None]
    return f"{shown} {v.unit.split(' ')[0]}" + "".join(f", {r}" for r in ratios) + ("" if v.fired else " (quiet)")


def differing(a: Labelled, b: Labelled) -> list[str]:
    """One line per rule whose verdicts differ between `a` and `b` (one fired and not the other, or
    both measured with headline numbers PAIR_DIFFERENCE_PCT points apart in a % unit)."""
    out = []
    for va in a.verdicts:
        vb = b.verdict(va.rule)
        if vb is None or not (va.measured and vb.measured):
            continue
        apart = False
        if va.value is not None and vb.value is not None and va.unit.startswith("%"):
            apart = abs(va.value - vb.value) >= th.PAIR_DIFFERENCE_PCT
        if va.fired == vb.fired and not apart:
            continue
        line = versus(a.label, _value(va), b.label, _value(vb), va.title)
        if va.rule == "input-bound":
            line += _data_wait_gap(a, b, va, vb)
        out.append(line)
    return out


def _data_wait_gap(a: Labelled, b: Labelled, va: Verdict, vb: Verdict) -> str:
    """How much of the gap in steady epoch time the data wait explains (analyzers.render.sentences),
    slower run first."""
    wa, wb = _evidence(va, "data wait per epoch"), _evidence(vb, "data wait per epoch")
    if wa is None or wb is None or a.steady_epoch_s is None or b.steady_epoch_s is None:
        return ""
    (slow, slow_wait, slow_busy), (fast, fast_wait, fast_busy) = sorted(
        ((a.steady_epoch_s, wa, a.contended), (b.steady_epoch_s, wb, b.contended)), reverse=True
    )
    noise = why_not_ordered(Spread(slow, slow, slow, 1), Spread(fast, fast, fast, 1), (slow_busy, fast_busy))
    return ": " + gap_sentence(
        Gap("epoch time", "data wait", slow, fast, slow_wait, fast_wait, noise, th.DATA_WAIT_GAP_SHARE)
    )


def _evidence(v: Verdict, name: str) -> float | None:
    return next((e.value for e in v.evidence if e.name == name), None)


def pair_lines(runs: list[Labelled]) -> list[tuple[str, str, list[str]]]:
    """(faster, slower, lines) for every pair, in ranking order."""
    order = ranked_runs(runs)
    return [(a.label, b.label, differing(b, a)) for a, b in combinations(order, 2)]
