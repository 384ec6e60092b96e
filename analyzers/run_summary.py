"""The headline numbers of one run, computed from its folder (never stored: always re-derived)."""

from __future__ import annotations

import socket
import statistics
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import psutil
import pyarrow.compute as pc

from analyzers import steps
from analyzers.arrays import as_array
from analyzers.contention import contention
from analyzers.energy import SourceEnergy, energy, headline
from analyzers.learning import workload_key
from analyzers.steady import WARMUP_EPOCHS, epoch_stats
from tracer.core import schema
from tracer.core.cases import RunKey
from tracer.core.records import EpochRecord, RunRecord, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import KIND, TEGRA_TABLE, Event


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    framework: str
    model: str
    dataset: str
    device: str
    batch: int
    status: str
    cause: str
    epochs_done: int
    epochs_planned: int
    mean_epoch_s: float | None  # over every epoch, warm-up included
    images_per_s: float | None  # over every epoch, warm-up included
    # The headline (analyzers.steady): epochs after the warm-up, the first epoch apart.
    first_epoch_s: float | None
    steady_epoch_s: float | None
    steady_images_per_s: float | None
    steady_epochs: int
    warmup_epochs: int
    steady_includes_warmup: bool  # too few epochs: the steady numbers count every epoch
    # Machine load (analyzers.contention), judged from the samples.
    other_cpu_pct: float | None  # median CPU % of other processes (100 = all cores)
    contended: bool
    data_wait_pct: float | None  # share of all the steps' time spent waiting for batches (analyzers.steps)
    data_wait_pct_by_epoch: tuple[float | None, ...]
    cpu_pct_mean: float | None
    cpu_pct_max: float | None
    cpu_cores_mean: float | None
    peak_rss_mib: float | None
    peak_rss_pct_ram: float | None
    threads_min: int | None
    threads_median: float | None
    threads_max: int | None
    gpu_util_pct_mean: float | None
    gpu_mem_peak_mib: float | None
    samples: int
    trainable_params: int | None
    folder: str
    energy: tuple[SourceEnergy, ...] = ()  # one per source; empty: no energy source
    energy_source: str | None = None  # what the headline figures add up (analyzers.energy.headline)
    energy_j_per_epoch: float | None = None
    energy_j_per_image: float | None = None
    energy_unavailable: tuple[str, ...] = ()  # why each kind of source is absent (from run.json)
    # Seconds spent compiling (frameworks that report `compile` events: JAX), also inside the epoch times.
    compile_s: float | None = None
    imported_from: str = ""  # the trace file of a `tracer import`ed run
    # Whether the speed may be ranked beside other runs (RunRecord.rankable), and why not.
    rankable: bool = True
    not_rankable_why: str = ""
    # Learning (issue 24 item 10): per epoch, the mean training loss (NaN where it diverged) and accuracy.
    loss_by_epoch: tuple[float, ...] = ()
    accuracy_by_epoch: tuple[float | None, ...] = ()
    # The framework's own peak device memory in use (MiB) over the run, beside NVML's gpu_mem_peak_mib.
    device_peak_mib: float | None = None
    device_peak_source: str = ""  # the call it came from, or "not measured: why"
    workload: str = ""  # what decides the learning curve (analyzers.learning.workload_key)
    gpu: str = ""  # the GPU's name, driver and CUDA version from run.json ('' on a machine without one)
    # The data-wait share over the steady epochs' steps: the figure that stands beside steady images/s.
    steady_data_wait_pct: float | None = None
    not_recorded: tuple[str, ...] = ()  # spec fields the run does not know (an import's epochs, maybe its batch)
    data: str = "files"  # --data: files, memory or synthetic (analyzers.pairs pairs runs differing only here)
    decode_s: float | None = None  # --data memory: seconds decoding the set into memory, before the first epoch
    # The steady steps' mean time and data wait per step (ms): what a command's own steps compare on.
    steady_step_ms: float | None = None
    steady_wait_ms: float | None = None
    command: str = ""  # `tracer profile -- COMMAND`: the command (then model, dataset and batch are the script's)
    probes: tuple[str, ...] = ()  # who saw the steps (worker; torch.DataLoader, keras.fit, marker ... in a command)

    @property
    def key(self) -> RunKey:
        """The run's identity (`tracer.core.cases.RunKey`), as its Run, its data pair and its plan cell have it."""
        return RunKey.of(self)


