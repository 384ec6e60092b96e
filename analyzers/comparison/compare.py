"""Any number of runs or groups of repeats side by side: every headline number, with each column's ratio
to the first (the baseline), and the CUDA API functions whose time changed most. Pure: `compare`
computes; the CLI prints and writes its CSV through `compare_output`.

A column is a group of repeats (runs of one spec, analyzers.figures.repeats): its value is the median of its
runs, with their range; a single run is a group of one.
"""

from __future__ import annotations

import dataclasses
import math
import string
from dataclasses import dataclass
from typing import Iterable, Sequence

from analyzers.comparison.pairs import DataPair, data_pairs
from analyzers.figures.basis import FIGURE_BY_NAME, FIGURES, WHOLE_RUN
from analyzers.figures.learning import CurveGap, curve_gaps, same_workload
from analyzers.figures.noise import MIN_DIFFERENCE, disagree, why_not_ordered
from analyzers.figures.run_summary import RunSummary, summarise
from analyzers.figures.steady import WARMUP_EPOCHS, Spread, spread
from analyzers.run.run import Run
from analyzers.summaries.rows import ApiRow
from analyzers.trace import api_names
from tracer.core.errors import UserError

STEADY_MARK, WHOLE_MARK = "(steady)", f"({WHOLE_RUN})"


def _metrics() -> tuple[tuple[str, str, str], ...]:
    """(metric, RunSummary attribute path, unit), in the order printed: every figure of analyzers.figures.basis
    over the steady state first (the headline), then the same figures over the whole run, named so."""
    steady = [(f"{f.label} {STEADY_MARK}", f"steady.{f.name}", f.unit) for f in FIGURES if "energy" not in f.name]
    whole = [(f"{f.label} {WHOLE_MARK}", f"whole.{f.name}", f.unit) for f in FIGURES if "energy" not in f.name]
    return (
        *steady,
        ("step time (steady, mean per step)", "steady_step_ms", "ms"),
        ("data wait (steady, mean per step)", "steady_wait_ms", "ms"),
        ("MFU (steady, % of the device's peak)", "utilisation.mfu_pct", "%"),
        ("first epoch", "first_epoch_s", "s"),
        ("decode into memory, before the epochs (--data memory)", "decode_s", "s"),
        (f"other processes' CPU % (median) {WHOLE_MARK}", "other_cpu_pct", "%"),
        *whole,
    )


# (metric, RunSummary attribute path, unit): the order is the order printed; the steady state leads.
METRICS: tuple[tuple[str, str, str], ...] = _metrics()
METRIC_FIELDS = {metric: name for metric, name, _ in METRICS}
# Speed metrics: a group's median of them leaves out runs whose speed may not be ranked (diverged, failed).
SPEED_FIELDS = frozenset(
    {"steady.images_per_s", "steady.epoch_s", "first_epoch_s", "whole.images_per_s", "whole.epoch_s", "steady_step_ms"}
)
# The steady speeds runs are ranked by: where a column's repeats disagree on one, compare says so.
SPEED_METRICS = frozenset(m for m, name, _ in METRICS if name in ("steady.images_per_s", "steady.epoch_s"))
TOP_CUDA = 5
NAMED_CALLS = 12  # calls one tracer alone recorded, named in a note before 'and N more'
MAX_COLUMNS = len(string.ascii_lowercase)


@dataclass(frozen=True)
class Column:
    """One group of repeats (one run or several of one spec)."""

    letter: str  # "A", "B", ... as printed and in the CSV's column names
    summaries: tuple[RunSummary, ...]

    @property
    def head(self) -> RunSummary:
        return self.summaries[0]

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(s.run_id for s in self.summaries)

    @property
    def contended(self) -> int:
        return sum(s.contended for s in self.summaries)

    @property
    def ranked(self) -> tuple[RunSummary, ...]:
        """The runs whose speed goes into the column's median: the rankable ones, or all of them when
        none is (a column of one diverged run still shows its own numbers; its header says not ranked)."""
        return tuple(s for s in self.summaries if s.rankable) or self.summaries

    @property
    def left_out(self) -> tuple[RunSummary, ...]:
        """Runs kept out of the speed medians (diverged, failed) beside rankable repeats."""
        ranked = self.ranked
        return tuple(s for s in self.summaries if s not in ranked)


