"""The headline numbers of one run, computed from its folder (never stored: always re-derived)."""

from __future__ import annotations

import socket
import statistics
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import psutil

from analyzers.figures import basis, probe_missed, steps
from analyzers.figures.basis import PhaseFigures
from analyzers.figures.contention import run_contention
from analyzers.figures.energy import SourceEnergy, energy
from analyzers.figures.learning import workload_key
from analyzers.figures.phase_cuts import run_phases
from analyzers.figures.phases import STEADY, WHOLE, Phase
from analyzers.figures.steady import epoch_stats
from analyzers.figures.utilisation import Utilisation, utilisation
from analyzers.run.memo import per_run
from analyzers.run.run import Run
from tracer.core.cases import RunKey
from tracer.core.records import EpochRecord, RunRecord, RunStatus
from tracer.core.runfolder import partial_epochs
from tracer.core.schema import KIND, TEGRA_TABLE, TEMPS_TABLE, Event
from tracer.core.workload import Known


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    framework: str
    model: str
    dataset: str
    device: str
    batch: int | None  # None: not recorded (an import without it; a command's batch is its own)
    status: str
    cause: str
    epochs_done: int
    epochs_planned: int | None  # None: not recorded (an import; a command's own loop)
    mean_epoch_s: float | None  # over every epoch, warm-up included
    images_per_s: float | None  # over every epoch, warm-up included
    # The headline (analyzers.figures.steady): epochs after the warm-up, the first epoch apart.
    first_epoch_s: float | None
    steady_epoch_s: float | None
    steady_images_per_s: float | None
    steady_epochs: int
    warmup_epochs: int
    steady_includes_warmup: bool  # too few epochs: the steady numbers count every epoch
    # Machine load (analyzers.figures.contention), judged from the samples.
    other_cpu_pct: float | None  # median CPU % of other processes (100 = all cores)
    contended: bool
    data_wait_pct_by_epoch: tuple[float | None, ...]
    samples: int
    trainable_params: int | None
    folder: str
    energy: tuple[SourceEnergy, ...] = ()  # one per source; empty: no energy source
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
    device_peak_source: str = ""  # the call it came from, or "not measured: why"
    workload: str = ""  # what decides the learning curve (analyzers.figures.learning.workload_key)
    gpu: str = ""  # the GPU's name, driver and CUDA version from run.json ('' on a machine without one)
    not_recorded: tuple[str, ...] = ()  # spec fields the run does not know (an import's epochs, maybe its batch)
    # --data: files, memory or synthetic (analyzers.comparison.pairs pairs runs differing only here)
    data: str = "files"
    decode_s: float | None = None  # --data memory: seconds decoding the set into memory, before the first epoch
    # The steady steps' mean time and data wait per step (ms): what a command's own steps compare on.
    steady_step_ms: float | None = None
    steady_wait_ms: float | None = None
    command: str = ""  # `tracer profile -- COMMAND`: the command (then model, dataset and batch are the script's)
    # A data-parallel run: each rank's steady images/s (the epochs' wall time is rank 0's; every rank's
    # images over it), so the job's is their sum; empty for a run of one rank.
    rank_images_per_s: tuple[float, ...] = ()
    probes: tuple[str, ...] = ()  # who saw the steps (worker; torch.DataLoader, keras.fit, marker ... in a command)
    # A command's steady epochs, per epoch: wall time outside every step (loop work, a pipeline's tail), in ms.
    steady_between_ms: float | None = None
    partial_epochs: tuple[tuple[int, int], ...] = ()  # (epoch, steps) of epochs left before their end, left out
    #: A command run whose probe was on but never started in any of its Python processes (no interpreter seen).
    probe_never_loaded: bool = False
    #: Why the probe did not load where it did not (`analyzers.figures.probe_missed`): the command, its children.
    probe_missed: tuple[str, ...] = ()
    # Every resource figure per phase (analyzers.figures.basis): the steady state is the headline (the properties
    # below read it); the whole run only where a row or column is named for it.
    steady: PhaseFigures = PhaseFigures(STEADY)
    whole: PhaseFigures = PhaseFigures(WHOLE)
    # FLOPs, achieved FLOP/s and MFU against the device's peak (analyzers.figures.utilisation), steady and whole.
    utilisation: Utilisation = Utilisation()

    # The headline figures: the steady state's, so they stand beside steady images/s.
    @property
    def data_wait_pct(self) -> float | None:
        return self.steady.data_wait_pct

    @property
    def steady_data_wait_pct(self) -> float | None:
        return self.steady.data_wait_pct

    @property
    def cpu_pct_mean(self) -> float | None:
        return self.steady.cpu_pct_mean

    @property
    def cpu_pct_max(self) -> float | None:
        return self.steady.cpu_pct_max

    @property
    def cpu_cores_mean(self) -> float | None:
        return self.steady.cpu_cores_mean

    @property
    def peak_rss_mib(self) -> float | None:
        return self.steady.peak_rss_mib

    @property
    def peak_rss_pct_ram(self) -> float | None:
        return self.steady.peak_rss_pct_ram

    @property
    def peak_pss_mib(self) -> float | None:
        return self.steady.peak_pss_mib

    @property
    def threads_min(self) -> int | None:
        return self.steady.threads_min

    @property
    def threads_median(self) -> float | None:
        return self.steady.threads_median

    @property
    def threads_max(self) -> int | None:
        return self.steady.threads_max

    @property
    def gpu_util_pct_mean(self) -> float | None:
        return self.steady.gpu_util_pct_mean

    @property
    def gpu_mem_peak_mib(self) -> float | None:
        return self.steady.gpu_mem_peak_mib

    @property
    def device_peak_mib(self) -> float | None:
        return self.steady.framework_mem_peak_mib

    @property
    def energy_source(self) -> str | None:
        return self.steady.energy_source

    @property
    def energy_j_per_epoch(self) -> float | None:
        return self.steady.energy_j_per_epoch

    @property
    def energy_j_per_image(self) -> float | None:
        return self.steady.energy_j_per_image

    @property
    def key(self) -> RunKey:
        """The run's identity (`tracer.core.cases.RunKey`), as its Run, its data pair and its plan cell have it."""
        return RunKey.of(self)


