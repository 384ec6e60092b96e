"""The data model of a run folder, declared in one place.

Every record is a frozen dataclass that turns into plain JSON and back, so a run folder
written on one machine loads on another. Units are in field names (`_s`, `_ns`, `_mib`).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

RUN_FORMAT_VERSION = 1


class RunStatus(str, enum.Enum):
    """How a run ended; `running` is what a folder says while (or if the tracer died while) training."""

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    KILLED = "killed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines what was trained and how it was measured."""

    framework: str
    model: str
    dataset: str  # "small", "big" or a folder path
    device: str = "cpu"  # "cpu" or "gpu"
    batch: int = 1
    epochs: int = 1
    limit: int | None = None
    image_size: int = 224
    num_classes: int = 3
    lr: float = 0.001
    momentum: float = 0.9
    seed: int = 0
    case: str | None = None
    trace: str = "none"
    sample_hz: float = 10.0
    timeout_s: float | None = None
    workers: int | str | None = None  # loader workers for every framework alike; "autotune": tf.data's
    prefetch: int | None = None  # batches ready ahead per loader worker
    pipeline: str = "native"  # "native": the framework's own decode/resize; "shared": the PIL loader
    sync_every: int | None = None  # steps between loss reads (host-device syncs); default 1 on CPU, 20 on GPU
    threads: int | None = None
    amp: bool = False
    gpu_thread_mode: str | None = None
    pyspy: bool = False
    nsys_sampling: bool = False


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


@dataclass(frozen=True)
class Outcome:
    """Why a run ended the way it did."""

    status: RunStatus
    cause: str = ""
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: tuple[str, ...] = ()


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
    format_version: int = RUN_FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return _to_plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        return _from_plain(cls, data)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class EpochRecord:
    """One epoch as the worker reported it (times are Unix-epoch ns on the worker's clock)."""

    epoch: int
    start_ns: int
    end_ns: int
    images: int
    loss: float

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


def _from_plain(cls: Any, data: Any) -> Any:
    """Inverse of `_to_plain` for the record types above; unknown keys are ignored (newer writers)."""
    import typing

    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


def _convert(hint: Any, value: Any) -> Any:
    import types
    import typing

    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(args[0], value) if len(args) == 1 else value
    if origin is tuple:
        (item,) = typing.get_args(hint)[:1]
        return tuple(_convert(item, v) for v in value)
    if dataclasses.is_dataclass(hint):
        return _from_plain(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if origin is not None and origin in (dict, Mapping) or hint is Mapping:
        return dict(value)
    return value
