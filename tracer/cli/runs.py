"""`tracer runs` and `tracer show`: what is in the runs folder."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from tracer.cli.common import add_runs_dir, console, err_console, fmt
from tracer.core import cases
from tracer.core.errors import UserError
from tracer.core.records import RunStatus


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("runs", help="list run folders")
    add_runs_dir(p)
    p.set_defaults(func=cmd_runs)
    s = sub.add_parser("show", help="print one run's summary")
    s.add_argument("run", help="run id (or a unique part of it) or a run folder path")
    add_runs_dir(s)
    s.set_defaults(func=cmd_show)


def cmd_runs(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.core.runfolder import list_runs

    runs = list_runs(args.runs_dir)
    if not runs:
        err_console().print(f"no runs in {args.runs_dir}: make one with `tracer profile ...`")
        return 0
    table = Table("run id", "framework", "model", "dataset", "device", "batch", "status", "epochs", "mean epoch s")
    for folder in runs:
        try:
            s = summarise(folder)
        except UserError as e:
            print(f"tracer: warning: {e}", file=sys.stderr)
            table.add_row(folder.run_id, "", "", "", "", "", "damaged: run.json", "", "")
            continue
        table.add_row(
            s.run_id,
            s.framework,
            s.model,
            cases.dataset_label(s.dataset),
            s.device,
            str(s.batch),
            s.status,
            f"{s.epochs_done}/{s.epochs_planned}",
            fmt(s.mean_epoch_s, ".2f"),
        )
    console().print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.core.runfolder import find_run

    folder = find_run(args.runs_dir, args.run)
    from tracer.cli.diagnose import print_block

    print_summary(summarise(folder), console())
    record = folder.read_record()
    if record.outcome.stderr_tail and record.outcome.status is not RunStatus.OK:
        console().print("last lines of the worker's output:")
        for line in record.outcome.stderr_tail[-10:]:
            console().print(f"  {line}", markup=False)
    print_block(folder, console())
    return 0


def _data_wait(run_pct: float | None, by_epoch: tuple[float | None, ...]) -> str:
    """'run 12 %; per epoch 20 %, 8 %', or '-' for a run without a per-step table."""
    if run_pct is None:
        return "-"
    return f"run {run_pct:.0f} %; per epoch " + ", ".join("-" if v is None else f"{v:.0f} %" for v in by_epoch)


def print_summary(s: object, console: Console) -> None:
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    rows = [
        ("run", s.run_id),
        ("what", f"{s.framework} {s.model} on {cases.dataset_label(s.dataset)}, {s.device}, batch {s.batch}"),
        ("status", s.status + (f" ({s.cause})" if s.cause else "")),
        ("epochs", f"{s.epochs_done}/{s.epochs_planned}"),
        ("mean epoch time", f"{fmt(s.mean_epoch_s, '.3f')} s"),
        *([("compile time, whole run", f"{s.compile_s:.3f} s")] if s.compile_s is not None else []),
        ("images/s", fmt(s.images_per_s, ".1f")),
        ("data wait (% of step time)", _data_wait(s.data_wait_pct, s.data_wait_pct_by_epoch)),
        ("CPU % (100 = all cores)", f"mean {fmt(s.cpu_pct_mean, '.1f')}, max {fmt(s.cpu_pct_max, '.1f')}"),
        ("peak RSS", f"{fmt(s.peak_rss_mib, '.0f')} MiB ({fmt(s.peak_rss_pct_ram, '.1f')} % of RAM)"),
        ("threads", f"min {fmt(s.threads_min)}, median {fmt(s.threads_median)}, max {fmt(s.threads_max)}"),
        ("GPU utilisation", "no GPU sampled" if s.gpu_util_pct_mean is None else f"mean {s.gpu_util_pct_mean:.1f} %"),
        *energy_rows(s),
        ("trainable parameters", fmt(s.trainable_params, ",")),
        ("samples", str(s.samples)),
        ("folder", s.folder),
    ]
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def energy_rows(s: object) -> list[tuple[str, str]]:
    """One row per energy source, named; a run without any says so (never 0 J)."""
    from analyzers.energy import NO_SOURCE
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    if not s.energy:
        why = "; ".join(s.energy_unavailable)
        return [("energy", NO_SOURCE + (f" ({why})" if why else ""))]
    rows = []
    for src in s.energy:
        rows.append(
            (f"energy, {src.source}", f"{fmt(src.j_per_epoch, '.3f')} J/epoch, {fmt(src.j_per_image, '.4f')} J/image")
        )
    if s.energy_source and " + " in s.energy_source:  # a sum of parts: its total as well
        rows.append(
            (
                f"energy, {s.energy_source}",
                f"{fmt(s.energy_j_per_epoch, '.3f')} J/epoch, {fmt(s.energy_j_per_image, '.4f')} J/image",
            )
        )
    return rows