@per_run
def summarise(run: Run) -> RunSummary:
    """The run's headline numbers over its steady epochs (the run's warm-up left out), computed once per run."""
    record = run.read_record()
    epochs = run.epochs()
    steady = epoch_stats(epochs, run.warmup)
    process = run.samples("process")
    load = run_contention(run)
    spec, known = record.spec, Known.of(record.workload)
    splits = steps.epoch_splits(run)  # the steps table, read once for the run and per epoch
    sources = energy(run, epochs)
    cut = run_phases(run)
    sampled = basis.Tables(process, run.samples("gpu"), run.samples(TEGRA_TABLE), run.samples(TEMPS_TABLE))
    whole = basis.phase_figures(cut.get(WHOLE) or Phase(WHOLE, None, None), epochs, sampled, splits, sources)
    steady_phase = cut.steady
    figures = (
        basis.phase_figures(steady_phase, epochs, sampled, splits, sources)
        if steady_phase is not None
        else PhaseFigures(STEADY)
    )
    steady_step_ms = _per_step_ms(splits, steady.steady_epoch_numbers, lambda s: s.total_s)
    return RunSummary(
        run_id=run.run_id,  # the run's name: a copied or renamed run is known by it
        framework=record.measurement.framework,
        model=known.model,
        dataset=known.dataset,
        device=record.measurement.device,
        batch=known.batch,
        status=displayed_status(record),
        cause=record.outcome.cause,
        epochs_done=len(epochs),
        epochs_planned=known.epochs,
        mean_epoch_s=mean_epoch_s(epochs),
        images_per_s=images_per_s(epochs),
        data_wait_pct_by_epoch=tuple(_pct(s.data_wait_share) for s in splits),
        first_epoch_s=steady.first_epoch_s,
        steady_epoch_s=steady.steady_epoch_s,
        steady_images_per_s=steady.steady_images_per_s,
        steady_epochs=steady.steady_epochs,
        warmup_epochs=steady.warmup,
        steady_includes_warmup=steady.includes_warmup,
        other_cpu_pct=load.other_cpu_pct,
        contended=load.contended,
        samples=process.num_rows if process is not None else 0,
        trainable_params=record.model.trainable_params if record.model else None,
        folder=str(run.path),
        energy=sources,
        energy_unavailable=record.environment.energy_unavailable,
        compile_s=compile_seconds(run.events()),
        imported_from=record.imported.source if record.imported else "",
        rankable=record.rankable,
        not_rankable_why=record.not_rankable_why,
        loss_by_epoch=tuple(e.loss for e in epochs),
        accuracy_by_epoch=tuple(e.accuracy for e in epochs),
        device_peak_source=next((e.device_peak_source for e in reversed(epochs) if e.device_peak_source), ""),
        gpu=record.environment.gpu_text,
        workload=workload_key(spec) if spec else "",
        not_recorded=record.imported.not_recorded if record.imported else (),
        data=spec.data if spec else "",  # "": not recorded (a command feeds itself, an import says nothing)
        decode_s=decode_seconds(run.events()),
        steady=figures,
        whole=whole,
        steady_step_ms=steady_step_ms,
        steady_wait_ms=_per_step_ms(
            [s for s in splits if s.wait_measured], steady.steady_epoch_numbers, lambda s: s.data_wait_s
        ),
        command=record.command.text if record.command else "",
        probes=steps.probes(run),
        steady_between_ms=_between_ms(run, steady.steady_epoch_numbers) if record.command else None,
        partial_epochs=tuple(partial_epochs(run.events())),
        rank_images_per_s=_rank_rates(run, steady.steady_epoch_numbers, steady.steady_images_per_s),
        utilisation=utilisation(
            record,
            run.events(),
            steady.steady_images_per_s,
            images_per_s(epochs),
            steady_step_ms,
            _rank_steps(run),
            run.path / "raw" / Path(record.imported.source).name if record.imported else None,
        ),
        probe_never_loaded=probe_missed.never_loaded(record),
        probe_missed=probe_missed.missed(record, run.events()) if record.command else (),
    )


