"""One run's tables as the diagnosis rules read them: a view over the run's parts (`analyzers.run.run.Run`),
made once per run (`load`, kept by the run) and handed to every rule, so rules stay pure functions of
tables (tests swap a table with `dataclasses.replace`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.comparison.pairs import DataPair, pair_beside
from analyzers.figures import phases as ph
from analyzers.figures.phase_cuts import nvtx_ranges, run_phases, trace_phases
from analyzers.figures.phases import RunPhases, split_epochs
from analyzers.figures.ranks import RankTable, rank_table
from analyzers.figures.run_summary import summarise
from analyzers.figures.straggler import Straggler, straggler
from analyzers.figures.utilisation import Utilisation
from analyzers.run.memo import per_run_holding_tables
from analyzers.run.run import Run
from analyzers.summaries.rows import ApiRow
from analyzers.timeline import view_store
from analyzers.trace import table_names as t
from tracer.core import schema
from tracer.core.records import EpochRecord, RunRecord
from tracer.core.schema import STEPS_TABLE, THREADS_TABLE


@dataclass(frozen=True)
class RunTables:
    run_id: str
    record: RunRecord
    epochs: tuple[EpochRecord, ...]
    process: pa.Table | None
    steps: pa.Table | None
    gpu: pa.Table | None
    threads: pa.Table | None  # the sampler's per-thread cumulative CPU (samples/threads)
    cuda_startup: tuple[ApiRow, ...]  # calls before the first epoch (analyzers.figures.phases, on the trace's clock)
    cuda_steady: tuple[ApiRow, ...]  # calls starting in the steady epochs
    cuda_whole: tuple[ApiRow, ...]
    startup_cut_ns: int | None  # the end of start-up on the trace's clock (analyzers.figures.phases)
    trace_span_ns: tuple[int, int] | None  # first CUDA API call's start, last one's end
    kernel_count: int
    kernel_total_ns: int
    kernel_median_ns: float | None
    nvtx_steps: int  # NVTX `step…` ranges, the step count of traces without a steps table
    errors: tuple[str, ...]  # the worker's own error events
    worker_start_ns: int  # the worker's `start` event (else the run's wall start): start-up begins here
    phases: RunPhases  # the run's phases on the sampler's clock: which epochs are warm-up and steady
    nvtx_steady_steps: int = 0  # NVTX step ranges that start in the steady phase (trace clock)
    steady_cut_ns: int | None = None  # where the steady phase starts on the trace's clock
    pair: DataPair | None = None  # the runs beside it differing only in --data (analyzers.comparison.pairs), if any
    ranks: RankTable | None = None  # a run of several ranks: each rank's row (analyzers.figures.ranks)
    straggler: Straggler | None = None  # ... and who arrived last at its collectives (analyzers.figures.straggler)
    utilisation: Utilisation | None = None  # FLOPs and MFU (analyzers.figures.utilisation), from the run's summary

    @property
    def cores(self) -> int:
        return max(1, self.record.environment.cpu_logical_cores)

    def steady_epochs(self) -> list[EpochRecord]:
        """The steady epochs as analyzers.figures.phases splits them (all of them when none follows the warm-up)."""
        steady = set(self.phases.split.steady)
        return [e for e in self.epochs if e.epoch in steady]

    def in_epochs(self, table: pa.Table | None, epochs: list[EpochRecord]) -> pa.Table | None:
        """Rows of a sample table whose t_ns falls inside one of `epochs` ([start, end]), in the table's
        order. One binary search per epoch over the sorted times: an OR of one test per epoch cost 0.13 s
        a call at 920 epochs of a 100 M-event run, and the rules call it once per epoch."""
        timed = _timed(table)
        if timed is None or not epochs:
            return None
        table, t, order = timed
        lo, hi = _bounds(t if order is None else t[order], epochs)
        inside = np.zeros(len(t) + 1, dtype=np.int64)
        np.add.at(inside, lo, 1)
        np.add.at(inside, hi, -1)
        keep = np.cumsum(inside[:-1]) > 0
        if order is not None:
            keep[order] = keep.copy()
        return table.filter(pa.array(keep))

    def epoch_parts(self, table: pa.Table | None, epochs: list[EpochRecord]) -> list[pa.Table] | None:
        """`in_epochs(table, [e])` for each of `epochs`, from one sort and one binary search per epoch."""
        timed = _timed(table)
        if timed is None:
            return None
        table, t, order = timed
        if order is not None:
            table, t = table.take(pa.array(order)), t[order]
        lo, hi = _bounds(t, epochs)
        return [table.slice(a, b - a) for a, b in zip(lo.tolist(), hi.tolist())]

    def median_epoch_s(self) -> float | None:
        steady = self.steady_epochs()
        return statistics.median(e.duration_s for e in steady) if steady else None


def _timed(table: pa.Table | None) -> tuple[pa.Table, np.ndarray, np.ndarray | None] | None:
    """(table without rows of no time, its t_ns, the order that sorts them or None when sorted)."""
    if table is None or "t_ns" not in table.column_names:
        return None
    if table.column("t_ns").null_count:
        table = table.filter(pc.is_valid(table.column("t_ns")))
    t = table.column("t_ns").to_numpy()
    ordered = len(t) < 2 or bool(np.all(t[1:] >= t[:-1]))
    return table, t, None if ordered else np.argsort(t, kind="stable")


def _bounds(sorted_t: np.ndarray, epochs: list[EpochRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The first and one past the last index of each epoch's rows in `sorted_t` ([start, end])."""
    lo = np.searchsorted(sorted_t, np.array([e.start_ns for e in epochs], dtype=np.int64), side="left")
    hi = np.searchsorted(sorted_t, np.array([e.end_ns for e in epochs], dtype=np.int64), side="right")
    return lo, np.maximum(hi, lo)


