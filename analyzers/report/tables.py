"""Table 1 (CPU) and Table 2 (GPU) of the study: one row per case and framework, from run folders.

A row pools the repeats of one spec (`analyzers.figures.repeats.pool`: the whole spec, trace backend and knobs
included, alike) of one framework on one case (model, dataset, device, batch): each rankable run's
steady state (the epochs after its warm-up, `analyzers.figures.phases`), then the median and range over the
runs; the first epoch is a column of its own. The report's throughput figure draws the same pools
(`case_pools`), so figure and table agree. A case whose runs all failed or diverged is kept, with its cause.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

from analyzers.figures.basis import WHOLE_RUN_PREFIX
from analyzers.figures.energy import NO_SOURCE
from analyzers.figures.noise import disagree, disagreement
from analyzers.figures.phases import STEADY
from analyzers.figures.repeats import Pool, pool
from analyzers.figures.run_summary import summarise
from analyzers.figures.steady import WARMUP_EPOCHS, Spread, definition
from analyzers.render import palette
from analyzers.report.runs import LoadedRun, by_case
from tracer.core import output as out_file
from tracer.core.records import RunSpec
from tracer.core.workload import Known


@dataclass(frozen=True)
class TableRow:
    framework: str
    model: str
    dataset: str
    device: str
    batch: int
    case: str
    status: str  # "ok" when at least one run finished, else the newest run's status
    runs_ok: int
    runs_failed: int
    runs_contended: int  # ok runs taken while other processes held a share of the CPU (analyzers.figures.contention)
    epochs: int  # epochs of the ok runs, warm-up included
    warmup_epochs: int
    steady_epoch_s: float | None  # median over the ok runs of each one's steady mean epoch time
    steady_epoch_s_min: float | None
    steady_epoch_s_max: float | None
    steady_images_per_s: float | None  # median over the ok runs of each one's steady images/s
    steady_images_per_s_min: float | None
    steady_images_per_s_max: float | None
    first_epoch_s: float | None  # median over the ok runs
    steady_includes_warmup: bool  # some run had no epoch after its warm-up: its steady numbers count it
    data_wait_pct: float | None  # median over the runs of the steady steps' share waiting for data
    cpu_pct_mean: float | None  # 100 = all logical cores; this and every figure below: the steady state
    peak_rss_mib: float | None
    gpu_util_pct_mean: float | None
    gpu_mem_nvml_mib: float | None  # NVML's memory of the process (what its allocator holds), max over the runs
    gpu_mem_framework_mib: float | None  # the framework's own peak in use, max over the runs
    energy_j_per_epoch: float | None  # analyzers.figures.energy.headline, mean over the finished runs
    energy_j_per_image: float | None
    energy_source: str  # what the energy figures add up, or "no energy source"
    cause: str  # why the newest failed run failed
    run_ids: str  # space-separated
    settings: str = ""  # what else defines the runs (images used, size, epochs...): rows never pool unlike runs
    imported: bool = False  # a `tracer import`ed GPU trace: CUDA API and kernels, no epochs or samples
    left_out: str = ""  # runs kept out of the median and why (diverged, failed ...), '; '-separated
    gpu: str = ""  # the GPU's name, driver and CUDA version from run.json
    # --data of the runs (files, memory, synthetic): one row per mode, paired in analyzers.comparison.pairs
    data: str = "files"
    # The same figures over the whole run (start-up and warm-up included), named so: never beside the above.
    whole_run_cpu_pct_mean: float | None = None
    whole_run_peak_rss_mib: float | None = None
    whole_run_gpu_util_pct_mean: float | None = None
    whole_run_energy_j_per_epoch: float | None = None
    whole_run_energy_j_per_image: float | None = None
    mfu_pct: float | None = None  # steady MFU (analyzers.figures.utilisation), % of peak: median over ok runs


@dataclass(frozen=True)
class CasePool:
    """One bar of the throughput figure and one row of Tables 1-2: the repeats of one spec."""

    framework: str
    label: str  # the framework, with its settings where the case has several specs of it
    settings: str  # settings_label of the spec
    pool: Pool
    runs: tuple[LoadedRun, ...]


def case_pools(group: Sequence[LoadedRun], warmup: int = WARMUP_EPOCHS) -> list[CasePool]:
    """The runs of one case as pools of repeats (analyzers.figures.repeats.pool), frameworks in the palette's
    order: THE grouping the table rows and the throughput figure are drawn from."""
    out = []
    for fw in palette.order({r.framework for r in group}):
        same_fw = [r for r in group if r.framework == fw]
        by_id = {r.run_id: r for r in same_fw}
        pools = pool(((r, r.record) for r in same_fw), warmup)
        labels = _labels([settings_label(by_id[p.run_ids[0]]) for p in pools], pools)
        for p, settings, distinct in zip(pools, labels, _distinct(labels)):
            label = palette.label(fw) + (f" ({distinct})" if len(pools) > 1 else "")
            out.append(CasePool(fw, label, settings, p, tuple(by_id[i] for i in p.run_ids)))
    return out


def _distinct(labels: list[str]) -> list[str]:
    """Each settings label without the parts every label shares ('1500 images' for '1500 images, 224 px')."""
    parts = [label.split(", ") for label in labels]
    shared = set.intersection(*(set(p) for p in parts)) if parts else set()
    return [", ".join(x for x in p if x not in shared) or ", ".join(p) for p in parts]


def _labels(labels: list[str], pools: Sequence[Pool]) -> list[str]:
    """Settings labels made unique: specs that differ only in a knob name it."""
    out = []
    for i, (text, p) in enumerate(zip(labels, pools)):
        twins = [q for j, q in enumerate(pools) if labels[j] == text and j != i]
        if twins:
            knobs = p.records[0].knobs
            differ = sorted(k for q in twins for k, v in q.records[0].knobs.items() if knobs.get(k) != v)
            named = ", ".join(f"{k} {knobs.get(k)}" for k in dict.fromkeys(differ))
            text += f", {named}" if differ else f", spec {i + 1}"
        out.append(text)
    return out


def table_rows(runs: Iterable[LoadedRun], device: str, warmup: int = WARMUP_EPOCHS) -> list[TableRow]:
    """Rows for the runs on `device` ("cpu" gives Table 1, "gpu" Table 2), in the study's case order."""
    chosen = [r for r in runs if r.case.device == device or (device == "gpu" and _imported_gpu(r))]
    return [
        dataclasses.replace(_row(case.name, cp, warmup), settings=cp.settings)
        for case, group in by_case(chosen).items()
        for cp in case_pools(group, warmup)
    ]