def summarise(folder: RunFolder, warmup: int = WARMUP_EPOCHS) -> RunSummary:
    """The run's summary: a `Run`'s, computed once (`Run.summary`); a bare folder's, computed now."""
    from analyzers.parts import part

    return part(folder, "summary", lambda: compute_summary(folder, warmup), warmup)


def compute_summary(folder: RunFolder, warmup: int = WARMUP_EPOCHS) -> RunSummary:
    """What `Run.summary` holds, computed from the run's parts."""
    record = folder.read_record()
    epochs = folder.epochs()
    steady = epoch_stats(epochs, warmup)
    process = folder.samples("process")
    load = contention(process)
    gpu = folder.samples("gpu")
    cpu = _column(process, schema.CPU_PCT)
    cores = _column(process, schema.CPU_CORES)
    rss = _column(process, schema.RSS_MIB)
    rss_pct = _column(process, schema.RSS_PCT_RAM)
    threads = [int(t) for t in _column(process, "threads") if t > 0]
    # A Jetson has no NVML: its GPU load is tegrastats' GR3D_FREQ.
    gpu_util = _column(gpu, schema.UTIL_PCT) or _column(folder.samples(TEGRA_TABLE), schema.GPU_PCT)
    gpu_mem = _column(gpu, schema.PROC_MEM_MIB) or _column(gpu, schema.MEM_USED_MIB)
    spec = record.spec
    splits = steps.epoch_splits(folder)  # the steps table, read once for the run and per epoch
    sources = energy(folder, epochs)
    top = headline(sources)
    peaks = [e.device_peak_mib for e in epochs if e.device_peak_mib is not None]
    return RunSummary(
        run_id=record.run_id,
        framework=spec.framework,
        model=spec.model,
        dataset=spec.dataset,
        device=spec.device,
        batch=spec.batch,
        status=displayed_status(record),
        cause=record.outcome.cause,
        epochs_done=len(epochs),
        epochs_planned=spec.epochs,
        mean_epoch_s=mean_epoch_s(epochs),
        images_per_s=images_per_s(epochs),
        data_wait_pct=_pct(steps.run_share(splits)),
        steady_data_wait_pct=_pct(steps.share_over(splits, steady.steady_epoch_numbers)),
        data_wait_pct_by_epoch=tuple(_pct(s.data_wait_share) for s in splits),
        first_epoch_s=steady.first_epoch_s,
        steady_epoch_s=steady.steady_epoch_s,
        steady_images_per_s=steady.steady_images_per_s,
        steady_epochs=steady.steady_epochs,
        warmup_epochs=steady.warmup,
        steady_includes_warmup=steady.includes_warmup,
        other_cpu_pct=load.other_cpu_pct,
        contended=load.contended,
        cpu_pct_mean=_mean(cpu),
        cpu_pct_max=max(cpu) if cpu else None,
        cpu_cores_mean=_mean(cores),
        peak_rss_mib=max(rss) if rss else None,
        peak_rss_pct_ram=max(rss_pct) if rss_pct else None,
        threads_min=min(threads) if threads else None,
        threads_median=statistics.median(threads) if threads else None,
        threads_max=max(threads) if threads else None,
        gpu_util_pct_mean=_mean(gpu_util),
        gpu_mem_peak_mib=max(gpu_mem) if gpu_mem else None,
        samples=process.num_rows if process is not None else 0,
        trainable_params=record.model.trainable_params if record.model else None,
        folder=str(folder.path),
        energy=sources,
        energy_source=top.source if top else None,
        energy_j_per_epoch=top.j_per_epoch if top else None,
        energy_j_per_image=top.j_per_image if top else None,
        energy_unavailable=record.environment.energy_unavailable,
        compile_s=compile_seconds(folder.events()),
        imported_from=record.imported.source if record.imported else "",
        rankable=record.rankable,
        not_rankable_why=record.not_rankable_why,
        loss_by_epoch=tuple(e.loss for e in epochs),
        accuracy_by_epoch=tuple(e.accuracy for e in epochs),
        device_peak_mib=max(peaks) if peaks else None,
        device_peak_source=next((e.device_peak_source for e in reversed(epochs) if e.device_peak_source), ""),
        gpu=record.environment.gpu_text,
        workload=workload_key(spec),
        not_recorded=record.imported.not_recorded if record.imported else (),
        data=spec.data,
        decode_s=decode_seconds(folder.events()),
        steady_step_ms=_per_step_ms(splits, steady.steady_epoch_numbers, lambda s: s.total_s),
        steady_wait_ms=_per_step_ms(splits, steady.steady_epoch_numbers, lambda s: s.data_wait_s),
        command=record.command.text if record.command else "",
        probes=steps.probes(folder),
    )