@dataclass(frozen=True)
class Difference:
    metric: str
    unit: str
    values: tuple[Spread | None, ...]  # one per column
    # Per column, why its ratio to A is not a finding (analyzers.figures.noise.why_not_ordered); '' where it is.
    noise: tuple[str, ...] = ()

    def within_noise(self, column: int) -> str:
        return self.noise[column] if column < len(self.noise) else ""

    @property
    def a(self) -> float | None:
        return median_of(self.values[0])

    @property
    def b(self) -> float | None:
        return median_of(self.values[1]) if len(self.values) > 1 else None

    def ratio(self, column: int) -> float | None:
        """Column / the first column; None where either is missing or the first is zero."""
        base, value = median_of(self.values[0]), median_of(self.values[column])
        if base is None or value is None or base == 0:
            return None
        return value / base


@dataclass(frozen=True)
class Comparison:
    columns: tuple[Column, ...]
    differences: tuple[Difference, ...]
    # Columns that train the same workload as A but learn differently: (letter, where the curves part).
    learning_gaps: tuple[tuple[str, tuple[CurveGap, ...]], ...] = ()
    # Runs among the columns that differ only in --data (analyzers.comparison.pairs): the input pipeline's share.
    pairs: tuple[DataPair, ...] = ()
    # What the API rows leave out: calls only some runs' tracers record (`cuda_differences`).
    api_notes: tuple[str, ...] = ()

    def disagreements(self) -> list[tuple[str, str, Spread]]:
        """(column letter, metric, its spread) where a column's repeats disagree on a steady speed
        (analyzers.figures.noise.disagree): no ratio against that column is a finding."""
        out = []
        for d in self.differences:
            if d.metric in SPEED_METRICS:
                out += [(c.letter, d.metric, v) for c, v in zip(self.columns, d.values) if v and disagree(v)]
        return out


def compare(groups: Sequence[Sequence[Run]], top_cuda: int = TOP_CUDA, warmup: int = WARMUP_EPOCHS) -> Comparison:
    if len(groups) < 2:
        raise UserError("compare needs two runs or groups at least (runs of one spec are one group)")
    if len(groups) > MAX_COLUMNS:
        raise UserError(f"compare shows {MAX_COLUMNS} runs or groups at most; give fewer")
    columns = tuple(
        Column(string.ascii_uppercase[i], tuple(summarise(Run.open(f, warmup)) for f in group))
        for i, group in enumerate(groups)
    )
    diffs = [
        Difference(
            metric,
            unit,
            tuple(
                spread([_num(attribute(s, name)) for s in (c.ranked if name in SPEED_FIELDS else c.summaries)])
                for c in columns
            ),
        )
        for metric, name, unit in METRICS
    ]
    energy = energy_differences(columns)
    last_steady = max(i for i, d in enumerate(diffs) if d.metric.endswith(STEADY_MARK))
    diffs[last_steady + 1 : last_steady + 1] = [d for d in energy if d.metric.endswith(STEADY_MARK)]
    diffs += [d for d in energy if d.metric.endswith(WHOLE_MARK)]
    learning = learning_differences(columns)
    diffs += [d for pair in learning for d in pair]
    api_rows, api_notes = cuda_differences([group[0] for group in groups], top_cuda)
    diffs += api_rows
    diffs += class_differences([group[0] for group in groups])
    pairs = tuple(data_pairs([f for group in groups for f in group], warmup))
    contended = [c.contended > 0 for c in columns]
    diffs = [_with_noise(d, contended) for d in diffs]
    return Comparison(columns, tuple(diffs), learning_gaps(columns, learning), pairs, tuple(api_notes))