TRACE_TAG = "trace "  # how a settings label names the trace backend ('trace nsys')


def settings_label(run: LoadedRun) -> str:
    """The settings besides the case that change what an epoch is: images used, input size, epochs,
    how it was measured (trace backend, py-spy), and the optimiser and pipeline knobs where they are not
    the study's defaults; an import's, only how it was traced (the rest is not recorded)."""
    spec, m, parts = run.record.spec, run.record.measurement, []
    if spec is not None:
        parts = [f"{spec.limit} images" if spec.limit else "all images", f"{spec.image_size} px", f"{spec.epochs} ep"]
        default = RunSpec(spec.framework, spec.model, spec.dataset)
        for name in ("lr", "momentum", "workers", "prefetch", "pipeline", "data", "sync_every", "threads", "amp"):
            if getattr(spec, name) != getattr(default, name):
                parts.append(f"{name} {getattr(spec, name)}")
    parts += (
        [f"{TRACE_TAG}{m.trace}"] * (m.trace != "none") + ["py-spy"] * m.pyspy + ["nsys sampling"] * m.nsys_sampling
    )
    return ", ".join(parts)


def settings_parts(settings: str) -> list[str]:
    """A settings label's parts ('all images', '224 px', ...), as `settings_label` joined them."""
    return settings.split(", ") if settings else []