@per_run_holding_tables
def load(run: Run) -> RunTables:
    """The rules' inputs, taken from the run's parts (phases, the CUDA API split per phase, the summary and
    the samples are each computed once per run, for the diagnosis and every other view), made once per run."""
    record = run.read_record()
    startup: list[ApiRow] = []
    steady: list[ApiRow] = []
    whole: list[ApiRow] = []
    cut = None
    steady_cut = None
    span = None
    kernels: tuple[int, int, float | None] = (0, 0, None)
    nvtx_steps = 0
    traced = None
    if run.has_table(t.CUDA_API) or run.has_table(t.NVTX):
        traced = trace_phases(run)
    if traced is not None and run.has_table(t.CUDA_API):
        split = view_store.api_phases(run)  # from a big run's stored view: the costliest part of a diagnosis
        whole = split[ph.WHOLE]
        for p in traced.phases:
            if p.name == ph.STARTUP:
                cut = p.end_ns
                startup = split[ph.STARTUP]
            elif p.name == ph.STEADY:
                steady = split[ph.STEADY]
                steady_cut = p.start_ns
        span = _span(run.table(t.CUDA_API, ["start_ns", "end_ns"]))
    durations = run.table(t.KERNELS, ["dur_ns"])
    if durations is not None:
        dur = pc.drop_null(durations["dur_ns"]).to_numpy(zero_copy_only=False)
        kernels = (durations.num_rows, int(dur.sum()), float(np.median(dur)) if len(dur) else None)
    nvtx_steady = 0
    if traced is not None:
        step_starts = [s for name, s, _e in nvtx_ranges(run) if ph.STEP_NAME.match(name)]
        nvtx_steps = len(step_starts)
        window = traced.steady
        nvtx_steady = sum(1 for s in step_starts if window is not None and window.holds(s))
    events = run.events()
    errors = tuple(str(e.get("error", "")) for e in events if e.get("kind") == schema.Event.ERROR)
    starts = [int(e["t_ns"]) for e in events if e.get("kind") == schema.Event.START and "t_ns" in e]
    return RunTables(
        run_id=run.run_id,
        record=record,
        epochs=tuple(run.epochs()),
        process=run.samples("process"),
        steps=run.samples(STEPS_TABLE),
        gpu=run.samples("gpu"),
        threads=run.samples(THREADS_TABLE.name),
        cuda_startup=tuple(startup),
        cuda_steady=tuple(steady),
        cuda_whole=tuple(whole),
        startup_cut_ns=cut,
        trace_span_ns=span,
        kernel_count=kernels[0],
        kernel_total_ns=kernels[1],
        kernel_median_ns=kernels[2],
        nvtx_steps=nvtx_steps,
        errors=errors,
        worker_start_ns=starts[0] if starts else record.wall_start_ns,
        phases=run_phases(run),
        nvtx_steady_steps=nvtx_steady,
        steady_cut_ns=steady_cut,
        pair=pair_beside(run),
        ranks=rank_table(run),
        straggler=straggler(run),
        utilisation=summarise(run).utilisation,
    )


