"""Every per-run figure on one basis, computed once per phase: the steady state (the headline) and the
whole run (shown only where a row or column names it).

A figure shown beside steady images/s must cover the same epochs: JAX's 44 s compile epoch made its
whole-run GPU utilisation and energy per epoch look 4x PyTorch's when, over the steady epochs, JAX used
less energy. So each figure (throughput, data wait, CPU, RSS, threads, GPU utilisation and memory,
power, energy, temperatures) exists per phase here, `FIGURES` declares each one's name, unit and format
once, and every surface (`show`, `compare`, `runs`, Tables 1-2, the report's figures, the notebook frame,
the viewer's run browser) takes its rows from it. The steady phase holds the samples from the first
steady epoch's start to the last epoch's end (`analyzers.figures.phases`); its energy is the steady epochs'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.figures import steps as step_tables
from analyzers.figures.energy import SourceEnergy, headline
from analyzers.figures.phases import STEADY, WHOLE, Phase
from analyzers.trace.arrays import as_array
from tracer.core import schema
from tracer.core.records import EpochRecord

WHOLE_RUN = "whole run"  # the words a row or column of a whole-run figure carries
WHOLE_RUN_PREFIX = "whole_run_"  # the prefix of a whole-run column in a frame or CSV (the notebook's)
PHASE_WORDS = {STEADY: "steady", WHOLE: WHOLE_RUN}


@dataclass(frozen=True)
class Figure:
    """One per-run figure: the PhaseFigures field, its words, unit and print format."""

    name: str
    label: str
    unit: str
    spec: str = ".3g"
    gpu: bool = False  # only meaningful on a GPU run
    timed: bool = True  # depends on the machine's load: a contended run's is not ordered (analyzers.figures.noise)
    speed: bool = False  # a speed runs are ranked by: closer than analyzers.figures.noise.MIN_DIFFERENCE is not ordered


FIGURES: tuple[Figure, ...] = (
    Figure("images_per_s", "images/s", "img/s", ".1f", speed=True),
    Figure("epoch_s", "epoch time", "s", ".3f", speed=True),
    Figure("data_wait_pct", "data-wait share of step time", "%", ".1f"),
    Figure("cpu_pct_mean", "CPU % mean (100 = all cores)", "%", ".1f"),
    Figure("cpu_pct_max", "CPU % max", "%", ".1f"),
    # PSS first: a shared page counted once, as the tree's memory; RSS summed counts forked workers' shared pages
    # in each process (1,473 MiB summed against 563 MiB by PSS for four loader workers).
    Figure("peak_pss_mib", "peak PSS (shared pages counted once)", "MiB", ".0f", timed=False),
    Figure("peak_rss_mib", "peak RSS summed over processes", "MiB", ".0f", timed=False),
    Figure("peak_rss_pct_ram", "peak RSS % of RAM", "%", ".1f", timed=False),
    Figure("threads_median", "threads median", "threads", ".0f", timed=False),
    Figure("threads_max", "threads max", "threads", ".0f", timed=False),
    Figure("gpu_util_pct_mean", "GPU utilisation mean", "%", ".1f", gpu=True),
    Figure("gpu_mem_peak_mib", "GPU memory peak, NVML (what the process holds)", "MiB", ".0f", gpu=True, timed=False),
    Figure(
        "framework_mem_peak_mib", "GPU memory peak, the framework's own (in use)", "MiB", ".0f", gpu=True, timed=False
    ),
    Figure("power_w_mean", "GPU power mean", "W", ".0f", gpu=True),
    Figure("energy_j_per_epoch", "energy per epoch", "J", ".0f"),
    Figure("energy_j_per_image", "energy per image", "J", ".3g"),
    Figure("gpu_temp_c_max", "GPU temperature max", "°C", ".0f", gpu=True, timed=False),
    Figure("board_temp_c_max", "board temperature max", "°C", ".0f", timed=False),
)
FIGURE_BY_NAME = {f.name: f for f in FIGURES}


@dataclass(frozen=True)
class PhaseFigures:
    """The figures of one phase of one run; None where the run did not measure it."""

    phase: str  # analyzers.figures.phases.STEADY or WHOLE
    epochs: tuple[int, ...] = ()
    images_per_s: float | None = None
    epoch_s: float | None = None  # mean epoch time over the phase's epochs
    data_wait_pct: float | None = None  # the phase's steps: wait over (wait + compute + sync)
    cpu_pct_mean: float | None = None  # 100 = all logical cores
    cpu_pct_max: float | None = None
    cpu_cores_mean: float | None = None
    peak_rss_mib: float | None = None
    peak_rss_pct_ram: float | None = None
    peak_pss_mib: float | None = None  # None where the sampler had no PSS (not Linux, a run before it)
    threads_min: int | None = None
    threads_median: float | None = None
    threads_max: int | None = None
    gpu_util_pct_mean: float | None = None  # NVML (a Jetson: tegrastats' GR3D)
    gpu_mem_peak_mib: float | None = None  # NVML: what the process holds (else the GPU's used memory)
    framework_mem_peak_mib: float | None = None  # the framework's own peak in use over the phase's epochs
    power_w_mean: float | None = None  # the used GPUs' power, summed, mean over the phase's samples
    energy_j_per_epoch: float | None = None  # analyzers.figures.energy.headline over the phase's epochs
    energy_j_per_image: float | None = None
    energy_source: str | None = None
    energy: tuple[SourceEnergy, ...] = field(default=())  # each source over the phase's epochs
    gpu_temp_c_max: float | None = None
    board_temp_c_max: float | None = None  # a Jetson's temperature sensors
    samples: int = 0  # process samples inside the phase

    @property
    def words(self) -> str:
        """'steady' or 'whole run': what a row or column of this phase is named with."""
        return PHASE_WORDS.get(self.phase, self.phase)

    def value(self, name: str) -> float | None:
        v = getattr(self, name)
        return None if v is None else float(v)


@dataclass(frozen=True)
class Tables:
    """A run's sample tables, read once, that the figures are cut from."""

    process: pa.Table | None
    gpu: pa.Table | None
    tegra: pa.Table | None
    temps: pa.Table | None