def _imported_gpu(run: LoadedRun) -> bool:
    """Imported traces ran where nothing was sampled; those made on a GPU belong in Table 2 (as traces)."""
    return run.case.imported and run.record.measurement.device == "gpu"


def _row(case_name: str, cp: CasePool, warmup: int) -> TableRow:
    runs = cp.runs
    ok = [r for r in runs if r.run_id in cp.pool.counted]
    failed = [r for r in runs if not r.ok]
    cell = cp.pool.throughput
    summaries = [summarise(r.with_warmup(warmup)) for r in ok]
    cpu = [s.cpu_pct_mean for s in summaries if s.cpu_pct_mean is not None]
    wait = [s.steady_data_wait_pct for s in summaries if s.steady_data_wait_pct is not None]
    rss = [s.peak_rss_mib for s in summaries if s.peak_rss_mib is not None]
    gpu = [s.gpu_util_pct_mean for s in summaries if s.gpu_util_pct_mean is not None]
    nvml = [s.gpu_mem_peak_mib for s in summaries if s.gpu_mem_peak_mib is not None]
    own = [s.device_peak_mib for s in summaries if s.device_peak_mib is not None]
    with_energy = [s for s in summaries if s.energy_source is not None]
    per_epoch = [s.energy_j_per_epoch for s in with_energy if s.energy_j_per_epoch is not None]
    per_image = [s.energy_j_per_image for s in with_energy if s.energy_j_per_image is not None]
    mfu = [s.utilisation.mfu_pct for s in summaries if s.utilisation.mfu_pct is not None]
    m, known = runs[0].record.measurement, Known.of(runs[0].record.workload)
    newest = runs[-1]
    return TableRow(
        framework=m.framework,
        model=known.model,
        dataset=runs[0].case.dataset,
        device=m.device,
        batch=known.batch or 0,  # 0: not recorded (an import's row says so, `imported`)
        case=case_name,
        status="ok" if ok else _status(newest),
        runs_ok=len(ok),
        runs_failed=len(failed),
        runs_contended=sum(s.contended for s in summaries),
        epochs=sum(len(r.epochs()) for r in ok),
        warmup_epochs=warmup,
        steady_epoch_s=cell.epoch_s.median if cell.epoch_s else None,
        steady_epoch_s_min=cell.epoch_s.low if cell.epoch_s else None,
        steady_epoch_s_max=cell.epoch_s.high if cell.epoch_s else None,
        steady_images_per_s=cell.images_per_s.median if cell.images_per_s else None,
        steady_images_per_s_min=cell.images_per_s.low if cell.images_per_s else None,
        steady_images_per_s_max=cell.images_per_s.high if cell.images_per_s else None,
        first_epoch_s=cell.first_epoch_s.median if cell.first_epoch_s else None,
        steady_includes_warmup=cell.includes_warmup,
        data_wait_pct=statistics.median(wait) if wait else None,
        cpu_pct_mean=statistics.fmean(cpu) if cpu else None,
        peak_rss_mib=max(rss) if rss else None,
        gpu_util_pct_mean=statistics.fmean(gpu) if gpu else None,
        gpu_mem_nvml_mib=max(nvml) if nvml else None,
        gpu_mem_framework_mib=max(own) if own else None,
        energy_j_per_epoch=statistics.fmean(per_epoch) if per_epoch else None,
        energy_j_per_image=statistics.fmean(per_image) if per_image else None,
        energy_source=" / ".join(sorted({str(s.energy_source) for s in with_energy})) or NO_SOURCE,
        cause=_cause(failed[-1]) if failed else "",
        run_ids=" ".join(r.run_id for r in runs),
        imported=runs[0].case.imported,
        left_out="; ".join(cp.pool.left_out),
        gpu=" / ".join(dict.fromkeys(r.record.environment.gpu_text for r in runs if r.record.environment.gpu_text)),
        data=runs[0].record.setting("data") or "",  # "": not recorded (an import)
        whole_run_cpu_pct_mean=_fmean([s.whole.cpu_pct_mean for s in summaries]),
        whole_run_peak_rss_mib=_max([s.whole.peak_rss_mib for s in summaries]),
        whole_run_gpu_util_pct_mean=_fmean([s.whole.gpu_util_pct_mean for s in summaries]),
        whole_run_energy_j_per_epoch=_fmean([s.whole.energy_j_per_epoch for s in summaries]),
        whole_run_energy_j_per_image=_fmean([s.whole.energy_j_per_image for s in summaries]),
        mfu_pct=statistics.median(mfu) if mfu else None,
    )


