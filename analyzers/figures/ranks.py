"""The ranks of one run side by side: step time, data wait, compute and communication per rank.

Read from whatever the run holds, never more: the steps table (its RANK column: the worker, the probe,
or an imported trace's `ProfilerStep` ranges), the collectives a `--nproc` run's ranks recorded, and a
trace's kernels (those the kernel classes call communication, NCCL's of both naming eras among them:
`analyzers.trace.collectives.comm_mask`; the others GPU compute). Basis: a run of ours counts its steady
epochs (`analyzers.figures.phases.split_epochs`); an imported trace counts what it holds (the profiler
already chose the steps), and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.figures import torch_parts
from analyzers.figures.phases import split_epochs
from analyzers.run.run import Run
from analyzers.trace import collectives
from analyzers.trace import tables as t
from tracer.core import schema
from tracer.core.records import RankInfo

BASIS_STEADY = "steady epochs"
BASIS_TRACE = "every step and kernel the trace holds"
COMM_WORKER = "the ranks' own all-reduce records (DDP buckets)"
COMM_NCCL = "communication kernels (NCCL, RCCL, expert-parallel, custom all-reduce)"
COMM_HOST = "host collective operators (nccl:*, gloo:*)"
COMM_ARRIVAL = (
    "each rank's arrival at its step's backward() (where DDP's gradient all-reduce begins; no collective recorded)"
)


@dataclass(frozen=True)
class Arrival:
    """One rank entering one collective: `key` matches the same collective on every rank."""

    key: tuple[object, ...]
    kind: str
    arrive_ns: int
    done_ns: int


@dataclass(frozen=True)
class RankSteps:
    """One rank's steps (numpy columns, by start) and collectives, as the analyses read them."""

    rank: int
    epoch: np.ndarray
    step: np.ndarray
    start_ns: np.ndarray
    data_wait_ns: np.ndarray
    busy_ns: np.ndarray  # the rest of the step: compute and sync as the step table records them
    arrivals: tuple[Arrival, ...]
    compute_starts: np.ndarray  # GPU compute kernels (not NCCL), sorted, merged: busy intervals
    compute_ends: np.ndarray
    gpu_compute_ns: int | None  # every non-NCCL kernel's time; None without kernels

    @property
    def end_ns(self) -> np.ndarray:
        return self.start_ns + self.data_wait_ns + self.busy_ns


@dataclass(frozen=True)
class RanksInput:
    infos: tuple[RankInfo, ...]
    ranks: tuple[RankSteps, ...]
    basis: str
    comm_source: str
    steady_epochs: tuple[int, ...]


@dataclass(frozen=True)
class RankRow:
    rank: int
    device: str
    steps: int
    step_s: float | None  # sums over the basis' steps
    data_wait_s: float | None
    compute_s: float | None  # the steps' time besides data wait (compute and sync, waits in collectives included)
    comm_s: float | None  # time in collectives (NCCL kernels, or from arrival to completion)
    gpu_compute_s: float | None  # non-NCCL kernel time
    comm_hidden_pct: float | None  # share of NCCL kernel time overlapped by compute kernels on its GPU
    collectives: int

    @property
    def step_mean_s(self) -> float | None:
        return self.step_s / self.steps if self.step_s is not None and self.steps else None

    def to_json(self) -> dict[str, object]:
        return {
            schema.RANK: self.rank,
            "device": self.device,
            "steps": self.steps,
            "step_s": self.step_s,
            "step_mean_s": self.step_mean_s,
            schema.DATA_WAIT_S: self.data_wait_s,
            schema.COMPUTE_S: self.compute_s,
            "comm_s": self.comm_s,
            "gpu_compute_s": self.gpu_compute_s,
            "comm_hidden_pct": self.comm_hidden_pct,
            "collectives": self.collectives,
        }


@dataclass(frozen=True)
class RankTable:
    rows: tuple[RankRow, ...]
    basis: str
    comm_source: str