def phase_figures(
    phase: Phase,
    epochs: Sequence[EpochRecord],
    tables: Tables,
    splits: Sequence[step_tables.EpochSplit],
    energy: Sequence[SourceEnergy],
) -> PhaseFigures:
    """The figures of `phase` (its epochs: `phase.epochs`; its samples: those `phase.holds`)."""
    numbers = set(phase.epochs) if phase.name != WHOLE else {e.epoch for e in epochs}
    mine = [e for e in epochs if e.epoch in numbers]
    seconds = sum(e.duration_s for e in mine)
    process = _inside(tables.process, phase)
    cpu = _col(process, schema.CPU_PCT)
    rss = _col(process, schema.RSS_MIB)
    rss_pct = _col(process, schema.RSS_PCT_RAM)
    threads = _col(process, "threads")
    threads = threads[threads > 0]
    gpu = _inside(tables.gpu, phase)
    util = _col(gpu, schema.UTIL_PCT)
    if not util.size:
        util = _col(_inside(tables.tegra, phase), schema.GPU_PCT)
    mem = _col(gpu, schema.PROC_MEM_MIB)
    if not mem.size:
        mem = _col(gpu, schema.MEM_USED_MIB)
    index = [i for i, e in enumerate(epochs) if e.epoch in numbers]
    sources = tuple(
        SourceEnergy(s.source, tuple(s.epoch_j[i] for i in index if i < len(s.epoch_j)),
                     tuple(s.epoch_images[i] for i in index if i < len(s.epoch_images)))
        for s in energy
    )  # fmt: skip
    top = headline(sources)
    own = [e.device_peak_mib for e in mine if e.device_peak_mib is not None]
    wait = step_tables.share_over(list(splits), numbers)
    return PhaseFigures(
        phase=phase.name,
        epochs=tuple(sorted(numbers)),
        images_per_s=_rate(sum(e.images for e in mine), seconds),  # 0 images: not counted (a command)
        epoch_s=seconds / len(mine) if mine else None,
        data_wait_pct=None if wait is None else 100.0 * wait,
        cpu_pct_mean=_mean(cpu),
        cpu_pct_max=_max(cpu),
        cpu_cores_mean=_mean(_col(process, schema.CPU_CORES)),
        peak_rss_mib=_max(rss),
        peak_rss_pct_ram=_max(rss_pct),
        peak_pss_mib=_max(_col(process, schema.PSS_MIB)),
        threads_min=int(threads.min()) if threads.size else None,
        threads_median=float(np.median(threads)) if threads.size else None,
        threads_max=int(threads.max()) if threads.size else None,
        gpu_util_pct_mean=_mean(util),
        gpu_mem_peak_mib=_max(mem),
        framework_mem_peak_mib=max(own) if own else None,
        power_w_mean=_power(gpu),
        energy_j_per_epoch=top.j_per_epoch if top else None,
        energy_j_per_image=top.j_per_image if top else None,
        energy_source=top.source if top else None,
        energy=sources,
        gpu_temp_c_max=_max(_col(gpu, schema.TEMP_C)),
        board_temp_c_max=_max(_col(_inside(tables.temps, phase), schema.TEMP_C)),
        samples=process.num_rows if process is not None else 0,
    )


