"""Qt-free data sources of the viewer: one run folder loaded into numpy arrays, ready to plot.

`load_run` never raises for a damaged, failed or half-written folder: what it could not read becomes a
line in `RunData.messages`, and the panels show what is there. Every analysis rule (thread activity,
OS-runtime call kinds, the CUDA API split and its "other" group) is the analyzers' (`analyzers.threads`,
`analyzers.cuda_api`, `analyzers.kernels`); this module only reads their results into arrays.
Times stay Unix-epoch ns (`*_ns`) until a panel asks for seconds
from an anchor (`RunData.anchor_ns`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.correlation import GPU_TABLES, launch_links
from analyzers.gpu_timeline import GPU_ACTIVITIES, NVTX_ACTIVITIES, gpu_activity, nvtx_depth, stream_label
from analyzers.run_summary import displayed_status, images_per_s, mean_epoch_s
from analyzers.shares import OTHER, OTHER_THRESHOLD_PCT, group_shares, other_label
from analyzers.steps import data_wait_shares
from analyzers.tables import CUDA_API, KERNELS, NVTX
from analyzers.threads import ACTIVITY_LEVELS, activity_kind, activity_levels, thread_timeline
from tracer.core import schema
from tracer.core import trace_formats as tf
from tracer.core.cases import UNKNOWN_MODEL
from tracer.core.errors import UserError
from tracer.core.records import EpochRecord, RunRecord, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE
from viewer.pyramid import Envelope, LaneIndex

Progress = Callable[[float, str], None]

NO_TRACE = "no trace in this run"


@dataclass(frozen=True)
class Metric:
    """One time panel: which sample table and column feed it, and how to label it."""

    key: str
    title: str
    unit: str
    table: str
    columns: tuple[str, ...]  # the first present one is used


METRICS: tuple[Metric, ...] = (
    Metric(schema.CPU_PCT, "CPU (100 % = all cores)", "%", "process", (schema.CPU_PCT,)),
    Metric(schema.RSS_MIB, "Resident memory (RSS)", "MiB", "process", (schema.RSS_MIB,)),
    Metric("threads", "Threads", "count", "process", ("threads",)),
    Metric("gpu_util_pct", "GPU utilisation", "%", "gpu", (schema.UTIL_PCT, "gpu_util_pct")),
    Metric("gpu_mem_mib", "GPU memory", "MiB", "gpu", (schema.PROC_MEM_MIB, schema.MEM_USED_MIB)),
    Metric("gpu_power_w", "GPU power", "W", "gpu", (schema.POWER_W,)),
    # The per-step split (one point per step, at the step's start): analyzers.steps sums it per epoch.
    Metric("step_data_wait_s", "Step: waiting for data", "s", STEPS_TABLE, (schema.DATA_WAIT_S,)),
    Metric("step_compute_s", "Step: compute", "s", STEPS_TABLE, (schema.COMPUTE_S,)),
    Metric("step_sync_s", "Step: loss sync", "s", STEPS_TABLE, (schema.SYNC_S,)),
)
STEP_TIME_COLUMN = "start_ns"
METRIC_BY_KEY = {m.key: m for m in METRICS}


@dataclass(frozen=True)
class Series:
    """One curve: sample times (Unix ns) and values; `label` tells several GPUs of one run apart."""

    metric: str
    t_ns: np.ndarray
    y: np.ndarray
    label: str = ""

    def __len__(self) -> int:
        return int(self.t_ns.shape[0])

    @cached_property
    def envelope(self) -> Envelope:
        """Zoom levels for drawing, x in seconds since the first sample (`t_ns[0]`)."""
        origin = self.t_ns[0] if len(self) else 0
        return Envelope((self.t_ns - origin) * 1e-9, self.y)

    def value_at(self, t_ns: float) -> float | None:
        """The last sample at or before `t_ns` (what the sampler knew then), None outside the run."""
        if len(self) == 0 or t_ns < self.t_ns[0] or t_ns > self.t_ns[-1]:
            return None
        # an int64 key: a float one would convert the whole array to float64 on every call; then the
        # comparison in float (what the caller's time means at ~256 ns resolution) settles a tie
        i = int(np.searchsorted(self.t_ns, np.int64(math.floor(t_ns)), side="right")) - 1
        while i + 1 < len(self) and float(self.t_ns[i + 1]) <= t_ns:
            i += 1
        return float(self.y[max(i, 0)])


LOW_PRIORITY = ("idle", "sleeping", "waiting")

# What a lane shows is decided by analyzers.threads (one rule for `analyze` and the viewer).
lane_activity = activity_kind


def activity_priority(activity: str) -> tuple[int, str]:
    """Order in which activities win a pixel of a thread lane: idle ones lose, `busy` wins."""
    return (0 if activity in LOW_PRIORITY else 2 if activity == "busy" else 1, activity)


@dataclass(frozen=True)
class ThreadLanes:
    """Thread activity as segments, one lane per (pid, tid); `source` says where it came from."""

    lane_names: list[str]
    lane: np.ndarray  # lane index of each segment
    start_ns: np.ndarray
    end_ns: np.ndarray
    code: np.ndarray  # each segment's activity, an index into `names`
    names: tuple[str, ...]
    source: str
    lane_tids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # each lane's thread id

    @property
    def activity(self) -> np.ndarray:
        """Each segment's activity name (object array)."""
        return np.asarray(self.names, dtype=object)[self.code] if self.names else np.zeros(0, dtype=object)

    @cached_property
    def activities(self) -> list[str]:
        """The activities present, lowest priority first."""
        used: list[int] = np.unique(self.code).tolist() if len(self.code) else []
        return sorted((self.names[int(i)] for i in used), key=activity_priority)

    @property
    def origin_ns(self) -> int:
        return int(self.start_ns.min()) if len(self.start_ns) else 0

    @cached_property
    def index(self) -> LaneIndex:
        """For drawing: x in seconds since `origin_ns`, level = position in `activities`."""
        remap = np.zeros(max(len(self.names), 1), dtype=np.int64)
        for level, name in enumerate(self.activities):
            remap[self.names.index(name)] = level
        origin = self.origin_ns
        return LaneIndex(
            (self.start_ns - origin) * 1e-9,
            (self.end_ns - origin) * 1e-9,
            self.lane,
            remap[self.code],
            len(self.lane_names),
            len(self.activities),
        )


