"""Qt-free data sources of the viewer: one run folder loaded, its metrics as series and its lanes with
the zoom indexes the panels draw from.

`load_run` opens the folder as a `Run` (analyzers.run) and never raises for a damaged, failed or
half-written folder: what it could not read, and every damaged file the run met (`Run.problems`),
becomes a line in `RunData.messages`, and the panels show what is there. What the viewer shows is the analyzers'
(lanes and labels: `analyzers.timeline.lanes`; the CUDA API split: `analyzers.summaries.cuda_api`; kernels:
`analyzers.summaries.kernels`; labels and facts: `analyzers.render.facts`); this module loads them and indexes them for
zooming. Times stay Unix-epoch ns (`*_ns`) until a panel asks for seconds from an anchor (`RunData.anchor_ns`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.figures import utilisation
from analyzers.figures.run_summary import displayed_status, summarise
from analyzers.figures.steps import COMPUTE_TOTAL_S, STEP_S, data_wait_shares, with_step_columns
from analyzers.render.facts import run_facts, run_label, unique_labels
from analyzers.run.run import Run
from analyzers.summaries.rows import ApiRow, KernelRow
from analyzers.timeline import lanes as ln
from analyzers.timeline import view_store
from analyzers.timeline.lane_index import LaneIndex
from analyzers.trace.arrays import as_array
from tracer.core import arrow_build, schema
from tracer.core.cached import cached_property
from tracer.core.errors import UserError
from tracer.core.records import EpochRecord, RunRecord, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEP_PARTS_TABLE, STEPS_TABLE
from viewer.pyramid import Envelope

Progress = Callable[[float, str], None]


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
    Metric(schema.PSS_MIB, "Memory, PSS (shared pages counted once)", "MiB", "process", (schema.PSS_MIB,)),
    Metric(schema.RSS_MIB, "Resident memory (RSS summed over processes)", "MiB", "process", (schema.RSS_MIB,)),
    Metric("threads", "Threads", "count", "process", ("threads",)),
    Metric("gpu_util_pct", "GPU utilisation", "%", "gpu", (schema.UTIL_PCT, "gpu_util_pct")),
    Metric("gpu_mem_mib", "GPU memory", "MiB", "gpu", (schema.PROC_MEM_MIB, schema.MEM_USED_MIB)),
    Metric("gpu_power_w", "GPU power", "W", "gpu", (schema.POWER_W,)),
    # The per-step split (one point per step, at the step's start): analyzers.figures.steps sums it per epoch.
    Metric("step_data_wait_s", "Step: waiting for data", "s", STEPS_TABLE, (schema.DATA_WAIT_S,)),
    # compute: the step minus its data wait (analyzers.figures.steps), so asynchronous frameworks compare; sync: the
    # part of it the loop spent blocked reading the loss (where an asynchronous framework does its waiting).
    Metric("step_compute_s", "Step: compute (step minus data wait)", "s", STEPS_TABLE, (COMPUTE_TOTAL_S,)),
    Metric("step_sync_s", "Step: of it, blocked reading the loss", "s", STEPS_TABLE, (schema.SYNC_S,)),
    # A PyTorch command's compute in parts, where the probe saw them (tracer/probe/step_parts.py).
    Metric("step_forward_s", "Step: forward and loss", "s", STEP_PARTS_TABLE, (schema.FORWARD_S,)),
    Metric("step_backward_s", "Step: backward (DDP's all-reduce too)", "s", STEP_PARTS_TABLE, (schema.BACKWARD_S,)),
    Metric("step_optimizer_s", "Step: optimizer step", "s", STEP_PARTS_TABLE, (schema.OPTIMIZER_S,)),
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
        value = float(self.y[max(i, 0)])
        return None if math.isnan(value) else value  # a gap between steps (step_shape): nothing to read


@dataclass
class RunData:
    """Everything the viewer shows of one run, drawn from its `Run` (analyzers.run) and indexed for
    zooming; loaded off the GUI thread."""

    path: Path
    record: RunRecord | None = None
    epochs: list[EpochRecord] = field(default_factory=list)
    data_wait_by_epoch: dict[int, float | None] = field(default_factory=dict)  # share 0..1 (analyzers.figures.steps)
    series: dict[str, list[Series]] = field(default_factory=dict)
    lanes: ln.Lanes = field(default_factory=lambda: ln.Lanes(None, None, None, None))
    # `analyzers.timeline.lane_index`, via `analyzers.timeline.view_store`
    indexes: dict[str, LaneIndex] = field(default_factory=dict)
    api_phases: dict[str, list[ApiRow]] = field(default_factory=dict)  # analyzers.summaries.cuda_api.phase_summaries
    kernels: list[KernelRow] = field(default_factory=list)
    api_label: str = "CUDA API"  # "HIP API" for a ROCm trace (analyzers.summaries.cuda_api.api_family)
    messages: list[str] = field(default_factory=list)  # what could not be read, the run's problems among them
    name: str = ""  # set by the viewer where two runs would otherwise share a label
    run: Run | None = field(default=None, repr=False)  # the run these were drawn from (analyzers.run)

    @property
    def run_id(self) -> str:
        return self.path.name  # a copied or renamed run is known by its folder's name

    @property
    def label(self) -> str:
        """Legend text (`analyzers.render.facts.run_label`), made unique among the runs shown by `name_runs`."""
        return self.name or self.default_label

    @property
    def default_label(self) -> str:
        return run_label(self.record, self.path)

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

    def facts(self) -> list[tuple[str, str]]:
        """run.json's facts, then FLOPs, the peak and MFU (analyzers.figures.utilisation) where the run is open."""
        facts = run_facts(self.record, self.path, self.epochs, self.sample_count, bool(self.api_phases))
        return facts + (
            utilisation.rows(summarise(self.run).utilisation) if self.run is not None and self.record else []
        )


