"""The rule for runs of several ranks: the straggler, named by arrival (analyzers.figures.straggler), with the
part of its own step that made it late and the knob for that part."""

from __future__ import annotations

from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables
from analyzers.diagnosis.knobs import join, knob
from analyzers.diagnosis.verdict import Evidence, RuleName, Severity, Verdict, not_measured, quiet, rule
from analyzers.figures.coverage import MIXED
from analyzers.figures.straggler import CAUSE_DATA, CAUSE_GPU, CAUSE_HOST, Straggler
from tracer.core.frameworks import Tuning

STRAGGLER = RuleName("straggler", "straggler")
NAME, TITLE = STRAGGLER


def _knob(t: RunTables, cause: str | None, rank: int) -> str:
    """The knob of the cause; of a mixed cause, the knobs of each listed part."""
    s = t.straggler
    if cause == MIXED and s is not None and s.explanation is not None:
        listed = [p.label for p in s.explanation.parts if p.pct >= th.CAUSE_LISTED_PCT]
        return join(*(_knob(t, part, rank) for part in listed)) if listed else ""
    if cause == CAUSE_DATA:
        return knob(t.record, Tuning.WORKERS, f"rank {rank}'s input pipeline: more loader workers")
    if cause == CAUSE_HOST:
        return join(
            knob(t.record, Tuning.THREADS, f"rank {rank}'s host threads"),
            f"give rank {rank}'s process cores of its own (nothing else running on them)",
        )
    if cause == CAUSE_GPU:
        return (
            f"rank {rank}'s GPU: another process on it, its clocks and temperature (nvidia-smi -q -d PERFORMANCE), "
            "or more work given to that rank (uneven batches)"
        )
    return ""


@rule(STRAGGLER)
def straggler(t: RunTables) -> Verdict:
    if t.ranks is None:
        return not_measured(NAME, TITLE, "a run of one process")
    s = t.straggler
    if s is None or s.collectives == 0:
        return not_measured(NAME, TITLE, (s.why_not if s else "") or "no collective was recorded on every rank")
    last = ", ".join(f"rank {r}: {n}" for r, n in sorted(s.last_counts.items()))
    evidence = [Evidence("collectives matched on every rank", float(s.collectives), "")]
    if s.rank is None:
        return quiet(NAME, TITLE, f"no straggler: {s.why_not} (last: {last})", None, "%", th.STRAGGLER_LATE_PCT)
    rows = {r.rank: r for r in (t.ranks.rows if t.ranks else ())}
    means = [r.step_mean_s for r in rows.values() if r.step_mean_s]
    step_s = sum(means) / len(means) if means else None
    late_pct = 100.0 * s.late_by_s / step_s if step_s and s.late_by_s is not None else None
    evidence += [
        Evidence(f"rank {s.rank} last at", 100.0 * s.last_share, "% of collectives"),
        Evidence("late by (median)", None if s.late_by_s is None else s.late_by_s * 1e3, "ms"),
        Evidence("mean step", None if step_s is None else step_s * 1e3, "ms"),
        *(Evidence(f"{part} over the other ranks", v * 1e3, "ms/step") for part, v in s.excess_s.items()),
        *(
            [Evidence("lateness unexplained by its step's parts", s.explanation.unexplained_pct, "%")]
            if s.explanation is not None
            else []
        ),
    ]
    if s.persistence:
        top = max((r.step_share if s.persistence_over == "steps" else r.last / s.collectives) for r in s.summary)
        evidence.append(Evidence(f"the last rank is {s.persistence} over the {s.persistence_over}", 100 * top, "%"))
    waited = ""
    if s.waited_most is not None and s.waited_most != s.rank:
        most = s.waited_s[s.waited_most] * 1e3
        waited = f"; rank {s.waited_most} waited longest in collectives ({most:.3g} ms) because it arrived early"
    cause = _cause_text(s)
    finding = (
        f"rank {s.rank} arrived last at {s.last_counts[s.rank]} of {s.collectives} collectives, "
        f"late by {(s.late_by_s or 0.0) * 1e3:.3g} ms (median){cause}{waited} ({s.basis})"
    )
    if late_pct is None:
        return quiet(
            NAME,
            TITLE,
            finding + "; no step time to weigh it against",
            None,
            "%",
            th.STRAGGLER_LATE_PCT,
            tuple(evidence),
        )
    if late_pct < th.STRAGGLER_LATE_PCT:
        return quiet(NAME, TITLE, finding, late_pct, "% of the mean step", th.STRAGGLER_LATE_PCT, tuple(evidence))
    severity = Severity.HIGH if late_pct >= th.STRAGGLER_HIGH_PCT else Severity.MEDIUM
    return Verdict(
        NAME,
        TITLE,
        True,
        True,
        severity,
        finding,
        late_pct,
        "% of the mean step",
        th.STRAGGLER_LATE_PCT,
        tuple(evidence),
        _knob(t, s.cause, s.rank),
    )


def _cause_text(s: Straggler) -> str:
    """', caused by its data wait (85 % of the lateness, 15 % unexplained)', or the mixed parts."""
    if s.explanation is None:
        return " (its cause is not measured: the run has no steps table)"
    if s.cause == MIXED:
        return f"; its cause is {s.explanation.text('the lateness')}"
    return f", caused by its {s.cause} ({s.explanation.text('the lateness').split(': ', 1)[-1]})"