def _fmean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _max(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _status(run: LoadedRun) -> str:
    """The newest run's end state; a run read as diverged says so even where its run.json says ok."""
    record = run.record
    return "diverged" if record.outcome.divergence is not None else record.outcome.status.value


def _cause(run: LoadedRun) -> str:
    record = run.record
    if record.outcome.divergence is not None:
        return record.outcome.divergence.describe()
    return record.outcome.cause


CSV_COLUMNS = tuple(f.name for f in fields(TableRow))


def write_csv(rows: Sequence[TableRow], path: Path) -> None:
    """Full precision, one column per field; empty cells where a value does not exist."""
    out_file.write_csv(path, "report --out", CSV_COLUMNS, ([getattr(row, c) for c in CSV_COLUMNS] for row in rows))


def write_tables_csv(runs: Iterable[LoadedRun], path: Path, warmup: int = WARMUP_EPOCHS) -> Path:
    """Tables 1 and 2 in one CSV (the CPU rows, then the GPU rows), as the report writes each: the one
    Table 1 writer, which a campaign's epoch_times.csv is too."""
    runs = list(runs)
    write_csv([*table_rows(runs, "cpu", warmup), *table_rows(runs, "gpu", warmup)], path)
    return path


# (header, field, format) of the Markdown (and HTML) table.
DISPLAY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("Framework", "framework", ""),
    ("Model", "model", ""),
    ("Dataset", "dataset", ""),
    ("Batch", "batch", "d"),
    ("Settings", "settings", ""),
    ("Images/s, steady", "steady_images_per_s", ".2f"),
    ("Epoch time, steady (s)", "steady_epoch_s", ".3f"),
    ("First epoch (s)", "first_epoch_s", ".3f"),
    ("Data wait % of step, steady", "data_wait_pct", ".0f"),
    ("CPU % mean, steady (100 = all cores)", "cpu_pct_mean", ".1f"),
    ("Peak RSS, steady (MiB)", "peak_rss_mib", ".0f"),
    ("GPU util % mean, steady", "gpu_util_pct_mean", ".1f"),
    ("GPU memory, NVML: the process holds, steady (MiB)", "gpu_mem_nvml_mib", ".0f"),
    ("GPU memory, framework: peak in use, steady (MiB)", "gpu_mem_framework_mib", ".0f"),
    ("Energy/epoch, steady (J)", "energy_j_per_epoch", ".1f"),
    ("Energy/image, steady (J)", "energy_j_per_image", ".3f"),
    ("Energy source", "energy_source", ""),
    ("MFU % of the device's peak, steady", "mfu_pct", ".2f"),
    ("Runs ok/all", "runs_ok", "d"),
    ("Status", "status", ""),
)


HEADLINE_FIELDS = ("steady_images_per_s", "steady_epoch_s")
SPREAD_FIELDS = ("steady_images_per_s", "steady_epoch_s")  # median (min-max) when a row pools repeats


GPU_ONLY = ("gpu_util_pct_mean", "gpu_mem_nvml_mib", "gpu_mem_framework_mib")