def name_runs(runs: Sequence[RunData]) -> None:
    """Gives runs that would share a label the end of their run id, so legends tell them apart."""
    labels = [run.default_label for run in runs]
    for run, label, default in zip(runs, unique_labels(labels, [r.run_id for r in runs]), labels):
        run.name = "" if label == default else label


def load_run(path: Path | str, progress: Progress | None = None) -> RunData:
    """Loads one run folder through its `Run` (analyzers.run); every problem is a message, never an
    exception, and every damaged file the run met (`Run.problems`) is one of them."""
    report = progress or (lambda fraction, text: None)
    run = Run.open(Path(path))
    data = RunData(path=run.path, run=run)
    if not run.path.is_dir():
        data.messages.append(f"{run.path} does not exist")
        return data
    report(0.05, "run.json")
    try:
        data.record = run.read_record()
    except UserError as e:
        data.messages.append(str(e))
    except (TypeError, ValueError, KeyError) as e:
        data.messages.append(f"{run.run_json} does not match the run format ({e})")
    if data.record is not None and data.record.outcome.status is not RunStatus.OK:
        out = data.record.outcome
        line = f"status {out.status.value}" + (f": {out.cause}" if out.cause else "")
        if out.stderr_tail:
            line += f" (last output: {out.stderr_tail[-1].strip()})"
        data.messages.append(line)
    report(0.15, "epochs")
    data.epochs = _guard(data, "events.jsonl", run.epochs, [])
    imported = data.record is not None and data.record.imported is not None
    if data.record is not None and not run.events_path.exists() and not imported:
        data.messages.append("events.jsonl is missing: no epoch markers")
    data.data_wait_by_epoch = _guard(data, "samples/steps", functools.partial(data_wait_shares, run), {})
    report(0.25, "samples")
    for table in ("process", "gpu", STEPS_TABLE, STEP_PARTS_TABLE):
        data.series.update(_guard(data, f"samples/{table}", functools.partial(_load_series, run, table), {}))
    if not data.series.get(schema.CPU_PCT) and not imported:  # an imported trace has no samples by nature
        data.messages.append("no process samples (samples/process.parquet or .csv is missing or empty)")
    report(0.5, "zoom levels")
    for series in data.series.values():  # built here (off the GUI thread) rather than on first paint
        for s in series:
            s.envelope  # noqa: B018 - cached
    report(0.6, "lanes and CUDA trace")
    _guard(data, "lanes and CUDA trace", lambda: _load_view(run, data), None)
    data.messages += [p.text() for p in run.problems]
    report(1.0, "done")
    return data


