"""How one run measures each metric `tracer gate` judges (`gate_metrics.GATE_METRICS`), with the samples
its own noise is read from: blocks of its steady steps, or its steady epochs (a run of one steady epoch reads
its epoch time's noise from its steps' blocks, scaled to the epoch: the epoch is those steps).

Every figure is of the steady state (the headline's epochs; an imported trace's steps, all of them, as
`diff` counts them). The metrics a run does not measure (an import has no sampler, a CPU run no GPU) are
absent, never zero. MFU is read from the run's summary where the summary has it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.figures.run_summary import RunSummary, summarise
from analyzers.figures.steady import WARMUP_EPOCHS, epoch_stats
from analyzers.figures.steps import steps_table
from analyzers.run.run import Run
from analyzers.trace.arrays import as_array
from tracer.core import schema

"""The RunSummary field the MFU metric reads (model FLOP utilisation, %), where the summary has it."""
STEP_BLOCKS, MIN_BLOCK_STEPS = 4, 2
"""A run's steps are read for noise in up to STEP_BLOCKS runs of consecutive steps (MIN_BLOCK_STEPS at least
each), each block's figure summed as the run's is: a single step's range would let one burst (a loader
refilling its queue, a collection) hide any change, and the blocks vary as the run's mean does."""
BLOCKS = "blocks of steps"


@dataclass(frozen=True)
class Measure:
    """One run's value of one metric, what it is per (`basis`: two runs compare only on one basis) and the
    samples inside the run it is the aggregate of (per step or per steady epoch; empty: a single figure)."""

    value: float
    basis: str
    samples: tuple[float, ...] = ()
    samples_of: str = ""  # BLOCKS or "epochs"


