"""The records of a run folder (`run.json` and the epochs), declared in one place.

Every record is a frozen dataclass that turns into plain JSON and back, so a run folder
written on one machine loads on another. Units are in field names (`_s`, `_ns`, `_mib`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping

import pydantic

from tracer.core.options import RunSpec
from tracer.core.text import LINE_MAX_CHARS, printable

RUN_FORMAT_VERSION = 1


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
class ImportOrigin:
    """Where an imported run came from (`tracer import`): kept in the record's knobs under these keys
    (run.json's format is unchanged), read only through `RunRecord.imported`."""

    source: str  # the trace file, resolved
    not_recorded: tuple[str, ...] = ()  # spec fields the trace does not carry ("batch", "epochs")

    SOURCE_KNOB = "imported_from"
    NOT_RECORDED_KNOB = "not_recorded"
    KNOBS = (SOURCE_KNOB, NOT_RECORDED_KNOB)  # bookkeeping, not settings: never part of a run's spec

    def to_knobs(self) -> dict[str, Any]:
        return {self.SOURCE_KNOB: self.source, self.NOT_RECORDED_KNOB: list(self.not_recorded)}

    @classmethod
    def from_knobs(cls, knobs: Mapping[str, Any]) -> ImportOrigin | None:
        source = knobs.get(cls.SOURCE_KNOB)
        if not source:
            return None
        return cls(str(source), tuple(str(f) for f in knobs.get(cls.NOT_RECORDED_KNOB) or ()))


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
class CommandInfo:
    """A user's own training command run by `tracer profile -- COMMAND` (no built-in workload)."""

    argv: tuple[str, ...]
    cwd: str
    interpreter: str = ""  # the Python the command resolved to, when it is one
    frameworks_imported: tuple[str, ...] = ()  # declared framework names the probe saw imported
    probe: str = "on"  # "on" or "off" (--probe off)
    #: sha256 (16 hex digits) of the files the command names (its script, a config): an edited script is
    #: another experiment, never a repeat of its old self ('' in runs before it was recorded).
    script_digest: str = ""

    @property
    def text(self) -> str:
        """The command as a shell would take it (`python train.py --lr 0.1`), as it is shown (no control
        characters: `tracer.core.text.printable_argv`); argv keeps what was typed."""
        import shlex

        from tracer.core.text import printable_argv

        return shlex.join(printable_argv(self.argv))

    @property
    def name(self) -> str:
        """Its script's file name (`train.py` for `torchrun --nproc-per-node 2 train.py`), else its program's."""
        import os

        scripts = [a for a in self.argv if a.endswith((".py", ".sh"))]
        from tracer.core.text import printable_argv

        shown = printable_argv(self.argv)
        if "-m" in self.argv[:-1]:
            return shown[self.argv.index("-m") + 1]
        return os.path.basename(shown[self.argv.index(scripts[-1])] if scripts else shown[0]) if self.argv else "?"

    @property
    def label(self) -> str:
        """Its name and the arguments given after its script (`train.py --lr 0.1`): runs that differ only
        by an argument are told apart in `runs`, `show` and the viewer's legend. Shortened past 60 characters."""
        import shlex

        argv = list(self.argv)
        if "-m" in argv[:-1]:
            after = argv[argv.index("-m") + 2 :]
        else:
            scripts = [i for i, a in enumerate(argv) if a.endswith((".py", ".sh"))]
            after = argv[scripts[-1] + 1 :] if scripts else argv[1:]
        from tracer.core.text import printable_argv

        text = " ".join([self.name, *(shlex.quote(a) for a in printable_argv(after))])
        return text if len(text) <= 60 else text[:28] + " ... " + text[-27:]


@dataclass(frozen=True)
class BuiltinWorkload:
    """What was run: one of the built-in models and datasets, as the spec says."""

    spec: RunSpec


@dataclass(frozen=True)
class CommandWorkload:
    """What was run: a user's command; model, dataset and batch are the script's, not ours."""

    command: CommandInfo


@dataclass(frozen=True)
class ImportedWorkload:
    """What was run: unknown beyond what an imported trace records."""

    origin: ImportOrigin


Workload = BuiltinWorkload | CommandWorkload | ImportedWorkload
"""What a run ran: the one typed union every consumer switches on (never a made-up "batch 1")."""


@dataclass(frozen=True)
class RunRecord:
    """The content of `run.json`."""

    run_id: str
    spec: RunSpec
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
    command: CommandInfo | None = None  # set for `tracer profile -- COMMAND`
    ranks: tuple[RankInfo, ...] = ()  # empty: rank 0 of 1
    format_version: int = RUN_FORMAT_VERSION

    @property
    def workload(self) -> Workload:
        """What was run: the built-in workload, a user's command, or an imported trace."""
        if self.command is not None:
            return CommandWorkload(self.command)
        origin = self.imported
        if origin is not None:
            return ImportedWorkload(origin)
        return BuiltinWorkload(self.spec)

    @property
    def rank_infos(self) -> tuple[RankInfo, ...]:
        """The run's ranks, a single-process run being rank 0 of 1."""
        return self.ranks or (SINGLE_RANK,)

    @property
    def world_size(self) -> int:
        return max((r.world_size for r in self.rank_infos), default=1)

    @property
    def imported(self) -> ImportOrigin | None:
        """The trace file a `tracer import`ed run came from, and what it does not record; None for a run
        made by `tracer profile`."""
        return ImportOrigin.from_knobs(self.knobs)

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
        return _to_plain(self)  # type: ignore[no-any-return]

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


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    return value


def validate_record(data: Any) -> RunRecord | str:
    """run.json's content as a RunRecord, or the first reason it is not one (the field's path, what it
    holds and what it should). Types are checked against the declaration with pydantic; the spec's
    bounds are not, for they belong to the machine a run is started on (`--workers` up to 4 per core
    there), not to the one that reads it."""
    if not isinstance(data, Mapping):
        return f"it holds a JSON {type(data).__name__}, not an object"
    knobs = data.get("knobs")
    if isinstance(knobs, Mapping) and len(knobs) > MAX_KNOBS:
        return f"knobs: holds {len(knobs):,} entries, more than any run sets ({MAX_KNOBS:,})"
    try:
        loose = _reading_adapter().validate_python(dict(data))
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the record"
        value = repr(first.get("input"))
        value = value if len(value) <= 40 else value[:37] + "..."
        return f"{where}: {first.get('msg', 'is not valid')} (holds {value})"
    spec = RunSpec(**{f.name: getattr(loose.spec, f.name) for f in dataclasses.fields(RunSpec)})
    for name in AT_LEAST_ONE:
        value = getattr(spec, name)
        if value is not None and value < 1:
            return f"spec.{name}: {value} is impossible (at least 1 on any machine)"
    record = dataclasses.replace(_from_loose(loose), spec=spec)
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


def _unbounded(hint: Any) -> Any:
    """A type hint with its Annotated metadata (bounds, Opt) removed, recursively through unions."""
    if typing.get_origin(hint) is Annotated:
        return _unbounded(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return functools.reduce(lambda a, b: a | b, (_unbounded(a) for a in typing.get_args(hint)))
    return hint


IMPORTED_LABELS = ("framework", "model")
"""Spec fields that an imported trace (`tracer import --framework/--model`) holds as the user's words
(`imported`, `unknown`, a model we do not train): read as any string."""


@functools.cache
def _reading_adapter() -> pydantic.TypeAdapter[Any]:
    """A RunRecord whose spec has RunSpec's field types without their bounds (built once: a second)."""
    spec_hints = typing.get_type_hints(RunSpec, include_extras=True)
    loose_spec = dataclasses.make_dataclass(
        "RecordedSpec",
        [
            (f.name, str if f.name in IMPORTED_LABELS else _unbounded(spec_hints[f.name]), _default_of(f))
            for f in dataclasses.fields(RunSpec)
        ],
        frozen=True,
    )
    hints = typing.get_type_hints(RunRecord)
    loose_record = dataclasses.make_dataclass(
        "RecordedRun",
        [
            (f.name, loose_spec if f.name == "spec" else hints[f.name], _default_of(f))
            for f in dataclasses.fields(RunRecord)
        ],
        frozen=True,
    )
    return pydantic.TypeAdapter(loose_record)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return field(default=f.default)
    if f.default_factory is not dataclasses.MISSING:
        return field(default_factory=f.default_factory)
    return field()


def _from_loose(loose: Any) -> RunRecord:
    values = {f.name: getattr(loose, f.name) for f in dataclasses.fields(RunRecord)}
    return RunRecord(**values)
