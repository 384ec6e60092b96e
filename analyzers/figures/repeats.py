"""Which runs are repeats of one another, and THE pooled value of a group of them.

Runs are repeats only when their whole spec matches: what was trained (framework, model, dataset,
limit, image size, batch, epochs, optimiser), how it was fed (workers, prefetch, pipeline, threads ...),
how it was measured (trace backend, py-spy, nsys sampling, sample rate) and every knob the worker
reported. So a traced run never pools with an untraced one, a `--limit 300` run never with a full one.
`pool` is the one function every table and figure takes its pooled numbers from (median and range of
the per-run steady state, `analyzers.figures.steady.throughput`), so they agree; runs whose speed may not be
ranked (diverged, failed, cut short: `RunRecord.rankable`) stay in the group but out of its median.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from analyzers.figures.steady import WARMUP_EPOCHS, Throughput, throughput
from analyzers.run.run import Run
from tracer.core.records import RunRecord, RunSpec
from tracer.core.workload import BuiltinWorkload, CommandWorkload, ImportedWorkload

# Spec fields that do not change what is measured (limits on how long a run may take, a label):
# runs differing only there are repeats
# (`case` is the study's name of model + dataset, a label: older runs lack it).
NOT_PART_OF_THE_EXPERIMENT = ("timeout_s", "stall_s", "case")
# Spec fields that say how a run was measured, not what it trained, with their unmeasured values
# (analyzers.diagnosis.cost pairs a traced run with the run that differs only there).
UNMEASURED: dict[str, Any] = {"trace": "none", "trace_window": None, "pyspy": False, "nsys_sampling": False}


def spec_key(record: RunRecord) -> dict[str, Any]:
    """What the run was asked to do: a built-in run's spec, else how it was measured and what it ran, without
    NOT_PART_OF_THE_EXPERIMENT (an imported trace keeps its source: nothing says two imports measured the same
    thing; a command is its argv where it ran, and its script's content)."""
    match record.workload:
        case BuiltinWorkload(spec=spec):
            asked = dataclasses.asdict(spec)
        case ImportedWorkload(source=source):
            asked = dataclasses.asdict(record.measurement) | {"imported_from": source}
        case CommandWorkload() as c:
            asked = dataclasses.asdict(record.measurement) | {"command": [*c.argv, c.cwd, c.probe, c.script_digest]}
    return {k: v for k, v in asked.items() if k not in NOT_PART_OF_THE_EXPERIMENT}


def repeat_key(record: RunRecord) -> str:
    """Equal for repeats: the same spec (`spec_key`) and the same settings the worker reported."""
    return json.dumps({"spec": spec_key(record), "knobs": record.knobs}, sort_keys=True, default=str)


def group_repeats(folders: Iterable[Run]) -> list[list[Run]]:
    """Runs grouped by spec, groups in the order their first run was given, runs by id within a group."""
    groups: dict[str, list[Run]] = {}
    for folder in folders:
        groups.setdefault(repeat_key(folder.read_record()), []).append(folder)
    return [sorted(g, key=lambda f: f.run_id) for g in groups.values()]


@dataclass(frozen=True)
class Pool:
    """One group of repeats and its pooled steady state."""

    key: str  # repeat_key of every run in it
    folders: tuple[Run, ...]  # every run of the spec, in the order given
    records: tuple[RunRecord, ...]
    counted: tuple[str, ...]  # run ids whose speed went into the median (rankable runs with epochs)
    left_out: tuple[str, ...]  # 'RUN: why' for the runs kept out of the median
    throughput: Throughput

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(f.run_id for f in self.folders)

    @property
    def spec(self) -> RunSpec | None:
        """The built-in spec its runs share; None for repeats of a command or an import."""
        return self.records[0].spec


def pool(runs: Iterable[tuple[Run, RunRecord]], warmup: int = WARMUP_EPOCHS) -> list[Pool]:
    """The runs grouped into repeats (same `repeat_key`), each group pooled: the median and range over
    its rankable runs of each one's steady state. Groups in the order their first run was given."""
    groups: dict[str, list[tuple[Run, RunRecord]]] = {}
    for folder, record in runs:
        groups.setdefault(repeat_key(record), []).append((folder, record))
    return [_pool(key, members, warmup) for key, members in groups.items()]


def _pool(key: str, members: Sequence[tuple[Run, RunRecord]], warmup: int) -> Pool:
    counted, left_out, epochs = [], [], []
    for folder, record in members:
        if not record.rankable:
            left_out.append(f"{folder.run_id}: {record.not_rankable_why}")
            continue
        mine = folder.epochs()
        if mine:
            counted.append(folder.run_id)
            epochs.append(mine)
    return Pool(
        key=key,
        folders=tuple(f for f, _ in members),
        records=tuple(r for _, r in members),
        counted=tuple(counted),
        left_out=tuple(left_out),
        throughput=throughput(epochs, warmup),
    )