def load(folder: Run) -> RanksInput | None:
    """The run's ranks as the analyses read them; None for a run of one process."""
    record = folder.read_record()
    steps = folder.samples(schema.STEPS_TABLE)
    infos = record.rank_infos
    if record.world_size <= 1:  # a steps table with several ranks (a command under torchrun) is enough
        seen = sorted(set(t.rank_of(steps).to_pylist())) if steps is not None else []
        if len(seen) <= 1:
            return None
        infos = tuple(RankInfo(rank=int(r), world_size=len(seen)) for r in seen)
    steady: tuple[int, ...] = ()
    if steps is not None and steps.num_rows:
        steady = split_epochs(steps[schema.STEP_COLUMNS[0]].to_pylist()).steady
    imported = record.imported is not None
    worker_collectives = folder.samples(schema.COLLECTIVES_TABLE)
    kernels = ranked_table(folder, t.KERNELS, ["start_ns", "end_ns", "name", "device"])
    host_ops = _host_collectives(folder)
    arrived = torch_parts.step_arrivals(folder)
    if worker_collectives is not None and worker_collectives.num_rows:
        source = COMM_WORKER
    elif kernels is not None and bool(pc.any(collectives.comm_mask(kernels["name"])).as_py()):
        source = COMM_NCCL
    elif host_ops is None and arrived is not None:
        source = COMM_ARRIVAL
    else:
        source = COMM_HOST
    out = []
    for info in infos:
        r = info.rank
        rank_steps = t.of_rank(steps, r) if steps is not None else None
        if rank_steps is not None and steady and not imported:
            rank_steps = rank_steps.filter(pc.is_in(rank_steps[schema.STEP_COLUMNS[0]], pa.array(steady, pa.int64())))
        arrivals: list[Arrival] = []
        compute = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        gpu_ns: int | None = None
        if kernels is not None:
            mine = t.of_rank(kernels, r)
            nccl = collectives.comm_mask(mine["name"])
            comm, work = mine.filter(nccl), mine.filter(pc.invert(nccl))
            gpu_ns = int(pc.sum(pc.subtract(work["end_ns"], work["start_ns"])).as_py() or 0)
            compute = _merged(work["start_ns"].to_numpy(), work["end_ns"].to_numpy())
            if source == COMM_NCCL:
                arrivals = _indexed(comm["name"].to_pylist(), comm["start_ns"].to_pylist(), comm["end_ns"].to_pylist())
        if source == COMM_WORKER and worker_collectives is not None:
            arrivals = _worker_arrivals(t.of_rank(worker_collectives, r), steady)
        elif source == COMM_HOST and host_ops is not None:
            mine = t.of_rank(host_ops, r)
            arrivals = _indexed(mine["name"].to_pylist(), mine["start_ns"].to_pylist(), mine["end_ns"].to_pylist())
        elif source == COMM_ARRIVAL and arrived is not None:
            rows = torch_parts.arrival_rows(t.of_rank(arrived, r), steady)
            arrivals = [Arrival((e, s), "backward", arrive, done) for e, s, arrive, done in rows]
        out.append(_rank_steps(r, rank_steps, arrivals, compute, gpu_ns))
    return RanksInput(infos, tuple(out), BASIS_TRACE if imported else BASIS_STEADY, source, steady)


def rank_table(folder: Run) -> RankTable | None:
    """One row per rank; None for a run of one process."""
    data = load(folder)
    if data is None:
        return None
    rows = []
    for info, r in zip(data.infos, data.ranks):
        has_steps = len(r.start_ns) > 0
        comm_ns = comm_time_ns(r, data.comm_source)
        hidden = None
        if data.comm_source == COMM_NCCL and comm_ns > 0:
            overlap = sum(_overlap(r.compute_starts, r.compute_ends, a.arrive_ns, a.done_ns) for a in r.arrivals)
            hidden = 100.0 * overlap / comm_ns
        rows.append(
            RankRow(
                rank=info.rank,
                device=info.device,
                steps=len(r.start_ns),
                step_s=float((r.data_wait_ns + r.busy_ns).sum()) / 1e9 if has_steps else None,
                data_wait_s=float(r.data_wait_ns.sum()) / 1e9 if has_steps else None,
                compute_s=float(r.busy_ns.sum()) / 1e9 if has_steps else None,
                comm_s=comm_ns / 1e9 if r.arrivals and data.comm_source != COMM_ARRIVAL else None,
                gpu_compute_s=None if r.gpu_compute_ns is None else r.gpu_compute_ns / 1e9,
                comm_hidden_pct=hidden,
                collectives=len(r.arrivals),
            )
        )
    return RankTable(tuple(rows), data.basis, data.comm_source)


def comm_time_ns(r: RankSteps, source: str) -> int:
    """A rank's time in collectives: NCCL kernel time summed (as nsys sums kernels); a rank's own records
    (DDP buckets, all-reduced concurrently) as the time covered by at least one, counted once; 0 from
    arrivals alone (the time after one is the backward pass as well as the all-reduce)."""
    if source == COMM_ARRIVAL:
        return 0
    if source != COMM_WORKER:
        return sum(a.done_ns - a.arrive_ns for a in r.arrivals)
    starts = np.array([a.arrive_ns for a in r.arrivals], dtype=np.int64)
    ends = np.array([a.done_ns for a in r.arrivals], dtype=np.int64)
    merged_s, merged_e = _merged(starts, ends)
    return int((merged_e - merged_s).sum())


def _rank_steps(
    rank: int,
    steps: pa.Table | None,
    arrivals: list[Arrival],
    compute: tuple[np.ndarray, np.ndarray],
    gpu_ns: int | None,
) -> RankSteps:
    if steps is None or not steps.num_rows:
        empty = np.zeros(0, np.int64)
        return RankSteps(rank, empty, empty, empty, empty, empty, tuple(arrivals), *compute, gpu_ns)
    steps = steps.sort_by("start_ns")
    wait = np.rint(steps[schema.DATA_WAIT_S].to_numpy(zero_copy_only=False) * 1e9).astype(np.int64)
    busy = steps[schema.COMPUTE_S].to_numpy(zero_copy_only=False) + steps[schema.SYNC_S].to_numpy(zero_copy_only=False)
    return RankSteps(
        rank,
        steps[schema.STEP_COLUMNS[0]].to_numpy(zero_copy_only=False),
        steps[schema.STEP_COLUMNS[1]].to_numpy(zero_copy_only=False),
        steps["start_ns"].to_numpy(zero_copy_only=False),
        wait,
        np.rint(busy * 1e9).astype(np.int64),
        tuple(arrivals),
        *compute,
        gpu_ns,
    )


