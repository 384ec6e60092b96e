"""Table 1 (CPU) and Table 2 (GPU) of the study: one row per case and framework, from run folders.

A row pools the runs of one framework on one case (model, dataset, device, batch) through the one
Table 1 function, `analyzers.steady.throughput`: each finished run's steady state (the epochs after its
warm-up), then the median and range over the runs; the first epoch is a column of its own. A case whose
runs all failed is kept, shown as failed with the newest run's cause.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

from analyzers import palette
from analyzers.energy import NO_SOURCE
from analyzers.report.runs import LoadedRun, by_case
from analyzers.run_summary import summarise
from analyzers.steady import WARMUP_EPOCHS, definition, throughput
from tracer.core.records import RunSpec


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
    runs_contended: int  # ok runs taken while other processes held a share of the CPU (analyzers.contention)
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
    data_wait_pct: float | None  # mean over the runs of the steps' share waiting for data (analyzers.steps)
    cpu_pct_mean: float | None  # 100 = all logical cores
    peak_rss_mib: float | None
    gpu_util_pct_mean: float | None
    energy_j_per_epoch: float | None  # analyzers.energy.headline, mean over the finished runs
    energy_j_per_image: float | None
    energy_source: str  # what the energy figures add up, or "no energy source"
    cause: str  # why the newest failed run failed
    run_ids: str  # space-separated
    settings: str = ""  # what else defines the runs (images used, size, epochs...): rows never pool unlike runs
    imported: bool = False  # a `tracer import`ed GPU trace: CUDA API and kernels, no epochs or samples
    data: str = "files"  # --data of the runs (files, memory, synthetic): one row per mode, paired in analyzers.pairs


def table_rows(runs: Iterable[LoadedRun], device: str, warmup: int = WARMUP_EPOCHS) -> list[TableRow]:
    """Rows for the runs on `device` ("cpu" gives Table 1, "gpu" Table 2), in the study's case order."""
    rows = []
    chosen = [r for r in runs if r.case.device == device or (device == "gpu" and _imported_gpu(r))]
    for case, group in by_case(chosen).items():
        frameworks = palette.order({r.framework for r in group})
        for fw in frameworks:
            same_fw = [r for r in group if r.framework == fw]
            by_settings: dict[str, list[LoadedRun]] = {}
            for r in same_fw:
                by_settings.setdefault(settings_label(r), []).append(r)
            for label, alike in by_settings.items():
                rows.append(dataclasses.replace(_row(case.name, alike, warmup), settings=label))
    return rows


def settings_label(run: LoadedRun) -> str:
    """The settings besides the case that change what an epoch is: images used, input size, epochs,
    and the optimiser and pipeline knobs where they are not the study's defaults."""
    spec = run.record.spec
    parts = [f"{spec.limit} images" if spec.limit else "all images", f"{spec.image_size} px", f"{spec.epochs} ep"]
    default = RunSpec(spec.framework, spec.model, spec.dataset)
    for name in ("lr", "momentum", "workers", "prefetch", "pipeline", "data", "sync_every", "threads", "amp"):
        if getattr(spec, name) != getattr(default, name):
            parts.append(f"{name} {getattr(spec, name)}")
    return ", ".join(parts)


def _imported_gpu(run: LoadedRun) -> bool:
    """Imported traces ran where nothing was sampled; those made on a GPU belong in Table 2 (as traces)."""
    return run.case.imported and run.record.spec.device == "gpu"


