"""The records of a run folder (`run.json` and the epochs), declared in one place.

Every record is a frozen dataclass (the workload a msgspec tagged union) that turns into plain JSON and
back, so a run folder written on one machine loads on another. Units are in field names (`_s`, `_ns`, `_mib`).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

import msgspec

from tracer.core.options import RunSpec
from tracer.core.record_layout import RUN_FORMAT_VERSION, current_layout
from tracer.core.text import LINE_MAX_CHARS, printable
from tracer.core.workload import BuiltinWorkload, CommandWorkload, ImportedWorkload, Known, Measurement, Workload


class RunStatus(str, enum.Enum):
    """How a run ended; `running` is what a folder says while (or if the tracer died while) training."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    KILLED = "killed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    DIVERGED = "diverged"  # the loss became NaN or infinite (tracer.core.divergence)
    STALLED = "stalled"  # no progress (no event, step or CPU) for --stall-after seconds (tracer.measure.stall)


#: The end states whose speed may be ranked, pooled into medians and compared: the run trained every
#: epoch on finite losses. Every table, figure and finding that ranks speed asks `RunRecord.rankable`.
RANKABLE_STATUSES = frozenset({RunStatus.OK})


@dataclass(frozen=True)
class DatasetInfo:
    path: str
    images: int
    classes: tuple[str, ...]
    images_used: int


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    memory_total_mib: float
    uuid: str = ""


@dataclass(frozen=True)
class EnvironmentInfo:
    """The machine and software a run ran on; filled by the tracer and the worker."""

    hostname: str
    os: str
    cpu_model: str
    cpu_logical_cores: int
    cpu_physical_cores: int
    ram_total_mib: float
    tracer_python: str
    worker_python: str = ""
    worker_python_version: str = ""
    framework_versions: Mapping[str, str] = field(default_factory=dict)
    gpus: tuple[GpuInfo, ...] = ()
    nvidia_driver: str = ""
    cuda_driver_version: str = ""
    nvml: str = "not available"
    # Energy sources sampled in this run (analyzers/figures/energy.py names them the same way), and why each
    # kind missing is missing: "no energy source" is said plainly, never shown as 0 J.
    energy_sources: tuple[str, ...] = ()
    energy_unavailable: tuple[str, ...] = ()
    # NVML readings this run did not get, each with why (`tracer.measure.nvml`: not supported, GPU lost,
    # driver/library missing, ...), recorded once per field and run: "measured none" is not "none".
    nvml_unavailable: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpu_text(self) -> str:
        """'NVIDIA H100 80GB HBM3, driver 580.159.04, CUDA 13.0' (every GPU's name, once each), or ''."""
        names = list(dict.fromkeys(g.name for g in self.gpus))
        if not names:
            return ""
        parts = [" + ".join(names)]
        parts += [f"driver {self.nvidia_driver}"] if self.nvidia_driver else []
        parts += [f"CUDA {self.cuda_driver_version}"] if self.cuda_driver_version else []
        return ", ".join(parts)


@dataclass(frozen=True)
class ModelFacts:
    trainable_params: int
    total_params: int


@dataclass(frozen=True)
class SamplingInfo:
    """What the sampler actually achieved, as opposed to what was asked."""

    requested_hz: float
    achieved_period_ms: float
    samples: int
    max_gap_ms: float
    sampler_cpu_s: float | None = None  # the sampler thread's own CPU clock over the run
    sampler_wall_s: float | None = None


@dataclass(frozen=True)
class MeasurementCost:
    """What measuring the run cost: the sampler thread's CPU clock against the training's CPU time
    (the kernel's rusage of the reaped worker tree, tracers such as nsys included) and the wall time."""

    sampler_cpu_s: float
    training_cpu_s: float
    wall_s: float
    sampler_pct_of_training_cpu: float | None
    sampler_pct_of_wall: float | None