def _guard(data: RunData, what: str, fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception as e:  # a damaged folder or a half-finished analyzer is a message, never a crash
        data.messages.append(f"{what} could not be read: {type(e).__name__}: {e}")
        return default


def _load_view(run: Run, data: RunData) -> None:
    """Lanes, their zoom indexes, the CUDA API split per phase and the kernel summary, as the analyzers
    computed them once per run (`analyzers.timeline.view_store.load`: stored for a big trace, so a 10 M-event run
    opens at once)."""
    view = view_store.load(run)
    data.lanes, data.indexes, data.api_phases = view.lanes, view.indexes, view.api_phases
    data.kernels, data.api_label = view.kernels, view.api_label


def read_samples(folder: RunFolder, name: str, columns: Sequence[str] | None = None) -> pa.Table | None:
    """Only the columns a panel needs from Parquet (memory-mapped); the whole CSV stream otherwise; None
    where the table is damaged (named in the folder's problems)."""
    parquet = folder.sample_parquet_path(name)
    if not parquet.exists():
        return folder.samples(name)
    # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose import (pandas with it)
    # costs more CPU than reading a million rows.
    try:
        present = set(pq.read_schema(parquet, memory_map=True).names)
        if columns is not None:
            columns = [c for c in columns if c in present]
        with pq.ParquetFile(parquet, memory_map=True) as file:
            return file.read(columns=columns)
    except (pa.ArrowException, OSError, ValueError) as e:  # named in the run's problems, as its samples() does
        folder.problems.add(parquet, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None


def _load_series(folder: RunFolder, table_name: str) -> dict[str, list[Series]]:
    wanted = ["t_ns", "gpu", schema.RANK, STEP_TIME_COLUMN] + [
        c for m in METRICS if m.table == table_name for c in m.columns
    ]
    if table_name == STEPS_TABLE:
        wanted += [schema.DATA_WAIT_S, schema.COMPUTE_S, schema.SYNC_S]
    table = read_samples(folder, table_name, wanted)
    if table is not None and table_name == STEPS_TABLE:
        table = with_step_columns(table)
    if table is not None and STEP_TIME_COLUMN in table.column_names and "t_ns" not in table.column_names:
        table = table.rename_columns(["t_ns" if c == STEP_TIME_COLUMN else c for c in table.column_names])
    if table is None or table.num_rows == 0 or "t_ns" not in table.column_names:
        return {}
    out: dict[str, list[Series]] = {}
    groups: list[tuple[str, pa.Table]] = [("", table)]
    for column, label in (("gpu", "GPU"), (schema.RANK, "rank ")):  # a series per GPU, and per rank
        if column not in table.column_names:
            continue
        values = np.nan_to_num(as_array(table.column(column), np.float64), nan=0.0).astype(np.int64)  # null: 0
        ids = np.unique(values)
        groups = (
            [(f"{label}{int(g)}", table.take(arrow_build.indices(np.flatnonzero(values == g)))) for g in ids]
            if len(ids) > 1
            else [("", table)]
        )
    for label, part in groups:
        t = as_array(part.column("t_ns"), np.int64)
        order = None if np.all(t[1:] >= t[:-1]) else np.argsort(t, kind="stable")
        for metric in METRICS:
            if metric.table != table_name:
                continue
            col = next((c for c in metric.columns if c in part.column_names), None)
            if col is None:
                continue
            y = as_array(part.column(col), np.float64)
            if np.all(np.isnan(y)):
                continue
            tt, yy = (t, y) if order is None else (t[order], y[order])
            if table_name == STEPS_TABLE and STEP_S in part.column_names:
                took = as_array(part.column(STEP_S), np.float64)
                tt, yy = step_shape(tt, took if order is None else took[order], yy)
            out.setdefault(metric.key, []).append(Series(metric.key, tt, yy, label))
    return out


STEP_GAP_S = 0.01  # a pause longer than this between one step's end and the next one's start is not drawn


def step_shape(start_ns: np.ndarray, took_s: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each step as a flat line over its own duration (its start and its end), and a gap (NaN) where the next
    step starts more than STEP_GAP_S later: a line from one step's point to the next one's drew JAX's 10 s
    compile step as a diagonal across those 10 s, and joined the last step of an epoch to the next epoch's."""
    end = start_ns + np.round(np.nan_to_num(took_s) * 1e9).astype(np.int64)
    end[:-1] = np.minimum(end[:-1], start_ns[1:])  # two clocks: never past the next step's start (x stays sorted)
    gap = np.zeros(len(start_ns), dtype=bool)
    gap[:-1] = start_ns[1:] - end[:-1] > STEP_GAP_S * 1e9
    t = np.column_stack((start_ns, end, end)).ravel()
    v = np.column_stack((y, y, np.where(gap, np.nan, y))).ravel()
    keep = np.ones(len(t), dtype=bool)
    keep[2::3] = gap  # the third point of a step only where it marks a gap
    return t[keep], v[keep]