def _indexed(names: list[str], starts: list[int], ends: list[int]) -> list[Arrival]:
    """Collectives matched across ranks by kind and order: the k-th AllReduce of each rank is one."""
    seen: dict[str, int] = {}
    out = []
    for name, start, end in sorted(zip(names, starts, ends), key=lambda x: x[1]):
        kind = collectives.kind_of(name)
        k = seen[kind] = seen.get(kind, -1) + 1
        out.append(Arrival((kind, k), kind, int(start), int(end)))
    return out


def _worker_arrivals(table: pa.Table, steady: tuple[int, ...]) -> list[Arrival]:
    epoch, step, what = schema.COLLECTIVE_COLUMNS[:3]
    rows = sorted(
        zip(*(table[c].to_pylist() for c in (epoch, step, what, schema.ARRIVE_NS, schema.DONE_NS))),
        key=lambda x: x[3],
    )
    seen: dict[tuple[object, ...], int] = {}
    out = []
    for e, s, kind, arrive, done in rows:
        if steady and e not in steady:
            continue
        k = seen[(e, s, kind)] = seen.get((e, s, kind), -1) + 1
        out.append(Arrival((e, s, kind, k), str(kind), int(arrive), int(done)))
    return out


def ranked_table(run: Run, name: str, columns: list[str]) -> pa.Table | None:
    """Those of `columns` trace table `name` has, with its rank column where it has one; None where the table
    is absent, damaged (named in the run's problems) or empty."""
    path = run.table_file(name)
    if not t.present(run, name):
        return None
    have = pq.ParquetFile(path).schema_arrow.names
    table = pq.read_table(path, columns=[c for c in [*columns, schema.RANK] if c in have])
    return table if table.num_rows else None


def _host_collectives(folder: Run) -> pa.Table | None:
    parts = []
    for name in (t.OPERATORS, t.NVTX):
        table = ranked_table(folder, name, ["start_ns", "end_ns", "name"])
        if table is None:
            continue
        mask = pc.or_(
            *(pc.starts_with(table["name"], p) for p in collectives.HOST_COLLECTIVE_PREFIXES)
        )  # fmt: skip
        parts.append(t.plain(table.filter(mask), table.schema))
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts, promote_options="default") if parts else None


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals merged where they overlap (kernels on several streams), sorted."""
    if len(starts) == 0:
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    groups = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s), np.int64)
    np.maximum.at(out_e, groups, e)
    return out_s.astype(np.int64), out_e


def _overlap(starts: np.ndarray, ends: np.ndarray, a: int, b: int) -> int:
    """ns of [a, b) covered by the merged intervals."""
    if len(starts) == 0 or b <= a:
        return 0
    lo = max(0, int(np.searchsorted(ends, a, side="right")))
    hi = int(np.searchsorted(starts, b, side="left"))
    if hi <= lo:
        return 0
    s = np.maximum(starts[lo:hi], a)
    e = np.minimum(ends[lo:hi], b)
    return int(np.clip(e - s, 0, None).sum())


def busy_between(r: RankSteps, a: int, b: int) -> int:
    """GPU compute ns of one rank in [a, b)."""
    return _overlap(r.compute_starts, r.compute_ends, a, b)


RANK_COLUMNS = (
    (schema.RANK, schema.RANK),
    ("device", "device"),
    ("steps", "steps"),
    ("step_s", "steps' time (ms)"),
    (schema.DATA_WAIT_S, "their data wait (ms)"),
    ("comm_s", "communication (ms)"),
    ("gpu_compute_s", "GPU compute (ms)"),
    ("comm_hidden_pct", "comm. hidden (%)"),
    ("collectives", "collectives"),
)
"""The columns `compare` and `report` show for each rank, with their headings (ms: from the _s fields);
every time is a total over the basis' steps (a trace's kernels: the whole trace)."""


def cells(row: RankRow) -> list[str]:
    """One rank's row as text, in RANK_COLUMNS' order ("-" where not measured)."""
    data = row.to_json()
    out = []
    for key, _ in RANK_COLUMNS:
        value = data[key]
        if value is None:
            out.append("-")
        elif key.endswith("_s"):
            out.append(f"{float(value) * 1e3:.3g}")  # type: ignore[arg-type]
        elif key.endswith("_pct"):
            out.append(f"{float(value):.1f}")  # type: ignore[arg-type]
        else:
            out.append(str(value))
    return out


def markdown_lines(run_id: str, table: RankTable) -> list[str]:
    """A run's ranks as a Markdown table with its basis."""
    heads = [h for _, h in RANK_COLUMNS]
    lines = [f"{run_id}: {table.basis}; communication from {table.comm_source}", ""]
    lines += ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in table.rows]
    return lines
