"""Table 1 (CPU) and Table 2 (GPU) of the study: one row per case and framework, from run folders.

A row pools the runs of one framework on one case (model, dataset, device, batch): the mean epoch
time is the mean over every epoch of its finished runs, images/s is their images over their
seconds. A case whose runs all failed is kept, shown as failed with the newest run's cause.
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
    epochs: int  # epochs pooled into the mean
    mean_epoch_s: float | None
    images_per_s: float | None
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


def table_rows(runs: Iterable[LoadedRun], device: str) -> list[TableRow]:
    """Rows for the runs on `device` ("cpu" gives Table 1, "gpu" Table 2), in the study's case order."""
    rows = []
    for case, group in by_case(r for r in runs if r.case.device == device).items():
        frameworks = palette.order({r.framework for r in group})
        for fw in frameworks:
            same_fw = [r for r in group if r.framework == fw]
            by_settings: dict[str, list[LoadedRun]] = {}
            for r in same_fw:
                by_settings.setdefault(settings_label(r), []).append(r)
            for label, alike in by_settings.items():
                rows.append(dataclasses.replace(_row(case.name, alike), settings=label))
    return rows


def settings_label(run: LoadedRun) -> str:
    """The settings besides the case that change what an epoch is: images used, input size, epochs,
    and the optimiser and pipeline knobs where they are not the study's defaults."""
    spec = run.record.spec
    parts = [f"{spec.limit} images" if spec.limit else "all images", f"{spec.image_size} px", f"{spec.epochs} ep"]
    default = RunSpec(spec.framework, spec.model, spec.dataset)
    for name in ("lr", "momentum", "workers", "prefetch", "threads", "amp"):
        if getattr(spec, name) != getattr(default, name):
            parts.append(f"{name} {getattr(spec, name)}")
    return ", ".join(parts)


def _row(case_name: str, runs: Sequence[LoadedRun]) -> TableRow:
    ok = [r for r in runs if r.ok]
    failed = [r for r in runs if not r.ok]
    epochs = [e for r in ok for e in r.folder.epochs()]
    summaries = [summarise(r.folder) for r in ok]
    seconds = sum(e.duration_s for e in epochs)
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
        epochs=len(epochs),
        mean_epoch_s=statistics.fmean(e.duration_s for e in epochs) if epochs else None,
        images_per_s=sum(e.images for e in epochs) / seconds if seconds > 0 else None,
        data_wait_pct=statistics.fmean(wait) if wait else None,
        cpu_pct_mean=statistics.fmean(cpu) if cpu else None,
        peak_rss_mib=max(rss) if rss else None,
        gpu_util_pct_mean=statistics.fmean(gpu) if gpu else None,
        energy_j_per_epoch=statistics.fmean(per_epoch) if per_epoch else None,
        energy_j_per_image=statistics.fmean(per_image) if per_image else None,
        energy_source=" / ".join(sorted({str(s.energy_source) for s in with_energy})) or NO_SOURCE,
        cause=failed[-1].record.outcome.cause if failed else "",
        run_ids=" ".join(r.folder.run_id for r in runs),
    )


CSV_COLUMNS = tuple(f.name for f in fields(TableRow))


def write_csv(rows: Sequence[TableRow], path: Path) -> None:
    """Full precision, one column per field; empty cells where a value does not exist."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(["" if getattr(row, c) is None else getattr(row, c) for c in CSV_COLUMNS])


# (header, field, format) of the Markdown (and HTML) table.
DISPLAY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("Case", "case", ""),
    ("Framework", "framework", ""),
    ("Model", "model", ""),
    ("Dataset", "dataset", ""),
    ("Batch", "batch", "d"),
    ("Settings", "settings", ""),
    ("Mean epoch (s)", "mean_epoch_s", ".3f"),
    ("Images/s", "images_per_s", ".2f"),
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


def display_cells(row: TableRow, device: str) -> list[str]:
    """The row as the Markdown and HTML tables print it; a failed row says so, with its cause."""
    cells = []
    for _, name, spec in display_columns(device):
        value = getattr(row, name)
        if name == "status":
            cells.append(status_text(row))
        elif name == "runs_ok":
            cells.append(f"{row.runs_ok}/{row.runs_ok + row.runs_failed}")
        elif value is None:
            cells.append(row.status if row.status != "ok" and name in ("mean_epoch_s", "images_per_s") else "-")
        else:
            cells.append(format(value, spec) if spec else palette.label(value) if name == "framework" else str(value))
    return cells


def display_columns(device: str) -> tuple[tuple[str, str, str], ...]:
    if device == "gpu":
        return DISPLAY_COLUMNS
    return tuple(c for c in DISPLAY_COLUMNS if c[1] != "gpu_util_pct_mean")


def status_text(row: TableRow) -> str:
    if row.status == "ok":
        return "ok" if not row.runs_failed else f"ok; newest failure: {row.cause}"
    return f"{row.status}: {row.cause}" if row.cause else row.status


def to_markdown(rows: Sequence[TableRow], device: str, title: str) -> str:
    columns = display_columns(device)
    lines = [f"### {title}", ""]
    if not rows:
        return "\n".join(lines + [f"No {device.upper()} runs were given.", ""])
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