def _span(calls: pa.Table | None) -> tuple[int, int] | None:
    """The first call's start and the last one's end (None without calls)."""
    if calls is None or calls.num_rows == 0:
        return None
    lo, hi = pc.min(calls["start_ns"]).as_py(), pc.max(calls["end_ns"]).as_py()
    return None if lo is None or hi is None else (int(lo), int(hi))


def column(table: pa.Table | None, name: str) -> list[float]:
    if table is None or name not in table.column_names:
        return []
    return [float(v) for v in table.column(name).to_pylist() if v is not None]


@dataclass(frozen=True)
class DataWait:
    """Data wait over the steady steps (the steady epochs of analyzers.figures.phases; every step of a
    one-epoch run)."""

    share_pct: float  # data wait / (data wait + compute + sync)
    wait_s: float
    step_s: float
    steps: int
    epochs: int


def steady_data_wait(t: RunTables) -> DataWait | None:
    """The share of step time the steady steps wait for their batch; None without per-step timing.
    Input-bound, host-bound and every knob about loader workers read this one figure."""
    if t.steps is None or t.steps.num_rows == 0:
        return None
    epochs = column(t.steps, "epoch")
    steady = set(t.phases.split.steady) or set(split_epochs(int(e) for e in epochs).steady)
    rows = [i for i, e in enumerate(epochs) if int(e) in steady]
    wait = column(t.steps, schema.DATA_WAIT_S)
    if len(wait) != len(epochs):  # steps whose wait nobody saw (a command's optimizer-counted steps)
        return None
    compute = column(t.steps, schema.COMPUTE_S)
    sync = column(t.steps, schema.SYNC_S) or [0.0] * len(wait)
    w = sum(wait[i] for i in rows)
    total = w + sum(compute[i] for i in rows) + sum(sync[i] for i in rows)
    if total <= 0:
        return None
    return DataWait(100 * w / total, w, total, len(rows), len({epochs[i] for i in rows}))


@dataclass(frozen=True)
class ThreadCpu:
    """One thread of the training process and the cores it kept busy over the steady epochs."""

    tid: int
    name: str
    main: bool  # the process's main thread (tid == pid): the Python interpreter's own
    cores: float

    def label(self) -> str:
        return f"main thread ({self.name})" if self.main else f"thread {self.name} ({self.tid})"


def step_threads(t: RunTables) -> list[ThreadCpu]:
    """The threads of the training process (the worker, not its loader processes), busiest first, with
    their CPU over the steady epochs in cores: CPU seconds gained inside each epoch over the epochs'
    seconds. These threads issue the step (Python, autograd, pinning): under one interpreter lock they
    take turns, so the host can set the pace while none of them is near a full core."""
    steady = t.steady_epochs()
    table = t.in_epochs(t.threads, steady)
    if table is None or table.num_rows == 0:
        return []
    pid = t.record.worker_pid
    pids = set(table.column(schema.PID).to_pylist())
    if pid not in pids:  # runs before the pid was recorded, imported traces
        return []
    table = table.filter(pc.equal(table.column(schema.PID), pid))
    cpu = pc.add(table.column(schema.USER_S), table.column(schema.SYSTEM_S))
    table = table.append_column("cpu_s", cpu)
    seconds = sum(e.duration_s for e in steady)
    gained: dict[int, float] = {}
    names: dict[int, str] = {}
    for part in t.epoch_parts(table, steady) or []:
        if part.num_rows == 0:
            continue
        agg = part.group_by(schema.TID, use_threads=False).aggregate(
            [("cpu_s", "min"), ("cpu_s", "max"), (schema.THREAD_NAME, "last")]
        )
        columns = (schema.TID, "cpu_s_min", "cpu_s_max", f"{schema.THREAD_NAME}_last")
        for tid, lo, hi, name in zip(*(agg.column(c).to_pylist() for c in columns)):
            gained[tid] = gained.get(tid, 0.0) + (hi - lo)
            names[tid] = str(name)
    if seconds <= 0:
        return []
    rows = [ThreadCpu(tid, names[tid], tid == pid, s / seconds) for tid, s in gained.items()]
    return sorted(rows, key=lambda r: -r.cores)