def caption(warmup: int = WARMUP_EPOCHS, gpus: Sequence[str] = ()) -> str:
    """The definition under Tables 1 and 2 (the Markdown and the HTML page print it); Table 2's names
    the GPU its runs used (name, driver, CUDA from run.json)."""
    on = f"Runs on {' and '.join(gpus)}. " if gpus else ""
    return on + (
        f"Every figure but the first epoch covers the {STEADY} phase (images/s, epoch time, data wait, CPU, RSS, "
        f"GPU utilisation and memory, energy): {definition(warmup)}; the whole run's figures are in the CSV's "
        f"{WHOLE_RUN_PREFIX}* columns. "
        "A row pools the repeats of one spec (trace backend and knobs alike): the median over its runs with "
        "their range (min-max); diverged and failed runs stay out of it. "
        "GPU memory: NVML's figure is what the process holds (XLA and TensorFlow reserve ahead, PyTorch's "
        "caching allocator keeps what it used); the framework's is its own peak in use. "
        "CPU % has 100 = all logical cores; runs taken on a busy machine are marked contended in Status."
    )


def table_gpus(rows: Sequence[TableRow]) -> list[str]:
    """The GPUs the rows' runs used, each once."""
    return list(dict.fromkeys(g for row in rows for g in row.gpu.split(" / ") if g))


def display_cells(row: TableRow, device: str) -> list[str]:
    """The row as the Markdown and HTML tables print it; a failed row says so, with its cause."""
    cells = []
    for _, name, spec in display_columns(device):
        value = getattr(row, name)
        if name == "status":
            cells.append(status_text(row))
        elif name == "batch" and row.imported:
            cells.append("not recorded")
        elif name == "runs_ok":
            cells.append(f"{row.runs_ok}/{row.runs_ok + row.runs_failed}")
        elif value is None:
            cells.append(row.status if row.status != "ok" and name in HEADLINE_FIELDS else "-")
        elif name in SPREAD_FIELDS and row.runs_ok > 1:
            low, high = getattr(row, f"{name}_min"), getattr(row, f"{name}_max")
            cells.append(f"{format(value, spec)} ({format(low, spec)}-{format(high, spec)})")
        elif name in HEADLINE_FIELDS and row.steady_includes_warmup:
            cells.append(format(value, spec) + "*")
        else:
            cells.append(format(value, spec) if spec else palette.label(value) if name == "framework" else str(value))
    return cells


def rate_spread(row: TableRow) -> Spread | None:
    if row.steady_images_per_s is None or row.steady_images_per_s_min is None or row.steady_images_per_s_max is None:
        return None
    return Spread(row.steady_images_per_s, row.steady_images_per_s_min, row.steady_images_per_s_max, row.runs_ok)


def display_columns(device: str) -> tuple[tuple[str, str, str], ...]:
    if device == "gpu":
        return DISPLAY_COLUMNS
    return tuple(c for c in DISPLAY_COLUMNS if c[1] not in GPU_ONLY)


def status_text(row: TableRow) -> str:
    if row.imported:
        return "imported trace: CUDA API and kernels only (see the CUDA API figure)"
    if row.status == "ok":
        text = "ok" if not row.runs_failed else f"ok; left out: {row.left_out or row.cause}"
        text += f"; {row.runs_contended} contended" if row.runs_contended else ""
        return text + (
            f"; repeats disagree: {disagreement(rate, '.1f')}" if (rate := rate_spread(row)) and disagree(rate) else ""
        )
    return f"{row.status}: {row.cause}" if row.cause else row.status


def to_markdown(rows: Sequence[TableRow], device: str, title: str) -> str:
    columns = display_columns(device)
    lines = [f"### {title}", ""]
    if not rows:
        return "\n".join(lines + [f"No {device.upper()} runs were given.", ""])
    warmup = rows[0].warmup_epochs
    lines += [caption(warmup, table_gpus(rows) if device == "gpu" else ()), ""]
    lines.append("| " + " | ".join(h for h, _, _ in columns) + " |")
    lines.append("| " + " | ".join("---:" if spec else "---" for _, _, spec in columns) + " |")
    for row in rows:
        cells = [_md_escape(c) for c in display_cells(row, device)]
        if row.status != "ok":
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