def measure(folder: Run, warmup: int = WARMUP_EPOCHS) -> dict[str, Measure]:
    """Every gate metric the run measures, by key."""
    summary = (
        summarise(Run.open(folder, warmup)) if folder.run_json.exists() else None
    )  # a trace analysed in place: none
    out: dict[str, Measure] = {}
    steps = _steady_steps(folder, warmup)
    if steps is not None:
        wait, total, images = steps
        blocks = np.array_split(np.arange(len(total)), max(1, min(STEP_BLOCKS, len(total) // MIN_BLOCK_STEPS)))
        if total.sum() > 0:
            shares = [100 * wait[b].sum() / total[b].sum() for b in blocks if total[b].sum() > 0]
            out["data_wait"] = Measure(100 * wait.sum() / total.sum(), "% of the step", _tuple(shares), BLOCKS)
        if len(images) and (images > 0).all():
            per_image = [1000 * total[b].sum() / images[b].sum() for b in blocks]
            out["step_time"] = Measure(1000 * total.sum() / images.sum(), "per image", _tuple(per_image), BLOCKS)
        elif len(total):
            per_step = [1000 * total[b].mean() for b in blocks]
            out["step_time"] = Measure(1000 * total.mean(), "per step (no images recorded)", _tuple(per_step), BLOCKS)
    api = _api_ms_per_image(folder, warmup)
    if api is not None:
        out["cuda_api"] = api
    if summary is not None:
        out |= _from_summary(folder, summary, out.get("step_time"), warmup)
    return out


def _from_summary(folder: Run, summary: RunSummary, step: Measure | None, warmup: int) -> dict[str, Measure]:
    """The metrics of the run's summary: epoch time and images/s (with their epochs' or steps' noise),
    memory, utilisation, MFU."""
    out = {}
    epochs = [e for e in folder.epochs() if e.epoch in epoch_stats(folder.epochs(), warmup).steady_epoch_numbers]
    times, rates, over = [e.duration_s for e in epochs], [e.images / e.duration_s for e in epochs], "epochs"
    if len(epochs) < 2 and step is not None and step.value > 0:  # one steady epoch: its steps' noise, scaled
        times, over = (
            [(summary.steady_epoch_s or 0.0) * x / step.value for x in step.samples],
            f"{BLOCKS} scaled to the epoch",
        )
        rates = [(summary.steady_images_per_s or 0.0) * step.value / x for x in step.samples if x > 0]
    if summary.steady_epoch_s is not None:  # epochs of other sizes (another --limit) do not compare
        size = f"per epoch of {epochs[0].images:,} images" if len({e.images for e in epochs}) == 1 else "per epoch"
        out["epoch_time"] = Measure(summary.steady_epoch_s, size, _tuple(times), over)
    if summary.steady_images_per_s is not None:
        out["images_per_s"] = Measure(summary.steady_images_per_s, "images/s", _tuple(rates), over)
    for key, value in (
        ("peak_rss", summary.peak_rss_mib),
        ("gpu_memory", summary.gpu_mem_peak_mib),
        ("gpu_util", summary.gpu_util_pct_mean),
    ):
        if value is not None:
            out[key] = Measure(float(value), "steady")
    mfu, rate = summary.utilisation.mfu_pct, out.get("images_per_s")
    if mfu is not None:  # the model's FLOPs at the run's speed: images/s's noise, scaled (the same numbers)
        scaled = _tuple(mfu * r / rate.value for r in rate.samples) if rate is not None and rate.value > 0 else ()
        out["mfu"] = Measure(mfu, "steady", scaled, rate.samples_of if rate is not None and scaled else "")
    return out


def contended(folder: Run, warmup: int = WARMUP_EPOCHS) -> bool:
    """Whether other processes held the machine while the run trained (analyzers.figures.contention); a trace
    analysed in place (no run.json) has no samples to tell."""
    return folder.run_json.exists() and summarise(Run.open(folder, warmup)).contended


def _tuple(values: object) -> tuple[float, ...]:
    return tuple(float(v) for v in values)  # type: ignore[attr-defined]


def _steady_steps(folder: Run, warmup: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(data wait s, step s, images) per steady step of rank 0, as `diff` counts them: the steady epochs'
    steps, or every step of a run with steps and no epochs; None without steps."""
    table = steps_table(folder)
    if table is None:
        return None
    stats = epoch_stats(folder.epochs(), warmup)
    if stats.epochs:
        table = table.filter(pc.is_in(table["epoch"], pa.array(list(stats.steady_epoch_numbers), pa.int64())))
    if schema.RANK in table.column_names:
        table = table.filter(pc.equal(table[schema.RANK].fill_null(0), 0))
    if table.num_rows == 0:
        return None
    table = table.sort_by("start_ns")

    def column(name: str) -> np.ndarray:
        return np.nan_to_num(as_array(table.column(name), np.float64), nan=0.0)

    wait = column(schema.DATA_WAIT_S)
    return wait, wait + column(schema.COMPUTE_S) + column(schema.SYNC_S), column("images")


def _api_ms_per_image(folder: Run, warmup: int) -> Measure | None:
    """CUDA API time per image over the steady epochs the trace covers (a trace window covers some), or over
    the whole trace per image of its steps (an import has no epochs); None without an API trace or images."""
    from analyzers.summaries.cuda_api import phase_summaries
    from analyzers.trace import tables as t

    if not t.present(folder, t.CUDA_API):
        return None
    phases = phase_summaries(Run.open(folder, warmup))
    epochs = {e.epoch: e for e in folder.epochs()}
    steady = epoch_stats(list(epochs.values()), warmup).steady_epoch_numbers
    per_epoch = []  # (API ms, images) of each steady epoch the trace covers
    for number in steady:
        rows = phases.get(f"epoch {number}") or []
        if rows and epochs[number].images:
            per_epoch.append((sum(r.total_ns for r in rows) / 1e6, epochs[number].images))
    if per_epoch:
        value = sum(ms for ms, _ in per_epoch) / sum(n for _, n in per_epoch)
        return Measure(value, "per image, traced steady epochs", _tuple(ms / n for ms, n in per_epoch), "epochs")
    if epochs:
        return None
    steps = _steady_steps(folder, warmup)
    images = 0 if steps is None else int(steps[2].sum())
    whole = phases.get("whole") or []
    if not images or not whole:
        return None
    return Measure(sum(r.total_ns for r in whole) / 1e6 / images, "per image, the whole trace")