@dataclass(frozen=True)
class Divergence:
    """Where the loss first stopped being a finite number (`diverged` runs)."""

    epoch: int
    step: int | None  # the step whose loss read was non-finite; None: only the epoch's loss was (old folders)
    loss: str  # how it was non-finite: "nan", "inf" or "-inf" (JSON has no such numbers)
    last_finite_loss: float | None
    lr: float | None
    continued: bool = False  # --on-divergence continue: training went on, the speed is still not rankable
    images: int | None = None  # images trained in that epoch when it was seen

    def describe(self) -> str:
        where = f"epoch {self.epoch}" + ("" if self.step is None else f" step {self.step}")
        last = "none" if self.last_finite_loss is None else f"{self.last_finite_loss:.4g}"
        lr = "" if self.lr is None else f", lr {self.lr:g}"
        then = "; training continued (--on-divergence continue)" if self.continued else ""
        return f"loss {self.loss} at {where} (last finite loss {last}{lr}){then}"


@dataclass(frozen=True)
class Outcome:
    """Why a run ended the way it did."""

    status: RunStatus
    cause: str = ""
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: tuple[str, ...] = ()
    divergence: Divergence | None = None


@dataclass(frozen=True)
class RankInfo:
    """One process of a (possibly data-parallel) run. A single-process run is rank 0 of 1: an empty
    `RunRecord.ranks` reads as that, so every folder written before ranks existed still reads."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    host: str = ""
    device: str = ""  # "cpu", "cuda:1", or the GPU's name where a trace names it
    backend: str = ""  # "gloo", "nccl", "jax.distributed", "" when single-process
    pid: int | None = None


SINGLE_RANK = RankInfo()


@dataclass(frozen=True)
class RunRecord:
    """The content of `run.json`: what was run (`workload`) apart from how it was measured (`measurement`,
    the machine, the sampler, the times)."""

    run_id: str
    workload: Workload
    measurement: Measurement
    environment: EnvironmentInfo
    outcome: Outcome
    wall_start_ns: int
    wall_end_ns: int | None = None
    dataset: DatasetInfo | None = None
    model: ModelFacts | None = None
    sampling: SamplingInfo | None = None
    worker_pid: int | None = None
    tracer_pid: int | None = None
    trace_files: tuple[str, ...] = ()
    knobs: Mapping[str, Any] = field(default_factory=dict)
    measurement_cost: MeasurementCost | None = None
    ranks: tuple[RankInfo, ...] = ()  # empty: rank 0 of 1
    format_version: int = RUN_FORMAT_VERSION

    @classmethod
    def built_in(cls, run_id: str, spec: RunSpec, *args: Any, **rest: Any) -> RunRecord:
        """The record of a built-in run: its spec is its workload, and says how it was measured."""
        return cls(run_id, BuiltinWorkload(spec), Measurement.of_spec(spec), *args, **rest)

    def with_spec(self, spec: RunSpec) -> RunRecord:
        """This record as a built-in run of `spec` (a replica or a variant of a run, in the tests and benchmarks)."""
        return dataclasses.replace(self, workload=BuiltinWorkload(spec), measurement=Measurement.of_spec(spec))

    @property
    def spec(self) -> RunSpec | None:
        """The built-in workload's spec; None for a command or an import (their settings are their own)."""
        return self.workload.spec if isinstance(self.workload, BuiltinWorkload) else None

    @property
    def command(self) -> CommandWorkload | None:
        """The user's command (`tracer profile -- COMMAND`), or None."""
        return self.workload if isinstance(self.workload, CommandWorkload) else None

    @property
    def imported(self) -> ImportedWorkload | None:
        """The trace a `tracer import`ed run came from, and what it records; None for a run we measured."""
        return self.workload if isinstance(self.workload, ImportedWorkload) else None

    def setting(self, name: str) -> Any:
        """A run option by its RunSpec name as the run records it, or None where it records none (a command's
        or an import's model, batch, lr ...): shown as "not recorded", never as the option's default."""
        if self.spec is not None:
            return getattr(self.spec, name)
        if name in {f.name for f in dataclasses.fields(Measurement)}:
            return getattr(self.measurement, name)
        return getattr(Known.of(self.workload), name, None) or None

    @property
    def rank_infos(self) -> tuple[RankInfo, ...]:
        """The run's ranks, a single-process run being rank 0 of 1."""
        return self.ranks or (SINGLE_RANK,)

    @property
    def world_size(self) -> int:
        return max((r.world_size for r in self.rank_infos), default=1)

    @property
    def rankable(self) -> bool:
        """Whether this run's speed may be ranked beside others, pooled into a median or compared:
        it ended `ok` (a diverged, failed or cut-short run's epoch times measure something else)."""
        return self.outcome.status in RANKABLE_STATUSES

    @property
    def not_rankable_why(self) -> str:
        """Why `rankable` is False, in a few words for a table note ('' when it is rankable)."""
        if self.rankable:
            return ""
        if self.outcome.divergence is not None:
            return f"diverged: {self.outcome.divergence.describe()}"
        return f"{self.outcome.status.value}: {self.outcome.cause}" if self.outcome.cause else self.outcome.status.value

    def to_json(self) -> dict[str, Any]:
        """run.json's content: plain JSON, the workload tagged with its `kind`."""
        plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        return plain

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record, checked against its declaration (a ValueError names the first field that is wrong)."""
        record = validate_record(data)
        if isinstance(record, str):
            raise ValueError(record)
        return record


@dataclass(frozen=True)
class EpochRecord:
    """One epoch as the worker reported it (times are Unix-epoch ns on the worker's clock)."""

    epoch: int
    start_ns: int
    end_ns: int
    images: int
    loss: float  # NaN or infinite where the worker reported a non-finite loss
    accuracy: float | None = None  # share of correct predictions over the steps whose outputs were read
    device_peak_mib: float | None = None  # the framework's own peak device memory in use so far
    device_peak_source: str = ""  # the call it came from, or "not measured: why"

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def images_per_s(self) -> float:
        return self.images / self.duration_s if self.duration_s > 0 else 0.0


def validate_record(data: Any) -> RunRecord | str:
    """run.json's content (either layout: `tracer.core.record_layout`) as a RunRecord, or the first reason it
    is not one (the field's path and what is wrong). Types are checked against the declaration with msgspec;
    the spec's bounds are not, for they belong to the machine a run is started on (`--workers` up to 4 per
    core there), not to the one that reads it."""
    if not isinstance(data, Mapping):
        return f"it holds a JSON {type(data).__name__}, not an object"
    knobs = data.get("knobs")
    if isinstance(knobs, Mapping) and len(knobs) > MAX_KNOBS:
        return f"knobs: holds {len(knobs):,} entries, more than any run sets ({MAX_KNOBS:,})"
    try:
        record = msgspec.convert(current_layout(data), RunRecord)
    except msgspec.ValidationError as e:
        what, _, where = str(e).partition(" - at `$")
        return f"{where.rstrip('`').lstrip('.') or 'the record'}: {what[0].lower() + what[1:]}"
    spec = record.spec
    for name in AT_LEAST_ONE:
        value = None if spec is None else getattr(spec, name)
        if value is not None and value < 1:
            return f"workload.spec.{name}: {value} is impossible (at least 1 on any machine)"
    outcome = record.outcome
    shown = dataclasses.replace(
        outcome,
        cause=printable(outcome.cause),
        stderr_tail=tuple(printable(line, LINE_MAX_CHARS) for line in outcome.stderr_tail[-MAX_TAIL_LINES:]),
    )
    return dataclasses.replace(record, outcome=shown)


MAX_KNOBS = 1000
"""A run records a few dozen knobs; a record with more is not one the tool wrote (200,000 made `report` crawl)."""
MAX_TAIL_LINES = 200
"""Lines of the worker's output tail a reader gets (the runner keeps far fewer)."""
AT_LEAST_ONE = ("batch", "epochs", "image_size", "limit")
"""Spec fields below 1 on no machine: a record holding one is damaged (other bounds are the starting machine's)."""
