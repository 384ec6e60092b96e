"""Which rank holds the others back, found by arrival, and what in its own step made it late.

In data-parallel training every collective ends on all ranks together, so the time each rank *waits*
in it says who was early, not who is slow: the fast ranks wait longest, and a tool that ranks waiting
blames them. Here, at each collective the rank that arrived last is its cause; over the steady steps
the rank most often last is the straggler, late by the median of (its arrival - the others' median
arrival). Its cause is the part of its own step, from the step's start to its arrival, that exceeds
the other ranks' most: data wait (the steps table), GPU compute (non-NCCL kernels in that span, for a
trace) or host time (the rest: Python, dispatch, launches), named only when it covers most of the lateness
(`analyzers.figures.coverage`), else "mixed" with each part's share and the unexplained rest.

Beside the verdict, `summary` is a record across the run: per rank, how often it arrived last and first,
its mean lateness against the others' median arrival, and the share of steps it was the last in; and
whether the last rank is the same step after step (persistent) or moves (noise). TraceLens' collective
report and Nsight Systems' `nccl_straggler` recipe report the same; HTA's always flags two ranks.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from analyzers.figures.coverage import Explanation, explain
from analyzers.figures.ranks import COMM_ARRIVAL, RanksInput, RankSteps, busy_between, comm_time_ns, load
from analyzers.run.run import Run

MIN_COLLECTIVES = 3
"""Fewer collectives matched on every rank than this, and nobody is named (one step is an anecdote)."""
MIN_LAST_SHARE = 0.5
"""The straggler is last at no fewer than this share of the collectives; else the lateness moves around."""
CAUSE_DATA, CAUSE_HOST, CAUSE_GPU = "data wait", "host time", "GPU compute"
CAUSE_NONE = "none of its own step's parts (it started its steps late)"
PERSISTENT, MOVING = "persistent", "moving"
"""The same rank last in at least MIN_LAST_SHARE of the steps (of the collectives, for a run of one step), or not."""


@dataclass(frozen=True)
class RankLateness:
    """One rank across the run's collectives."""

    rank: int
    last: int  # collectives at which it arrived last
    first: int  # ... first
    mean_late_s: float  # mean of (its arrival - the others' median arrival); negative: early
    last_steps: int  # steps in which it was last at the most collectives
    steps: int  # steps holding a collective matched on every rank

    @property
    def step_share(self) -> float:
        return self.last_steps / self.steps if self.steps else 0.0

    def to_json(self) -> dict[str, object]:
        return {"rank": self.rank, "last": self.last, "first": self.first, "mean_late_s": self.mean_late_s,
                "last_steps": self.last_steps, "steps": self.steps, "step_share": self.step_share}  # fmt: skip


@dataclass(frozen=True)
class Straggler:
    """The verdict's numbers: `rank` is None where no rank is last often enough to be named."""

    rank: int | None
    collectives: int  # matched on every rank, in the basis' steps
    last_counts: dict[int, int]  # how often each rank arrived last
    late_by_s: float | None  # median (its arrival - the others' median arrival) where it was last
    cause: str | None  # CAUSE_DATA, CAUSE_HOST, CAUSE_GPU, CAUSE_NONE; None without steps
    excess_s: dict[str, float] = field(default_factory=dict)  # per step: its part - the others' median part
    waited_most: int | None = None  # the rank that spent the most time in collectives (not the cause)
    waited_s: dict[int, float] = field(default_factory=dict)
    basis: str = ""
    why_not: str = ""  # why no rank is named
    explanation: Explanation | None = None  # the lateness split by part, with what they leave unexplained
    summary: tuple[RankLateness, ...] = ()
    persistence: str = ""  # PERSISTENT or MOVING ("" with fewer than MIN_COLLECTIVES)
    persistence_over: str = ""  # "steps" or "collectives" (a run of one step)

    @property
    def last_share(self) -> float:
        return (
            self.last_counts.get(self.rank, 0) / self.collectives if self.rank is not None and self.collectives else 0.0
        )

    def to_json(self) -> dict[str, object]:
        return {
            "straggler": self.rank,
            "collectives": self.collectives,
            "last_counts": {str(k): v for k, v in self.last_counts.items()},
            "late_by_s": self.late_by_s,
            "cause": self.cause,
            "excess_s": self.excess_s,
            "waited_most": self.waited_most,
            "waited_s": {str(k): v for k, v in self.waited_s.items()},
            "basis": self.basis,
            "why_not": self.why_not,
            "explanation": self.explanation.to_json() if self.explanation else None,
            "summary": [r.to_json() for r in self.summary],
            "persistence": self.persistence,
            "persistence_over": self.persistence_over,
        }