def _seconds_index(
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    origin_ns: int,
    lane: np.ndarray,
    level: np.ndarray,
    *sizes: int,
    **kw: int,
) -> LaneIndex:
    """A LaneIndex over intervals given in ns, with x in seconds since `origin_ns`."""
    return LaneIndex((start_ns - origin_ns) * 1e-9, (end_ns - origin_ns) * 1e-9, lane, level, *sizes, **kw)


@dataclass(frozen=True)
class ApiCalls:
    """Individual CUDA API calls, for the thread lanes when zoomed in."""

    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    lanes: int  # lanes of the run's ThreadLanes
    row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # each call's cuda_api row

    @property
    def origin_ns(self) -> int:
        return int(self.start_ns[0]) if len(self.start_ns) else 0

    @cached_property
    def index(self) -> LaneIndex:
        """For drawing: x in seconds since `origin_ns`, one level."""
        level = np.zeros(len(self.lane), dtype=np.int64)
        return _seconds_index(self.start_ns, self.end_ns, self.origin_ns, self.lane, level, self.lanes, 1, fine_bins=0)


@dataclass(frozen=True)
class GpuLanes:
    """GPU operations, one lane per (device, stream), then NVTX ranges, one lane per nesting depth
    (`analyzers.gpu_timeline`); items sorted by lane, then start, so an index's row is an item here."""

    lane_names: list[str]
    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    code: np.ndarray  # each item's activity, an index into `names`
    names: tuple[str, ...]  # lowest priority first
    label_code: np.ndarray  # each item's name (kernel, copy kind, NVTX range) as an index into `labels`
    labels: list[str]
    nvtx_lanes: int  # the last lanes are NVTX rows

    @property
    def origin_ns(self) -> int:
        return int(self.start_ns.min()) if len(self.start_ns) else 0

    @property
    def activities(self) -> list[str]:
        used = set(np.unique(self.code).tolist())
        return [n for i, n in enumerate(self.names) if i in used]

    def label(self, item: int) -> str:
        return self.labels[int(self.label_code[item])]

    @cached_property
    def index(self) -> LaneIndex:
        """For drawing and hovering: x in seconds since `origin_ns`, level = activity."""
        lanes, levels = len(self.lane_names), len(self.names)
        return _seconds_index(self.start_ns, self.end_ns, self.origin_ns, self.lane, self.code, lanes, levels)


