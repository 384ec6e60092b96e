"""Which rank holds the others back, found by arrival, and what in its own step made it late.

In data-parallel training every collective ends on all ranks together, so the time each rank *waits*
in it says who was early, not who is slow: the fast ranks wait longest, and a tool that ranks waiting
blames them. Here, at each collective the rank that arrived last is its cause; over the steady steps
the rank most often last is the straggler, late by the median of (its arrival - the others' median
arrival). Its cause is the part of its own step, from the step's start to its arrival, that exceeds
the other ranks' most: data wait (the steps table), GPU compute (non-NCCL kernels in that span, for a
trace) or host time (the rest: Python, dispatch, launches).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from analyzers.figures.ranks import COMM_ARRIVAL, RanksInput, RankSteps, busy_between, comm_time_ns, load
from tracer.core.runfolder import RunFolder

MIN_COLLECTIVES = 3
"""Fewer collectives matched on every rank than this, and nobody is named (one step is an anecdote)."""
MIN_LAST_SHARE = 0.5
"""The straggler is last at no fewer than this share of the collectives; else the lateness moves around."""
CAUSE_DATA, CAUSE_HOST, CAUSE_GPU = "data wait", "host time", "GPU compute"
CAUSE_NONE = "none of its own step's parts (it started its steps late)"


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
        }


def straggler(folder: RunFolder) -> Straggler | None:
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
    for key in order:
        arrive = [(by_key[i][key].arrive_ns, r.rank) for i, r in enumerate(ranks)]
        t_last, who = max(arrive)
        others = [t for t, r in arrive if r != who]
        last[who] += 1
        late.setdefault(who, []).append(int(t_last - statistics.median(others)))
    basis = f"{data.basis}; by {COMM_ARRIVAL}" if data.comm_source == COMM_ARRIVAL else data.basis
    base = Straggler(None, len(order), dict(last), None, None, waited_most=waited_most, waited_s=waited, basis=basis)
    if len(order) < MIN_COLLECTIVES:
        return _with(base, why_not=f"{len(order)} collectives matched on every rank (fewer than {MIN_COLLECTIVES})")
    who, count = last.most_common(1)[0]
    if count / len(order) < MIN_LAST_SHARE:
        return _with(
            base, why_not=f"no rank is last at half the collectives (most: rank {who}, {count} of {len(order)})"
        )
    late_by = statistics.median(late[who]) / 1e9
    cause, excess = _cause(ranks, who)
    return Straggler(who, len(order), dict(last), late_by, cause, excess, waited_most, waited, basis)


def _with(s: Straggler, why_not: str) -> Straggler:
    return Straggler(None, s.collectives, s.last_counts, None, None, {}, s.waited_most, s.waited_s, s.basis, why_not)


def _cause(ranks: tuple[RankSteps, ...], who: int) -> tuple[str | None, dict[str, float]]:
    """The part of the straggler's own steps (start to its first arrival) that most exceeds the others'."""
    parts = {r.rank: _parts(r) for r in ranks}
    if any(not p for p in parts.values()):
        return None, {}
    steps = set(parts[who])
    for p in parts.values():
        steps &= set(p)
    if not steps:
        return None, {}
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
    best = max(excess, key=lambda k: excess[k])
    return (best if excess[best] > 0 else CAUSE_NONE), excess


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