def straggler(folder: Run) -> Straggler | None:
    """None for a run of one process."""
    data = load(folder)
    return None if data is None else attribute(data)


def attribute(data: RanksInput) -> Straggler:
    ranks = data.ranks
    if len(ranks) < 2:  # one rank's trace of a larger job (its record says the world size): nobody to compare
        held = ", ".join(str(r.rank) for r in ranks) or "none"
        return Straggler(None, 0, {}, None, None, basis=data.basis,
                         why_not=f"the run holds rank {held}'s trace only: import every rank's trace as one run "
                                 "(`tracer import rank0.json.gz rank1.json.gz ...`)")  # fmt: skip
    by_key = [{a.key: a for a in r.arrivals} for r in ranks]
    common = set(by_key[0])
    for keys in by_key[1:]:
        common &= set(keys)
    order = sorted(common, key=lambda k: by_key[0][k].arrive_ns)
    waited = {r.rank: comm_time_ns(r, data.comm_source) / 1e9 for r in ranks}
    waited_most = max(waited, key=lambda k: waited[k]) if waited and max(waited.values()) > 0 else None
    last: Counter[int] = Counter()
    late: dict[int, list[int]] = {}
    lastlist: list[int] = []
    for key in order:
        arrive = [(by_key[i][key].arrive_ns, r.rank) for i, r in enumerate(ranks)]
        t_last, who = max(arrive)
        others = [t for t, r in arrive if r != who]
        last[who] += 1
        lastlist.append(who)
        late.setdefault(who, []).append(int(t_last - statistics.median(others)))
    summary, persistence, over = _summary(ranks, [[by_key[i][k].arrive_ns for i in range(len(ranks))] for k in order])
    basis = f"{data.basis}; by {COMM_ARRIVAL}" if data.comm_source == COMM_ARRIVAL else data.basis
    base = Straggler(
        None, len(order), dict(last), None, None, waited_most=waited_most, waited_s=waited, basis=basis,
        summary=summary, persistence=persistence, persistence_over=over,
    )  # fmt: skip
    if len(order) < MIN_COLLECTIVES:
        return _with(base, why_not=f"{len(order)} collectives matched on every rank (fewer than {MIN_COLLECTIVES})")
    who, count = last.most_common(1)[0]
    if count / len(order) < MIN_LAST_SHARE:
        return _with(
            base, why_not=f"no rank is last at half the collectives (most: rank {who}, {count} of {len(order)})"
        )
    late_by = statistics.median(late[who]) / 1e9
    excess = _excess(ranks, who)
    explanation = explain(late_by, {k: v for k, v in excess.items()}) if excess else None
    cause = None
    if explanation is not None:
        cause = explanation.cause if explanation.cause is not None else CAUSE_NONE
    return replace(base, rank=who, late_by_s=late_by, cause=cause, excess_s=excess, explanation=explanation)


def _with(s: Straggler, why_not: str) -> Straggler:
    return replace(s, rank=None, late_by_s=None, cause=None, excess_s={}, why_not=why_not, explanation=None)


def _summary(ranks: tuple[RankSteps, ...], arrivals: list[list[int]]) -> tuple[tuple[RankLateness, ...], str, str]:
    """Per rank over the matched collectives (`arrivals[k][i]`: rank i's arrival at the k-th): last, first,
    mean lateness, steps it was last in; and whether the last rank persists over the steps (over the
    collectives where the run holds one step)."""
    if not arrivals:
        return (), "", ""
    n = len(ranks)
    matrix = np.array(arrivals, dtype=np.int64)  # collectives x ranks
    lasts, firsts = np.argmax(matrix, axis=1), np.argmin(matrix, axis=1)
    others = np.array([[np.median(np.delete(row, i)) for i in range(n)] for row in matrix])
    lateness = (matrix - others).mean(axis=0) / 1e9
    # the step each collective falls in: rank 0's step holding its arrival there
    r0 = ranks[0]
    step_of = np.full(len(matrix), -1)
    if len(r0.start_ns):
        idx = np.searchsorted(r0.start_ns, matrix[:, 0], side="right") - 1
        inside = (idx >= 0) & (matrix[:, 0] < r0.end_ns[np.maximum(idx, 0)])
        step_of = np.where(inside, idx, -1)
    steps = sorted(set(step_of.tolist()) - {-1})
    step_last = []
    for s_ in steps:
        counts = Counter(lasts[step_of == s_].tolist())
        step_last.append(counts.most_common(1)[0][0])
    per_step = Counter(step_last)
    summary = tuple(
        RankLateness(
            ranks[i].rank, int((lasts == i).sum()), int((firsts == i).sum()), float(lateness[i]),
            per_step.get(i, 0), len(steps),
        )
        for i in range(n)
    )  # fmt: skip
    if len(matrix) < MIN_COLLECTIVES:
        return summary, "", ""
    if len(steps) >= 2:
        top = per_step.most_common(1)[0][1]
        return summary, PERSISTENT if top / len(steps) >= MIN_LAST_SHARE else MOVING, "steps"
    top = Counter(lasts.tolist()).most_common(1)[0][1]
    return summary, PERSISTENT if top / len(matrix) >= MIN_LAST_SHARE else MOVING, "collectives"