@dataclass(frozen=True)
class LaunchLinks:
    """Launch-to-GPU links (`analyzers.correlation`) as indices: -1 where an item has no peer loaded."""

    call_of_item: np.ndarray  # per GpuLanes item: its launch in ApiCalls
    item_of_call: np.ndarray  # per ApiCalls call: the GPU item it launched


@dataclass(frozen=True)
class ApiShare:
    name: str
    time_pct: float
    total_ns: int
    calls: int


@dataclass
class RunData:
    """Everything the viewer shows of one run; loaded off the GUI thread."""

    path: Path
    record: RunRecord | None = None
    epochs: list[EpochRecord] = field(default_factory=list)
    data_wait_by_epoch: dict[int, float | None] = field(default_factory=dict)  # share 0..1 (analyzers.steps)
    series: dict[str, list[Series]] = field(default_factory=dict)
    threads: ThreadLanes | None = None
    api_calls: ApiCalls | None = None
    gpu: GpuLanes | None = None
    links: LaunchLinks | None = None
    cuda_phases: dict[str, list[ApiShare]] = field(default_factory=dict)
    kernels: list[dict[str, Any]] = field(default_factory=list)
    api_label: str = "CUDA API"  # "HIP API" for a ROCm trace (analyzers.cuda_api.api_family)
    trace_note: str = NO_TRACE
    messages: list[str] = field(default_factory=list)
    name: str = ""  # set by the viewer where two runs would otherwise share a label

    @property
    def run_id(self) -> str:
        return self.record.run_id if self.record else self.path.name

    @property
    def label(self) -> str:
        """Short legend text: framework and model, which is what a comparison tells apart."""
        return self.name or self.default_label

    @property
    def default_label(self) -> str:
        if self.record is None:
            return self.path.name
        s = self.record.spec
        status = "" if self.record.outcome.status is RunStatus.OK else f" [{self.status}]"
        knobs = self.record.knobs
        source = knobs.get("imported_from")
        if source:  # an import: its batch is not recorded, and the file says what it is better than "unknown"
            model = Path(str(source)).name.split(".")[0] if s.model == UNKNOWN_MODEL else s.model
            batch = "" if "batch" in (knobs.get("not_recorded") or ()) else f" b{s.batch}"
            return f"{s.framework} {model}{batch} {s.device} (imported){status}"
        return f"{s.framework} {s.model} b{s.batch} {s.device}{status}"

    @property
    def status(self) -> str:
        return displayed_status(self.record) if self.record else "unreadable"  # "abandoned", not "running"

    @property
    def start_ns(self) -> int:
        """Run start: the tracer's wall start, else the first sample or epoch."""
        if self.record is not None:
            return self.record.wall_start_ns
        firsts = [int(s.t_ns[0]) for ss in self.series.values() for s in ss if len(s)]
        if self.epochs:
            firsts.append(self.epochs[0].start_ns)
        return min(firsts) if firsts else 0

    def anchor_ns(self, align: str) -> int:
        """Time zero of the x axis: `start` (run start) or `epoch` (first epoch start, where there is one)."""
        if align == "epoch" and self.epochs:
            return self.epochs[0].start_ns
        return self.start_ns

    @property
    def sample_count(self) -> int:
        ss = self.series.get(schema.CPU_PCT) or []
        return len(ss[0]) if ss else 0

    @property
    def ram_total_mib(self) -> float | None:
        return self.record.environment.ram_total_mib if self.record else None

    @property
    def mean_epoch_s(self) -> float | None:
        return mean_epoch_s(self.epochs)

    @property
    def images_per_s(self) -> float | None:
        return images_per_s(self.epochs)

    def facts(self) -> list[tuple[str, str]]:
        """`run.json` facts for the facts table, in reading order."""
        r = self.record
        if r is None:
            return [("status", "unreadable"), ("folder", str(self.path))]
        env, spec, out = r.environment, r.spec, r.outcome
        versions = ", ".join(f"{k} {v}" for k, v in env.framework_versions.items()) or "-"
        gpus = ", ".join(g.name for g in env.gpus) or "none"
        status = out.status.value + (f": {out.cause}" if out.cause else "")
        if out.exit_code not in (None, 0):
            status += f" (exit {out.exit_code})"
        if out.signal:
            status += f" (signal {out.signal})"
        duration = f"{(r.wall_end_ns - r.wall_start_ns) / 1e9:.1f} s" if r.wall_end_ns else "-"
        return [
            ("status", status),
            ("framework", f"{spec.framework} ({versions})"),
            ("model", spec.model),
            ("parameters", f"{r.model.trainable_params:,}" if r.model else "-"),
            ("dataset", f"{spec.dataset}, {r.dataset.images_used if r.dataset else '?'} images"),
            ("device", f"{spec.device}; GPU: {gpus}"),
            ("batch / epochs", f"{spec.batch} / {len(self.epochs)} of {spec.epochs}"),
            ("mean epoch", _fmt(self.mean_epoch_s, ".2f", " s")),
            ("images/s", _fmt(self.images_per_s, ".1f")),
            ("CPU", f"{env.cpu_model}, {env.cpu_logical_cores} logical cores"),
            ("RAM", f"{env.ram_total_mib / 1024:.1f} GiB"),
            ("Python", env.worker_python_version or env.tracer_python),
            ("samples", f"{self.sample_count:,}"),
            ("trace", self.trace_note if not self.cuda_phases else spec.trace),
            ("duration", duration),
            ("folder", str(self.path)),
        ]