def _with_noise(d: Difference, contended: Sequence[bool]) -> Difference:
    """The difference with each column's reason its ratio to A is within noise (analyzers.figures.noise)."""
    figure = FIGURE_BY_NAME.get(METRIC_FIELDS.get(d.metric, "").split(".")[-1])
    timed = figure.timed if figure is not None else not d.metric.startswith(("training ", "GPU memory"))
    floor = MIN_DIFFERENCE if d.metric in SPEED_METRICS else 0.0
    noise = ("",) + tuple(
        why_not_ordered(d.values[0], d.values[i], (contended[0], contended[i]), timed, floor)
        for i in range(1, len(d.values))
    )
    return dataclasses.replace(d, noise=noise)


def learning_differences(columns: Sequence[Column]) -> list[tuple[Difference, Difference]]:
    """Per epoch, the training loss and accuracy of every column side by side (median and range over
    its repeats; a diverged epoch's NaN loss is left out of the median)."""
    epochs = max((len(s.loss_by_epoch) for c in columns for s in c.summaries), default=0)
    out = []
    for i in range(epochs):
        loss = tuple(spread([_finite(s.loss_by_epoch, i) for s in c.summaries]) for c in columns)
        accuracy = tuple(spread([_pct(s.accuracy_by_epoch, i) for s in c.summaries]) for c in columns)
        out.append(
            (
                Difference(f"training loss, epoch {i + 1}", "", loss),
                Difference(f"training accuracy, epoch {i + 1}", "%", accuracy),
            )
        )
    return out


def learning_gaps(
    columns: Sequence[Column], learning: Sequence[tuple[Difference, Difference]]
) -> tuple[tuple[str, tuple[CurveGap, ...]], ...]:
    """Columns whose workload is A's (same_workload) but whose loss or accuracy curve parts from A's
    by more than their repeats' spread."""
    out = []
    for index, column in enumerate(columns[1:], start=1):
        if not same_workload(columns[0].head.workload, column.head.workload):
            continue
        gaps = curve_gaps("loss", [d[0].values[0] for d in learning], [d[0].values[index] for d in learning])
        gaps += curve_gaps("accuracy (%)", [d[1].values[0] for d in learning], [d[1].values[index] for d in learning])
        if gaps:
            out.append((column.letter, tuple(gaps)))
    return tuple(out)


def _finite(values: tuple[float, ...], i: int) -> float | None:
    return values[i] if i < len(values) and math.isfinite(values[i]) else None


def _pct(values: tuple[float | None, ...], i: int) -> float | None:
    value = values[i] if i < len(values) else None
    return None if value is None else 100 * value


def energy_differences(columns: Sequence[Column]) -> list[Difference]:
    """Joules per epoch and per image of every energy source any run had, named by source, over the
    steady epochs and then over every epoch (named whole run); a column whose runs lacked a source shows
    it as missing. Empty: no run had a source."""
    sources: list[str] = []
    for c in columns:
        sources += [e.source for s in c.summaries for e in s.energy if e.source not in sources]
    out = []
    for phase, mark in (("steady", STEADY_MARK), ("whole", WHOLE_MARK)):
        for source in sources:
            for label, field in (("epoch", "j_per_epoch"), ("image", "j_per_image")):
                values = tuple(
                    spread(
                        [getattr(e, field) for s in c.summaries for e in getattr(s, phase).energy if e.source == source]
                    )
                    for c in columns
                )
                out.append(Difference(f"energy per {label}, {source} {mark}", "J", values))
    return out


def attribute(summary: RunSummary, path: str) -> object:
    """`summary.steady.cpu_pct_mean` for 'steady.cpu_pct_mean'."""
    value: object = summary
    for part in path.split("."):
        value = getattr(value, part)
    return value