def _row(case_name: str, runs: Sequence[LoadedRun], warmup: int) -> TableRow:
    ok = [r for r in runs if r.ok]
    failed = [r for r in runs if not r.ok]
    epochs = [r.folder.epochs() for r in ok]
    cell = throughput(epochs, warmup)
    summaries = [summarise(r.folder, warmup) for r in ok]
    cpu = [s.cpu_pct_mean for s in summaries if s.cpu_pct_mean is not None]
    wait = [s.data_wait_pct for s in summaries if s.data_wait_pct is not None]
    rss = [s.peak_rss_mib for s in summaries if s.peak_rss_mib is not None]
    gpu = [s.gpu_util_pct_mean for s in summaries if s.gpu_util_pct_mean is not None]
    with_energy = [s for s in summaries if s.energy_source is not None]
    per_epoch = [s.energy_j_per_epoch for s in with_energy if s.energy_j_per_epoch is not None]
    per_image = [s.energy_j_per_image for s in with_energy if s.energy_j_per_image is not None]
    spec = runs[0].record.spec
    newest = runs[-1]
    return TableRow(
        framework=spec.framework,
        model=spec.model,
        dataset=runs[0].case.dataset,
        device=spec.device,
        batch=spec.batch,
        case=case_name,
        status="ok" if ok else newest.record.outcome.status.value,
        runs_ok=len(ok),
        runs_failed=len(failed),
        runs_contended=sum(s.contended for s in summaries),
        epochs=sum(len(e) for e in epochs),
        warmup_epochs=warmup,
        steady_epoch_s=cell.epoch_s.median if cell.epoch_s else None,
        steady_epoch_s_min=cell.epoch_s.low if cell.epoch_s else None,
        steady_epoch_s_max=cell.epoch_s.high if cell.epoch_s else None,
        steady_images_per_s=cell.images_per_s.median if cell.images_per_s else None,
        steady_images_per_s_min=cell.images_per_s.low if cell.images_per_s else None,
        steady_images_per_s_max=cell.images_per_s.high if cell.images_per_s else None,
        first_epoch_s=cell.first_epoch_s.median if cell.first_epoch_s else None,
        steady_includes_warmup=cell.includes_warmup,
        data_wait_pct=statistics.fmean(wait) if wait else None,
        cpu_pct_mean=statistics.fmean(cpu) if cpu else None,
        peak_rss_mib=max(rss) if rss else None,
        gpu_util_pct_mean=statistics.fmean(gpu) if gpu else None,
        energy_j_per_epoch=statistics.fmean(per_epoch) if per_epoch else None,
        energy_j_per_image=statistics.fmean(per_image) if per_image else None,
        energy_source=" / ".join(sorted({str(s.energy_source) for s in with_energy})) or NO_SOURCE,
        cause=failed[-1].record.outcome.cause if failed else "",
        run_ids=" ".join(r.folder.run_id for r in runs),
        imported=runs[0].case.imported,
        data=spec.data,
    )


CSV_COLUMNS = tuple(f.name for f in fields(TableRow))


def write_csv(rows: Sequence[TableRow], path: Path) -> None:
    """Full precision, one column per field; empty cells where a value does not exist."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([_csv_cell(getattr(row, c)) for c in CSV_COLUMNS])


def _csv_cell(value: object) -> object:
    """Empty for a missing value; floats at 15 significant digits (no summation noise)."""
    if value is None:
        return ""
    return f"{value:.15g}" if isinstance(value, float) else value


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
    ("Data wait % of step", "data_wait_pct", ".0f"),
    ("CPU % mean (100 = all cores)", "cpu_pct_mean", ".1f"),
    ("Peak RSS (MiB)", "peak_rss_mib", ".0f"),
    ("GPU util % mean", "gpu_util_pct_mean", ".1f"),
    ("Energy/epoch (J)", "energy_j_per_epoch", ".1f"),
    ("Energy/image (J)", "energy_j_per_image", ".3f"),
    ("Energy source", "energy_source", ""),
    ("Runs ok/all", "runs_ok", "d"),
    ("Status", "status", ""),
)


HEADLINE_FIELDS = ("steady_images_per_s", "steady_epoch_s")
SPREAD_FIELDS = ("steady_images_per_s", "steady_epoch_s")  # median (min-max) when a row pools repeats


def caption(warmup: int = WARMUP_EPOCHS) -> str:
    """The definition under Tables 1 and 2 (the Markdown and the HTML page print it)."""
    return (
        f"Images/s and epoch time are the steady state: {definition(warmup)}. "
        "A row pooling several runs shows the median over the runs with their range (min-max). "
        "CPU % has 100 = all logical cores; runs taken on a busy machine are marked contended in Status."
    )


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


def display_columns(device: str) -> tuple[tuple[str, str, str], ...]:
    if device == "gpu":
        return DISPLAY_COLUMNS
    return tuple(c for c in DISPLAY_COLUMNS if c[1] != "gpu_util_pct_mean")


def status_text(row: TableRow) -> str:
    if row.imported:
        return "imported trace: CUDA API and kernels only (see the CUDA API figure)"
    if row.status == "ok":
        text = "ok" if not row.runs_failed else f"ok; newest failure: {row.cause}"
        return text + (f"; {row.runs_contended} contended" if row.runs_contended else "")
    return f"{row.status}: {row.cause}" if row.cause else row.status


def to_markdown(rows: Sequence[TableRow], device: str, title: str) -> str:
    columns = display_columns(device)
    lines = [f"### {title}", ""]
    if not rows:
        return "\n".join(lines + [f"No {device.upper()} runs were given.", ""])
    warmup = rows[0].warmup_epochs
    lines += [caption(warmup), ""]
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