def name_runs(runs: Sequence[RunData]) -> None:
    """Gives runs that would share a label the end of their run id, so legends tell them apart."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.default_label] = counts.get(run.default_label, 0) + 1
    for run in runs:
        duplicate = counts[run.default_label] > 1
        run.name = f"{run.default_label} #{run.run_id[-4:]}" if duplicate else ""


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else format(value, spec) + unit


def load_run(path: Path | str, progress: Progress | None = None) -> RunData:
    """Loads one run folder; every problem is a message, never an exception."""
    report = progress or (lambda fraction, text: None)
    folder = RunFolder(Path(path))
    data = RunData(path=folder.path)
    if not folder.path.is_dir():
        data.messages.append(f"{folder.path} does not exist")
        return data
    report(0.05, "run.json")
    try:
        data.record = folder.read_record()
    except UserError as e:
        data.messages.append(str(e))
    except (TypeError, ValueError, KeyError) as e:
        data.messages.append(f"{folder.run_json} does not match the run format ({e})")
    if data.record is not None and data.record.outcome.status is not RunStatus.OK:
        out = data.record.outcome
        line = f"status {out.status.value}" + (f": {out.cause}" if out.cause else "")
        if out.stderr_tail:
            line += f" (last output: {out.stderr_tail[-1].strip()})"
        data.messages.append(line)
    report(0.15, "epochs")
    data.epochs = _guard(data, "events.jsonl", folder.epochs, [])
    imported = data.record is not None and "imported_from" in data.record.knobs
    if data.record is not None and not folder.events_path.exists() and not imported:
        data.messages.append("events.jsonl is missing: no epoch markers")
    data.data_wait_by_epoch = _guard(data, "samples/steps", functools.partial(data_wait_shares, folder), {})
    report(0.25, "samples")
    for table in ("process", "gpu", STEPS_TABLE):
        data.series.update(_guard(data, f"samples/{table}", functools.partial(_load_series, folder, table), {}))
    if not data.series.get(schema.CPU_PCT) and not imported:  # an imported trace has no samples by nature
        data.messages.append("no process samples (samples/process.parquet or .csv is missing or empty)")
    report(0.6, "threads")
    data.threads = _guard(data, "thread timeline", lambda: load_thread_lanes(folder), None)
    report(0.75, "CUDA trace")
    _guard(data, "CUDA trace", lambda: _load_trace(folder, data), None)
    report(0.9, "zoom levels")
    _guard(data, "zoom levels", lambda: build_indexes(data), None)
    report(1.0, "done")
    return data


def build_indexes(data: RunData) -> None:
    """The zoom levels the panels draw from, built here (off the GUI thread) rather than on first paint."""
    for series in data.series.values():
        for s in series:
            s.envelope  # noqa: B018 - cached
    for lanes in (data.threads, data.api_calls, data.gpu):
        if lanes is not None:
            lanes.index  # noqa: B018 - cached


def _guard(data: RunData, what: str, fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception as e:  # a damaged folder or a half-finished analyzer is a message, never a crash
        data.messages.append(f"{what} could not be read: {type(e).__name__}: {e}")
        return default


def _load_series(folder: RunFolder, table_name: str) -> dict[str, list[Series]]:
    wanted = ["t_ns", "gpu", STEP_TIME_COLUMN] + [c for m in METRICS if m.table == table_name for c in m.columns]
    table = read_samples(folder, table_name, wanted)
    if table is not None and STEP_TIME_COLUMN in table.column_names and "t_ns" not in table.column_names:
        table = table.rename_columns(["t_ns" if c == STEP_TIME_COLUMN else c for c in table.column_names])
    if table is None or table.num_rows == 0 or "t_ns" not in table.column_names:
        return {}
    out: dict[str, list[Series]] = {}
    groups: list[tuple[str, pa.Table]] = [("", table)]
    if "gpu" in table.column_names:
        gpu = _as_array(table.column("gpu"), np.int64)
        ids = np.unique(gpu)
        groups = [
            (f"GPU{int(g)}" if len(ids) > 1 else "", table.filter(pc.equal(table.column("gpu"), g.item()))) for g in ids
        ]
    for label, part in groups:
        t = _as_array(part.column("t_ns"), np.int64)
        order = None if np.all(t[1:] >= t[:-1]) else np.argsort(t, kind="stable")
        for metric in METRICS:
            if metric.table != table_name:
                continue
            col = next((c for c in metric.columns if c in part.column_names), None)
            if col is None:
                continue
            y = _as_array(part.column(col), np.float64)
            if np.all(np.isnan(y)):
                continue
            tt, yy = (t, y) if order is None else (t[order], y[order])
            out.setdefault(metric.key, []).append(Series(metric.key, tt, yy, label))
    return out


_NUMPY_OF = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def _as_array(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A column as numpy; nulls become NaN. Numbers are viewed in place (a memory-mapped file stays
    mapped, no copy) where the dtype matches: pyarrow's own to_numpy imports pandas, 0.4 s of CPU."""
    if column.null_count:
        column = pc.fill_null(column.cast(pa.float64()), math.nan)
    arr = _one_chunk(column)
    kind = _NUMPY_OF.get(arr.type)
    if kind is None:
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)
    view = np.frombuffer(arr.buffers()[1], dtype=kind, count=len(arr), offset=arr.offset * np.dtype(kind).itemsize)
    return view if view.dtype == dtype else view.astype(dtype)