def cuda_differences(folders: Sequence[Run], top: int = TOP_CUDA) -> tuple[list[Difference], list[str]]:
    """Total API time, then the `top` functions whose total time differs most from the first run's (in
    ms), over the whole run; empty unless every run has an API trace. Runs traced by different tracers
    are compared over the calls every one of them recorded (a call one tracer does not record is not
    a call that took no time); the notes name what was left out, and by which tracer."""
    totals = [_api_totals_ns(f) for f in folders]
    if any(t is None for t in totals):
        return [], []
    ts: list[dict[str, int]] = [t for t in totals if t is not None]

    def ms(values: list[float]) -> tuple[Spread | None, ...]:
        return tuple(spread([v / 1e6]) for v in values)

    from analyzers.summaries.cuda_api import api_family, api_tracer

    family = "/".join(dict.fromkeys(api_family(f) for f in folders))  # "CUDA", "HIP", or both when mixed
    tracers = [api_tracer(f) for f in folders]
    notes: list[str] = []
    total_label = f"{family} API total time {WHOLE_MARK}"
    if len(set(tracers)) > 1:
        common = set.intersection(*(set(t) for t in ts))
        for tracer in dict.fromkeys(tracers):
            own = sorted(
                set().union(*(t for t, by in zip(ts, tracers) if by == tracer)) - common,
                key=lambda n: (-max(t.get(n, 0) for t in ts), n),
            )  # the costliest first
            if own:
                shown = ", ".join(own[:NAMED_CALLS]) + (
                    f" and {len(own) - NAMED_CALLS} more" if len(own) > NAMED_CALLS else ""
                )
                notes.append(
                    f"{family} calls only {tracer} recorded, left out of the API rows (the runs were traced by "
                    f"{', '.join(dict.fromkeys(tracers))}): {shown}"
                )
        ts = [{name: ns for name, ns in t.items() if name in common} for t in ts]
        total_label = f"{family} API total time, calls every tracer recorded {WHOLE_MARK}"
    out = [Difference(total_label, "ms", ms([sum(t.values()) for t in ts]))]
    names = sorted(set().union(*ts), key=lambda n: (-max(abs(t.get(n, 0) - ts[0].get(n, 0)) for t in ts[1:]), n))
    for name in names[:top]:
        out.append(Difference(f"{family} {name} time {WHOLE_MARK}", "ms", ms([t.get(name, 0) for t in ts])))
    return out, notes


def class_differences(folders: Sequence[Run]) -> list[Difference]:
    """GPU kernel time by class (analyzers.trace.kernel_classes) over the whole run, in ms, every class some
    run has, then the share left in `other`; empty unless every run has a kernels table."""
    from analyzers.summaries.kernels import kernel_summary
    from analyzers.summaries.rows import class_summary
    from analyzers.trace import tables as trace_tables
    from analyzers.trace.kernel_classes import CLASSES, OTHER

    if not all(trace_tables.present(f, trace_tables.KERNELS) for f in folders):
        return []
    by_run = [{r.kernel_class: r.total_ns for r in class_summary(kernel_summary(f))} for f in folders]
    out = []
    for c in CLASSES:
        if any(c.key in run for run in by_run):
            values = tuple(spread([run.get(c.key, 0) / 1e6]) for run in by_run)
            out.append(Difference(f"GPU kernel time, {c.label} (whole run)", "ms", values))
    shares = tuple(spread([100 * run.get(OTHER, 0) / sum(run.values()) if run else None]) for run in by_run)
    out.append(Difference("kernel time left in class 'other' (whole run)", "%", shares))
    return out


api_match_name = api_names.match_name  # the name two traces' calls are matched on (analyzers.trace.api_names)


def _api_totals_ns(folder: Run) -> dict[str, int] | None:
    from analyzers.trace import tables as trace_tables

    if not trace_tables.present(folder, trace_tables.CUDA_API):
        return None
    from analyzers.summaries.cuda_api import api_summary

    return matched_totals_ns(api_summary(folder))


def matched_totals_ns(rows: Iterable[ApiRow]) -> dict[str, int]:
    """Total ns per call, keyed by the name two traces' calls are matched on (`api_match_name`)."""
    totals: dict[str, int] = {}
    for row in rows:
        key = api_match_name(row.name)
        totals[key] = totals.get(key, 0) + int(row.total_ns)
    return totals


def _num(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def median_of(value: Spread | None) -> float | None:
    return None if value is None else value.median