def _per_step_ms(
    splits: list[steps.EpochSplit], epochs: Collection[int], seconds: Callable[[steps.EpochSplit], float]
) -> float | None:
    """The mean over the steps of `epochs` of one part of a step's time (all of it, its data wait), in ms."""
    chosen = [s for s in splits if s.epoch in epochs]
    count = sum(s.steps for s in chosen)
    return 1000 * sum(seconds(s) for s in chosen) / count if count else None


def last_learning(s: RunSummary) -> tuple[float | None, float | None]:
    """The last epoch's loss and accuracy (None where the run has no epoch or no accuracy)."""
    loss = s.loss_by_epoch[-1] if s.loss_by_epoch else None
    accuracy = s.accuracy_by_epoch[-1] if s.accuracy_by_epoch else None
    return loss, accuracy


def compile_seconds(events: list[dict[str, object]]) -> float | None:
    """The sum of the worker's `compile` spans; None when it reported none (it does not compile ahead)."""
    spans = [float(e["seconds"]) for e in events if e.get(KIND) == Event.COMPILE and e.get("state") == "end"]  # type: ignore[arg-type]
    return sum(spans) if spans else None


def decode_seconds(events: list[dict[str, object]]) -> float | None:
    """--data memory's decode (its `decode` end event); None for a run that decoded nothing ahead."""
    spans = [float(e["seconds"]) for e in events if e.get(KIND) == Event.DECODE and e.get("state") == "end"]  # type: ignore[arg-type]
    return sum(spans) if spans else None


def displayed_status(record: RunRecord) -> str:
    """A folder still saying `running` whose tracer is gone on this host was abandoned (the tracer
    itself was killed): its samples are readable, but nobody will finish it."""
    status = record.outcome.status.value
    if record.outcome.status is not RunStatus.RUNNING or record.tracer_pid is None:
        return status
    if record.environment.hostname != socket.gethostname():
        return status
    return status if _tracer_alive(record.tracer_pid, record.wall_start_ns) else "abandoned"


PID_LIMIT = 1 << 22
"""Linux never hands out a pid above this (`/proc/sys/kernel/pid_max` is at most 2^22): one beyond is damage."""
START_SLACK_S = 5.0
"""A tracer starts before its run's wall-clock start; a process born more than this after it is another one."""


def _tracer_alive(pid: int, wall_start_ns: int) -> bool:
    """Whether the run's tracer is still this live process: its pid exists and was not handed to a
    process started after the run (pids are reused)."""
    if not 0 < pid < PID_LIMIT:
        return False
    try:
        born_s = psutil.Process(pid).create_time()
    except (psutil.Error, OverflowError, ValueError):
        return False
    return not (wall_start_ns > 0 and born_s > wall_start_ns / 1e9 + START_SLACK_S)


def mean_epoch_s(epochs: list[EpochRecord]) -> float | None:
    return statistics.fmean(e.duration_s for e in epochs) if epochs else None


def images_per_s(epochs: list[EpochRecord]) -> float | None:
    seconds = sum(e.duration_s for e in epochs)
    return sum(e.images for e in epochs) / seconds if seconds > 0 else None


def _column(table: object, name: str) -> list[float]:
    if table is None or name not in table.column_names:  # type: ignore[attr-defined]
        return []
    col = pc.drop_null(table.column(name))  # type: ignore[attr-defined]
    return as_array(col, np.float64).tolist()  # through NumPy: to_pylist made a million objects one by one


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(share: float | None) -> float | None:
    return None if share is None else 100.0 * share