def _values_at(column: pa.ChunkedArray, rows: np.ndarray) -> list[Any]:
    """A few values by row number (pa.array of a numpy index would import pandas, 0.4 s of CPU)."""
    return [column[int(i)].as_py() for i in rows]


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks() if column.num_chunks else pa.array([], type=column.type)


def load_thread_lanes(folder: RunFolder) -> ThreadLanes | None:
    """The analyzers' thread timeline where there is one, else activity derived from per-thread CPU time."""
    if _has_thread_trace(folder):
        table = thread_timeline(folder)
        if table.num_rows:
            return _lanes_from_timeline(table)
    samples = read_samples(folder, "threads", ("t_ns", "pid", "tid", "name", schema.USER_S, schema.SYSTEM_S))
    if samples is None or samples.num_rows == 0:
        return None
    return lanes_from_thread_samples(samples)


def read_samples(folder: RunFolder, name: str, columns: Sequence[str] | None = None) -> pa.Table | None:
    """Only the columns a panel needs from Parquet (memory-mapped); the whole CSV stream otherwise."""
    parquet = folder.sample_parquet_path(name)
    if not parquet.exists():
        return folder.samples(name)
    # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose import (pandas with it)
    # costs more CPU than reading a million rows. Strings stay dictionary-encoded (thread names repeat on
    # every sample): no per-row string copies.
    present = set(pq.read_schema(parquet, memory_map=True).names)
    if columns is not None:
        columns = [c for c in columns if c in present]
    strings = [c for c in ("name", "thread_name") if c in present]
    with pq.ParquetFile(parquet, memory_map=True, read_dictionary=strings) as file:
        return file.read(columns=columns)


NSYS_SUFFIXES = tuple(suffix for kind in tf.NSYS_KINDS for suffix in tf.SUFFIXES[kind])


def _has_thread_trace(folder: RunFolder) -> bool:
    """Whether a source beyond the sampler (nsys OS runtime, py-spy) can add to the thread lanes; without
    one the sampler's per-thread CPU times are read vectorised here, which stays fast on long runs."""
    raw = folder.raw_dir
    return raw.is_dir() and any(
        p.name.lower().endswith(NSYS_SUFFIXES) or p.name.startswith("pyspy") for p in raw.iterdir()
    )