def _inside(table: pa.Table | None, phase: Phase) -> pa.Table | None:
    """The rows whose t_ns the phase holds (every row for the whole run)."""
    if table is None or phase.name == WHOLE or "t_ns" not in table.column_names:
        return table
    t = table.column("t_ns")
    keep = None
    if phase.start_ns is not None:
        keep = pc.greater_equal(t, phase.start_ns)
    if phase.end_ns is not None:
        below = pc.less_equal(t, phase.end_ns)
        keep = below if keep is None else pc.and_(keep, below)
    return table if keep is None else table.filter(keep)


def _col(table: pa.Table | None, name: str) -> np.ndarray:
    if table is None or name not in table.column_names:
        return np.array([], dtype=np.float64)
    values = as_array(pc.drop_null(table.column(name)), np.float64)
    return values[~np.isnan(values)]


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _max(values: np.ndarray) -> float | None:
    return float(values.max()) if values.size else None


def _power(gpu: pa.Table | None) -> float | None:
    """The mean power of the GPUs the run used (those where its process held memory), summed."""
    if gpu is None or schema.POWER_W not in gpu.column_names or gpu.num_rows == 0:
        return None
    index = as_array(pc.fill_null(gpu.column("gpu"), 0), np.float64) if "gpu" in gpu.column_names else None
    power = as_array(pc.fill_null(gpu.column(schema.POWER_W), np.nan), np.float64)
    held = (
        as_array(pc.fill_null(gpu.column(schema.PROC_MEM_MIB), 0.0), np.float64)
        if schema.PROC_MEM_MIB in gpu.column_names
        else np.zeros(len(power))
    )
    gpus = np.zeros(len(power)) if index is None else index
    used = {g for g in np.unique(gpus) if (held[gpus == g] > 0).any()} or set(np.unique(gpus))
    means = [np.nanmean(power[gpus == g]) for g in used if (~np.isnan(power[gpus == g])).any()]
    return float(sum(means)) if means else None


def figures_text(figures: PhaseFigures, names: Sequence[str] = ()) -> str:
    """'images/s 49.9, epoch time 15.852 s, ...': the figures the phase measured (`names`: those only),
    each with its unit; '-' when it measured none."""
    parts = []
    for f in FIGURES:
        value = figures.value(f.name)
        if value is None or (names and f.name not in names):
            continue
        unit = "" if f.unit in ("threads", "img/s") else f" {f.unit}" if f.unit != "%" else " %"
        parts.append(f"{f.label} {format(value, f.spec)}{unit}")
    return ", ".join(parts) or "-"


def _rate(images: int, seconds: float) -> float | None:
    """Images per second; None where no image was counted (a command's optimizer-counted steps)."""
    return images / seconds if seconds > 0 and images > 0 else None
