"""The numbers behind the report's figures, computed from run folders (pure: no plotting here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa

from analyzers.figures.steady import Throughput
from analyzers.run.run import Run
from analyzers.summaries.shares import OTHER, group_shares
from tracer.core import schema

# the rule lives in analyzers.summaries.shares (the viewer's CUDA panel uses it too)
__all__ = ["OTHER", "group_shares"]


@dataclass(frozen=True)
class ThroughputBar:
    """One pool of repeats in the throughput figure (the same pool as its Table 1-2 row)."""

    framework: str
    label: str
    throughput: Throughput
    epoch_s: tuple[float, ...]  # every epoch's time in the pool's newest counted run
    note: str = ""  # why nothing is drawn (every run left out)
    mark: str = ""  # "contended", "2 of 3 contended": runs taken while other processes held the CPU


@dataclass(frozen=True)
class ResourceSeries:
    """CPU %, RAM % and threads of the training process tree; `t_s` counts from the run's start."""

    t_s: np.ndarray
    cpu_pct: np.ndarray  # 100 = all logical cores busy
    ram_pct: np.ndarray  # RSS as % of the machine's RAM
    rss_mib: np.ndarray
    threads: np.ndarray
    epoch_starts_s: tuple[float, ...]
    epoch_ends_s: tuple[float, ...]


def resource_series(folder: Run) -> ResourceSeries:
    record = folder.read_record()
    t0 = record.wall_start_ns
    process = folder.samples("process")
    epochs = folder.epochs()

    def col(name: str) -> np.ndarray:
        if process is None or name not in process.column_names:
            return np.array([], dtype=float)
        return np.asarray(process.column(name).to_numpy(zero_copy_only=False), dtype=float)

    t_ns = col("t_ns")
    return ResourceSeries(
        t_s=(t_ns - t0) / 1e9 if t_ns.size else t_ns,
        cpu_pct=col(schema.CPU_PCT),
        ram_pct=col(schema.RSS_PCT_RAM),
        rss_mib=col(schema.RSS_MIB),
        threads=col("threads"),
        epoch_starts_s=tuple((e.start_ns - t0) / 1e9 for e in epochs),
        epoch_ends_s=tuple((e.end_ns - t0) / 1e9 for e in epochs),
    )


@dataclass(frozen=True)
class EpochEnergy:
    epoch: int
    duration_s: float
    energy_j: float
    mean_power_w: float
    source: str  # "energy counter" (NVML total energy) or "power samples" (integrated)


def epoch_energy(folder: Run) -> list[EpochEnergy]:
    """Energy and mean power of each epoch on the GPUs the run used (those where its processes held
    memory; all sampled GPUs when NVML gave no per-process memory). Energy comes from NVML's total
    energy counter, interpolated at the epoch's start and end; without the counter, from the power
    samples integrated over the epoch. Empty when the run has no GPU samples with either."""
    gpu = folder.samples("gpu")
    epochs = folder.epochs()
    if gpu is None or gpu.num_rows == 0 or not epochs:
        return []
    per_gpu = _split_by_gpu(gpu)
    used = [g for g, cols in per_gpu.items() if np.nanmax(cols[schema.PROC_MEM_MIB], initial=0.0) > 0]
    gpus = used or list(per_gpu)
    out = []
    for e in epochs:
        energy_j = 0.0
        sources = set()
        for g in gpus:
            cols = per_gpu[g]
            value, source = _gpu_energy_j(cols, e.start_ns, e.end_ns)
            if value is None:
                continue
            energy_j += value
            sources.add(source)
        if not sources:
            continue
        out.append(
            EpochEnergy(
                epoch=e.epoch,
                duration_s=e.duration_s,
                energy_j=energy_j,
                mean_power_w=energy_j / e.duration_s if e.duration_s > 0 else 0.0,
                source=" + ".join(sorted(sources)),
            )
        )
    return out


def _split_by_gpu(gpu: pa.Table) -> dict[int, dict[str, np.ndarray]]:
    names = ("t_ns", schema.ENERGY_MJ, schema.POWER_W, schema.PROC_MEM_MIB)
    data = {
        n: np.asarray(gpu.column(n).to_numpy(zero_copy_only=False), dtype=float)
        if n in gpu.column_names
        else np.full(gpu.num_rows, np.nan)
        for n in names
    }
    index = (
        np.asarray(gpu.column("gpu").to_numpy(zero_copy_only=False), dtype=int)
        if "gpu" in gpu.column_names
        else (np.zeros(gpu.num_rows, dtype=int))
    )
    out = {}
    for g in sorted(set(index.tolist())):
        mask = index == g
        order = np.argsort(data["t_ns"][mask], kind="stable")
        out[g] = {n: data[n][mask][order] for n in names}
    return out


def _gpu_energy_j(cols: Mapping[str, np.ndarray], start_ns: int, end_ns: int) -> tuple[float | None, str]:
    t = cols["t_ns"]
    energy = cols[schema.ENERGY_MJ]
    ok = ~np.isnan(energy)
    if ok.sum() >= 2 and t[ok][0] <= start_ns and t[ok][-1] >= end_ns:
        e0, e1 = np.interp([start_ns, end_ns], t[ok], energy[ok])
        return float(e1 - e0) / 1000.0, "energy counter"
    power = cols[schema.POWER_W]
    ok = ~np.isnan(power)
    if ok.sum() < 2 or t[ok][0] > end_ns or t[ok][-1] < start_ns:
        return None, ""
    grid = np.concatenate(([start_ns], t[ok][(t[ok] > start_ns) & (t[ok] < end_ns)], [end_ns])).astype(float)
    watts = np.interp(grid, t[ok], power[ok])
    return float(np.trapezoid(watts, grid / 1e9)), "power samples"


@dataclass(frozen=True)
class ApiShare:
    name: str
    time_pct: float


def cuda_phases(folder: Run) -> dict[str, list[ApiShare]]:
    """The share of CUDA API time per function, per phase ("whole", "steady", ...), as
    `analyzers.summaries.cuda_api.phase_summaries` computes it; empty when the run has no CUDA API trace."""
    from analyzers.trace import tables as trace_tables

    if not trace_tables.present(folder, trace_tables.CUDA_API):
        return {}
    from analyzers.summaries.cuda_api import phase_summaries

    return {
        phase: [ApiShare(row.name, float(row.time_pct)) for row in rows]
        for phase, rows in phase_summaries(folder).items()
        if rows
    }