def _lanes_from_timeline(table: pa.Table) -> ThreadLanes:
    pid = _as_array(table.column("pid"), np.int64)
    tid = _as_array(table.column("tid"), np.int64)
    keys = pid * (1 << 32) + tid
    uniq, first, lane = np.unique(keys, return_index=True, return_inverse=True)
    names = _values_at(table.column("thread_name"), first)
    lane_names = [f"{name or 'thread'} ({int(tid[i])})" for name, i in zip(names, first)]
    source = table.column("source") if "source" in table.column_names else pa.chunked_array([pa.nulls(len(table))])
    # (source, activity) pairs are few: label each pair once, then map every row through its pair's code
    pairs = pc.binary_join_element_wise(
        pc.fill_null(source.cast(pa.string()), ""), table.column("activity").cast(pa.string()), "\x00"
    )
    pair = pc.dictionary_encode(pairs.combine_chunks())
    kinds = [lane_activity(act, src) for src, act in (str(p).split("\x00", 1) for p in pair.dictionary.to_pylist())]
    kind_names = sorted(set(kinds))
    remap = np.array([kind_names.index(k) for k in kinds] or [0], dtype=np.int64)
    sources = sorted({str(s) for s in pc.unique(source).to_pylist() if s})
    return ThreadLanes(
        lane_names=lane_names,
        lane=lane.astype(np.int64).ravel(),
        start_ns=_as_array(table.column("start_ns"), np.int64),
        end_ns=_as_array(table.column("end_ns"), np.int64),
        code=remap[_as_array(pa.chunked_array([pair.indices]), np.int64)],
        names=tuple(kind_names),
        source=", ".join(sources) or "thread timeline",
        lane_tids=tid[first].astype(np.int64),
    )


def lanes_from_thread_samples(samples: pa.Table) -> ThreadLanes:
    """Per-thread CPU time between samples as `busy` (>= half a core), `active` or `idle` segments.

    Consecutive intervals of the same activity merge into one segment, so a lane costs what its
    changes cost, not what its samples cost.
    """
    t = _as_array(samples.column("t_ns"), np.int64)
    tid = _as_array(samples.column("tid"), np.int64)
    cpu = _as_array(samples.column(schema.USER_S), np.float64) + _as_array(samples.column(schema.SYSTEM_S), np.float64)
    keys = _as_array(samples.column("pid"), np.int64) * (1 << 32) + tid
    order = _thread_major_order(keys, t)
    if order is not None:
        t, keys, cpu, tid = t[order], keys[order], cpu[order], tid[order]
    same = keys[1:] == keys[:-1]
    first = np.flatnonzero(np.concatenate(([True], ~same)))
    lane_of = np.cumsum(np.concatenate(([False], ~same)))
    level = activity_levels(np.diff(cpu), np.diff(t))
    idx = np.nonzero(same)[0]  # interval i runs from sample i to i+1 of the same thread
    lane, start, end, lvl = lane_of[idx], t[idx], t[idx + 1], level[idx]
    if len(idx):
        change = np.ones(len(idx), dtype=bool)
        change[1:] = (lane[1:] != lane[:-1]) | (lvl[1:] != lvl[:-1]) | (start[1:] != end[:-1])
        starts = np.nonzero(change)[0]
        ends = np.append(starts[1:], len(idx)) - 1
        lane, lvl, start, end = lane[starts], lvl[starts], start[starts], end[ends]
    # the last name a thread had is the one it is known by (threads are renamed after they start)
    last = np.append(first[1:], len(keys)) - 1
    names = _values_at(samples.column("name"), last if order is None else order[last])
    lane_names = [f"{name} ({int(tid[i])})" for name, i in zip(names, last)]
    return ThreadLanes(
        lane_names,
        lane.astype(np.int64),
        start,
        end,
        lvl.astype(np.int64),
        ACTIVITY_LEVELS,
        "sampled per-thread CPU time",
        tid[last].astype(np.int64),
    )