def _excess(ranks: tuple[RankSteps, ...], who: int) -> dict[str, float]:
    """Per part of the straggler's own steps (start to its first arrival): its median minus the others'."""
    parts = {r.rank: _parts(r) for r in ranks}
    if any(not p for p in parts.values()):
        return {}
    steps = set(parts[who])
    for p in parts.values():
        steps &= set(p)
    if not steps:
        return {}
    excess: dict[str, float] = {}
    traced = any(r.gpu_compute_ns is not None for r in ranks)  # no kernels: GPU compute is not measured
    for i, name in enumerate((CAUSE_DATA, CAUSE_GPU, CAUSE_HOST)):
        if name == CAUSE_GPU and not traced:
            continue
        mine = statistics.median(parts[who][s][i] for s in steps)
        others = statistics.median(
            statistics.median(parts[r][s][i] for r in parts if r != who) for s in steps
        )  # fmt: skip
        excess[name] = (mine - others) / 1e9
    return excess


def _parts(r: RankSteps) -> dict[tuple[int, int], tuple[int, int, int]]:
    """Per step (epoch, step): data wait, GPU compute and host time from the step's start to the rank's
    first arrival at a collective in that step."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    if not len(r.start_ns) or not r.arrivals:
        return out
    arrivals = np.array(sorted(a.arrive_ns for a in r.arrivals), dtype=np.int64)
    ends = r.end_ns
    for i in range(len(r.start_ns)):
        start, end = int(r.start_ns[i]), int(ends[i])
        j = int(np.searchsorted(arrivals, start, side="left"))
        if j >= len(arrivals) or arrivals[j] >= max(end, start + 1) + (end - start):  # none in this step
            continue
        arrive = int(arrivals[j])
        to_arrival = max(0, arrive - start)
        wait = min(int(r.data_wait_ns[i]), to_arrival)
        gpu = busy_between(r, start, arrive)
        host = max(0, to_arrival - wait - gpu)
        out[(int(r.epoch[i]), int(r.step[i]))] = (wait, gpu, host)
    return out


def summary_lines(s: Straggler) -> list[str]:
    """The straggler in words: who, whether it persists, and how much of its lateness its cause covers."""
    said = f"{s.collectives} collectives matched on every rank"
    if s.persistence:
        said += f"; the last rank is {s.persistence} over the {s.persistence_over}"
    lines = [said + "."]
    if s.rank is None:
        lines.append(f"no straggler: {s.why_not}.")
        return lines
    late = (s.late_by_s or 0.0) * 1e3
    lines.append(
        f"straggler: rank {s.rank}, last at {s.last_counts.get(s.rank, 0)} of {s.collectives}, late by {late:.3g} ms "
        "(median)."
    )
    if s.explanation is not None:
        lines.append(f"its cause, sized against its lateness: {s.explanation.text('the lateness')}.")
    return lines


def rank_lines(s: Straggler) -> list[str]:
    """The summary per rank as Markdown table rows, with its header."""
    out = [
        "| rank | arrived last | arrived first | mean lateness (ms) | last in steps |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in s.summary:
        steps = f"{r.last_steps} of {r.steps}" if r.steps else "-"
        out.append(f"| {r.rank} | {r.last} | {r.first} | {r.mean_late_s * 1e3:+.3g} | {steps} |")
    return out