def _rank_steps(folder: Run) -> list[tuple[int, float | None]]:
    """Each rank's mean steady step (s) of a run of several ranks; none for one process."""
    from analyzers.figures.ranks import rank_table

    table = rank_table(folder) if folder.read_record().world_size > 1 else None
    return [(r.rank, r.step_mean_s) for r in table.rows] if table else []


def _between_ms(folder: Run, epochs: Collection[int]) -> float | None:
    """The mean over `epochs` of each epoch's time outside its steps (`steps.between_steps`), in ms."""
    values = [v for e, v in steps.between_steps(folder).items() if e in epochs]
    return 1000 * statistics.fmean(values) if values else None


def _rank_rates(folder: Run, epochs: Collection[int], rank0_per_s: float | None) -> tuple[float, ...]:
    """Each rank's steady images/s: rank 0's (from the epochs' wall time) scaled by the images each rank
    took in the same steady epochs (the ranks step together: their epochs span the same wall time)."""
    images = steps.images_by_rank(folder, epochs)
    if not images or rank0_per_s is None or not images.get(0):
        return ()
    return tuple(rank0_per_s * images[r] / images[0] for r in sorted(images))


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
        process = psutil.Process(pid)
        born_s = process.create_time()
        if pid == 1 and not any("tracer" in part for part in process.cmdline()):
            return False  # the init process, born before every run: a tracer only as a container's entrypoint
    except (psutil.Error, OverflowError, ValueError):
        return False
    return not (wall_start_ns > 0 and born_s > wall_start_ns / 1e9 + START_SLACK_S)


def mean_epoch_s(epochs: list[EpochRecord]) -> float | None:
    return statistics.fmean(e.duration_s for e in epochs) if epochs else None


def images_per_s(epochs: list[EpochRecord]) -> float | None:
    seconds, images = sum(e.duration_s for e in epochs), sum(e.images for e in epochs)
    return images / seconds if seconds > 0 and images > 0 else None  # 0 images: not counted


def _pct(share: float | None) -> float | None:
    return None if share is None else 100.0 * share