def _thread_major_order(keys: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    """The order that groups samples by thread, in time order within each; None where they already are."""
    dk = np.diff(keys)
    if np.all((dk > 0) | ((dk == 0) & (np.diff(t) >= 0))):
        return None
    if np.all(t[1:] >= t[:-1]):  # the sampler writes in time order: a stable sort by thread keeps it
        _, code = np.unique(keys, return_inverse=True)
        small = code.astype(np.int16) if code.max(initial=0) < (1 << 15) else code
        return np.argsort(small.ravel(), kind="stable")  # a radix sort for 16-bit keys
    return np.lexsort((t, keys))


def _load_trace(folder: RunFolder, data: RunData) -> None:
    """CUDA API split per phase, kernel top list, and API calls for the thread lanes."""
    if not folder.table_path(CUDA_API).exists():
        data.trace_note = NO_TRACE
        return
    from analyzers import cuda_api, kernels  # here: a run without a trace does not pay for their import

    phases = cuda_api.phase_summaries(folder)
    data.api_label = f"{cuda_api.api_family(folder)} API"
    data.cuda_phases = {phase: [_share(row) for row in rows] for phase, rows in phases.items()}
    data.trace_note = "" if data.cuda_phases else NO_TRACE
    if folder.table_path(KERNELS).exists():
        data.kernels = rows_of(kernels.kernel_summary(folder))
    data.api_calls = _api_calls(folder, data.threads)
    data.gpu, api_row = load_gpu_lanes(folder)
    data.links = _launch_links(data.api_calls, data.gpu, api_row)


def _share(row: Any) -> ApiShare:
    return ApiShare(str(row.name), float(row.time_pct), int(row.total_ns), int(row.calls))


def rows_of(result: Any) -> list[dict[str, Any]]:
    """A summary as a list of dicts, whether an analyzer returns a table, records or dicts."""
    if result is None:
        return []
    if isinstance(result, pa.Table):
        return list(result.to_pylist())
    if hasattr(result, "to_dict") and hasattr(result, "columns"):  # a DataFrame
        return list(result.to_dict("records"))
    rows = []
    for item in result:
        if isinstance(item, dict):
            rows.append(dict(item))
        elif hasattr(item, "_asdict"):
            rows.append(dict(item._asdict()))
        elif hasattr(item, "__dataclass_fields__"):
            rows.append({k: getattr(item, k) for k in item.__dataclass_fields__})
    return rows


def _api_calls(folder: RunFolder, lanes: ThreadLanes | None) -> ApiCalls | None:
    if lanes is None:
        return None
    table = pq.read_table(folder.table_path(CUDA_API), columns=["start_ns", "end_ns", "name", "tid"])
    if table.num_rows == 0:
        return None
    tid = _as_array(table.column("tid"), np.int64)
    lane_tids = lanes.lane_tids
    order = np.argsort(lane_tids)
    pos = np.searchsorted(lane_tids[order], tid).clip(0, max(len(order) - 1, 0))
    found = lane_tids[order][pos] == tid if len(order) else np.zeros(len(tid), dtype=bool)
    start = _as_array(table.column("start_ns"), np.int64)
    sort = np.argsort(start[found], kind="stable")
    return ApiCalls(
        lane=order[pos][found][sort],
        start_ns=start[found][sort],
        end_ns=_as_array(table.column("end_ns"), np.int64)[found][sort],
        name=np.asarray(table.column("name").to_pylist(), dtype=object)[found][sort],
        lanes=len(lanes.lane_names),
        row=np.flatnonzero(found)[sort],
    )


def load_gpu_lanes(folder: RunFolder) -> tuple[GpuLanes | None, np.ndarray]:
    """The GPU rows of a traced run, and each item's launch as a cuda_api row (-1: none, or an NVTX range)."""
    parts: list[tuple[np.ndarray, ...]] = []  # (lane key, start, end, activity code, label, api row)
    labels: dict[str, int] = {}
    names = (*GPU_ACTIVITIES, *NVTX_ACTIVITIES)
    for table, label_column in zip(GPU_TABLES, ("name", "kind")):
        path = folder.table_path(table)
        if not path.exists():
            continue
        with pq.ParquetFile(path, memory_map=True, read_dictionary=[label_column]) as file:
            t = file.read(columns=["start_ns", "end_ns", "device", "stream", label_column])
        if t.num_rows == 0:
            continue
        device = _as_array(t.column("device"), np.int64)
        stream = _as_array(t.column("stream"), np.int64)
        text = _dictionary(t.column(label_column))
        words = text.dictionary.to_pylist()
        word_code = np.array([labels.setdefault(str(w), len(labels)) for w in words] or [0], dtype=np.int64)
        kind_code = np.array([names.index(gpu_activity(table, str(w))) for w in words] or [0], dtype=np.int64)
        idx = _as_array(pa.chunked_array([text.indices]), np.int64)
        api_row = np.full(t.num_rows, -1, dtype=np.int64)
        links = launch_links(folder, table)
        api_row[links.gpu_row] = links.api_row
        parts.append(
            (
                device * (1 << 32) + stream,
                _as_array(t.column("start_ns"), np.int64),
                _as_array(t.column("end_ns"), np.int64),
                kind_code[idx],
                word_code[idx],
                api_row,
            )
        )
    streams = np.unique(np.concatenate([p[0] for p in parts])) if parts else np.zeros(0, dtype=np.int64)
    lane_names = [stream_label(int(k >> 32), int(k & 0xFFFFFFFF)) for k in streams]
    lanes = [np.searchsorted(streams, p[0]) for p in parts]
    nvtx_lanes = 0
    nvtx_path = folder.table_path(NVTX)
    if nvtx_path.exists():
        with pq.ParquetFile(nvtx_path, memory_map=True, read_dictionary=["name"]) as file:
            t = file.read(columns=["start_ns", "end_ns", "name", "pid", "tid"])
        if t.num_rows:
            start, end = _as_array(t.column("start_ns"), np.int64), _as_array(t.column("end_ns"), np.int64)
            thread = _as_array(t.column("pid"), np.int64) * (1 << 32) + _as_array(t.column("tid"), np.int64)
            depth = nvtx_depth(start, end, thread)
            nvtx_lanes = int(depth.max()) + 1
            order = np.lexsort((start, depth))
            alternate = np.zeros(len(start), dtype=np.int64)  # every other range of a row in the second colour
            alternate[order] = np.arange(len(order)) - np.searchsorted(depth[order], depth[order])
            text = _dictionary(t.column("name"))
            words = text.dictionary.to_pylist()
            word_code = np.array([labels.setdefault(str(w), len(labels)) for w in words] or [0], dtype=np.int64)
            idx = _as_array(pa.chunked_array([text.indices]), np.int64)
            first_nvtx = names.index(NVTX_ACTIVITIES[0])
            parts.append((depth, start, end, first_nvtx + alternate % 2, word_code[idx], np.full(len(start), -1)))
            lanes.append(len(lane_names) + depth)
            lane_names += ["NVTX" if d == 0 else f"NVTX depth {d}" for d in range(nvtx_lanes)]
    if not parts:
        return None, np.zeros(0, dtype=np.int64)
    lane = np.concatenate(lanes).astype(np.int64)
    start = np.concatenate([p[1] for p in parts])
    order = np.lexsort((start, lane))
    gpu = GpuLanes(
        lane_names=lane_names,
        lane=lane[order],
        start_ns=start[order],
        end_ns=np.concatenate([p[2] for p in parts])[order],
        code=np.concatenate([p[3] for p in parts]).astype(np.int64)[order],
        names=names,
        label_code=np.concatenate([p[4] for p in parts])[order],
        labels=list(labels),
        nvtx_lanes=nvtx_lanes,
    )
    return gpu, np.concatenate([p[5] for p in parts]).astype(np.int64)[order]


def _dictionary(column: pa.ChunkedArray) -> pa.DictionaryArray:
    """A string column as one dictionary array (read dictionary-encoded already, or encoded here)."""
    if pa.types.is_dictionary(column.type) and column.num_chunks > 1:
        column = column.unify_dictionaries()
    arr = _one_chunk(column)
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def _launch_links(calls: ApiCalls | None, gpu: GpuLanes | None, api_row: np.ndarray) -> LaunchLinks | None:
    """Index pairs between the API calls on the thread lanes and the GPU items they launched."""
    if calls is None or gpu is None or not (api_row >= 0).any():
        return None
    call_of_row = np.full(int(max(calls.row.max(initial=-1), api_row.max())) + 1, -1, dtype=np.int64)
    call_of_row[calls.row] = np.arange(len(calls.row))
    call_of_item = np.where(api_row >= 0, call_of_row[api_row.clip(0)], -1)
    item_of_call = np.full(len(calls.row), -1, dtype=np.int64)
    linked = np.flatnonzero(call_of_item >= 0)
    item_of_call[call_of_item[linked]] = linked
    return LaunchLinks(call_of_item, item_of_call)


def api_split(shares: Sequence[ApiShare], min_pct: float = OTHER_THRESHOLD_PCT) -> list[tuple[str, float]]:
    """One run's Figure 3 split (analyzers.shares): functions >= `min_pct` % of API time, the rest as other."""
    names, grouped = group_shares({"run": shares}, min_pct)
    return [(other_label(min_pct) if n == OTHER else n, v) for n, v in zip(names, grouped["run"]) if v > 0]
