"""`tracer runs` and `tracer show`: what is in the runs folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tracer.cli.common import add_runs_dir, add_warmup, console, err_console, fmt
from tracer.core import cases
from tracer.core.errors import UserError
from tracer.core.records import RunStatus
from tracer.core.schema import DATA_FILES


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("runs", help="list run folders")
    add_runs_dir(p)
    p.set_defaults(func=cmd_runs)
    s = sub.add_parser("show", help="print one run's summary")
    s.add_argument("run", help="run id (or a unique part of it) or a run folder path")
    add_runs_dir(s)
    add_warmup(s)
    s.set_defaults(func=cmd_show)


def cmd_runs(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.core.runfolder import list_runs

    runs = list_runs(args.runs_dir)
    if not runs:
        err_console().print(f"no runs in {args.runs_dir}: make one with `tracer profile ...`")
        return 0
    out = console()
    rows: list[tuple[str, ...]] = []
    for folder in runs:
        try:
            s = summarise(folder)
        except UserError as e:
            print(f"tracer: warning: {e}", file=sys.stderr)
            rows.append((folder.run_id, "", "", "", "", "", "damaged: run.json", "", "", "", ""))
            continue
        rows.append(
            (
                s.run_id,
                s.framework,
                s.model,
                cases.dataset_label(s.dataset),
                s.device,
                "-" if "batch" in s.not_recorded else str(s.batch),
                s.status,
                "-" if "epochs" in s.not_recorded else f"{s.epochs_done}/{s.epochs_planned}",
                rate_text(s),
                load_text(s),
                s.gpu.removeprefix("NVIDIA ").replace("driver ", "") or "-",
            )
        )
    if out.width < NARROW_COLUMNS:
        _print_narrow(rows, out)
    else:
        table = Table(*RUNS_HEADERS)
        table.columns[0].min_width = max(len(row[0]) for row in rows)  # the id whole: it is what users copy
        table.columns[-1].overflow = "fold"
        for row in rows:
            table.add_row(*row)
        out.print(table)
    out.print(f"in {args.runs_dir.resolve()}", soft_wrap=True, markup=False)
    return 0


RUNS_HEADERS = (
    "run id",
    "framework",
    "model",
    "dataset",
    "device",
    "batch",
    "status",
    "epochs",
    "img/s steady",
    "load",
    "GPU",
)
NARROW_COLUMNS = 100  # below this, `runs` prints one block per run: the id whole on its own line


def _print_narrow(rows: list[tuple[str, ...]], out: Console) -> None:
    """One run per block: the id (what users copy) whole, then the rest wrapped at spaces, never cut."""
    for run_id, fw, model, data, device, batch, status, epochs, rate, load, gpu in rows:
        out.print(run_id, soft_wrap=True, markup=False)
        out.print(
            f"  {fw} {model} {data} {device} b{batch}" + (f" ({gpu})" if gpu not in ("", "-") else ""), markup=False
        )
        out.print(f"  {status}, epochs {epochs}, {rate} img/s steady, load {load}".rstrip(), markup=False)


def rate_text(s: object) -> str:
    """Steady images/s, '*' where it counts the warm-up, 'not ranked' where the run's speed is not rankable."""
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    text = fmt(s.steady_images_per_s, ".1f") + ("*" if s.steady_includes_warmup else "")
    return text if s.rankable or s.steady_images_per_s is None else f"{text} (not ranked)"


def load_text(s: object) -> str:
    from analyzers.contention import Contention
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    return Contention(s.other_cpu_pct, None, s.contended).load_text()


def cmd_show(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.cli.diagnose import print_block
    from tracer.core.runfolder import find_run

    folder = find_run(args.runs_dir, args.run)
    print_summary(summarise(folder, args.warmup), console())
    repeats = repeats_of(folder)
    if len(repeats) > 1:
        print_repeats([summarise(f, args.warmup) for f in repeats], console())
    record = folder.read_record()
    if record.outcome.stderr_tail and record.outcome.status is not RunStatus.OK:
        console().print("last lines of the worker's output:")
        for line in record.outcome.stderr_tail[-10:]:
            console().print(f"  {line}", markup=False)
    print_block(folder, console())
    return 0


def _data_wait(steady_pct: float | None, run_pct: float | None, by_epoch: tuple[float | None, ...]) -> str:
    """'steady 92 %; all epochs 47 %; per epoch 2 %, 92 %, 93 %', or '-' for a run without a per-step table.
    The steady share leads: it is the one of the same epochs as the steady images/s."""
    if run_pct is None:
        return "-"
    head = f"steady {steady_pct:.0f} %; " if steady_pct is not None else ""
    per = ", ".join("-" if v is None else f"{v:.0f} %" for v in by_epoch)
    return f"{head}all epochs {run_pct:.0f} %; per epoch {per}"


def print_summary(s: object, console: Console) -> None:
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    imported = bool(s.imported_from)
    what = f"{s.framework} {s.model} on {cases.dataset_label(s.dataset)}, {s.device}, batch {s.batch}"
    if imported:
        what = f"{s.framework} {s.model}, {s.device}, trace imported from {Path(s.imported_from).name}"
    rows = [
        ("run", s.run_id),
        ("what", what),
        ("status", s.status + (f" ({s.cause})" if s.cause else "")),
        *([("ranking", f"speed not ranked beside other runs: the run ended {s.status}")] if not s.rankable else []),
        ("batch", "not recorded (imported trace)" if "batch" in s.not_recorded else str(s.batch)),
        ("epochs", f"{s.epochs_done} (planned: not recorded)" if imported else f"{s.epochs_done}/{s.epochs_planned}"),
        ("images/s (steady)", steady_text(s)),
        ("epoch time (steady)", f"{fmt(s.steady_epoch_s, '.3f')} s"),
        ("first epoch", f"{fmt(s.first_epoch_s, '.3f')} s (warm-up: first {s.warmup_epochs} left out)"),
        ("all epochs", f"mean {fmt(s.mean_epoch_s, '.3f')} s, {fmt(s.images_per_s, '.1f')} images/s"),
        *([("compile time, whole run", f"{s.compile_s:.3f} s")] if s.compile_s is not None else []),
        *([("data", f"--data {s.data}")] if s.data != DATA_FILES else []),
        *([("decode into memory", f"{s.decode_s:.3f} s, before the first epoch")] if s.decode_s is not None else []),
        ("data wait (% of step time)", _data_wait(s.steady_data_wait_pct, s.data_wait_pct, s.data_wait_pct_by_epoch)),
        ("CPU % (100 = all cores)", f"mean {fmt(s.cpu_pct_mean, '.1f')}, max {fmt(s.cpu_pct_max, '.1f')}"),
        ("peak RSS", f"{fmt(s.peak_rss_mib, '.0f')} MiB ({fmt(s.peak_rss_pct_ram, '.1f')} % of RAM)"),
        ("threads", f"min {fmt(s.threads_min)}, median {fmt(s.threads_median)}, max {fmt(s.threads_max)}"),
        ("last loss, accuracy", learning_text(s)),
        *([("GPU", s.gpu)] if s.gpu else []),
        ("GPU utilisation", "no GPU sampled" if s.gpu_util_pct_mean is None else f"mean {s.gpu_util_pct_mean:.1f} %"),
        *([("GPU memory, peak", gpu_memory_text(s))] if s.device == "gpu" else []),
        *energy_rows(s),
        ("trainable parameters", fmt(s.trainable_params, ",")),
        ("samples", str(s.samples)),
    ]
    if imported and not s.samples and not s.epochs_done:  # a trace alone: no sampler, no epoch events
        kept = ("run", "what", "status", "batch", "GPU utilisation", "trainable parameters")
        rows = [r for r in rows if r[0] in kept] + [("samples", "none: an imported trace has its trace tables only")]
    table = Table(show_header=False, box=None)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # a long id folds onto the next line instead of losing its end
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    console.print(f"folder {s.folder}", soft_wrap=True, markup=False)  # whole, to copy, however narrow
    if s.contended:
        console.print(f"[yellow]warning:[/yellow] {contention_line(s)}", soft_wrap=True)


def learning_text(s: object) -> str:
    """'loss 0.6401, accuracy 71.2 % (epoch 2)'; a non-finite loss as itself; '-' without epochs."""
    from analyzers.run_summary import RunSummary, last_learning

    assert isinstance(s, RunSummary)
    loss, accuracy = last_learning(s)
    if loss is None:
        return "-"
    acc = "accuracy not recorded" if accuracy is None else f"accuracy {100 * accuracy:.1f} %"
    return f"loss {loss:.4f}, {acc} (epoch {len(s.loss_by_epoch)}, training set)"


def gpu_memory_text(s: object) -> str:
    """NVML's process memory (what the allocator holds) beside the framework's own peak in use."""
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    own = (
        f"{s.device_peak_mib:.0f} MiB in use ({s.device_peak_source})"
        if s.device_peak_mib is not None
        else (s.device_peak_source or "not recorded (the run predates it)")
    )
    return f"NVML, the process: {fmt(s.gpu_mem_peak_mib, '.0f')} MiB; the framework's own: {own}"


def steady_text(s: object) -> str:
    """Steady-state images/s with how many epochs it counts, marked when it had to count the warm-up."""
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    if s.steady_images_per_s is None:
        return "-"
    if s.steady_includes_warmup:
        return f"{s.steady_images_per_s:.1f} (all {s.steady_epochs} epochs: none after the warm-up)"
    epochs = f"{s.steady_epochs} epoch{'s' if s.steady_epochs != 1 else ''}"
    return f"{s.steady_images_per_s:.1f} ({epochs} after the first {s.warmup_epochs})"


def contention_line(s: object) -> str:
    from analyzers.contention import Contention
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    return Contention(s.other_cpu_pct, None, s.contended).warning()


def repeats_of(folder: Any) -> list[Any]:
    """The run and its repeats (runs of the same spec, analyzers.repeats) in the same folder of runs."""
    from analyzers.repeats import repeat_key
    from tracer.core.runfolder import list_runs

    key = repeat_key(folder.read_record())
    out = []
    for other in list_runs(folder.path.parent):
        try:
            if repeat_key(other.read_record()) == key:
                out.append(other)
        except UserError:
            continue
    return out


def print_repeats(summaries: list[Any], console: Console) -> None:
    """The repeats of one spec: median and range of the steady-state numbers, and how many were contended."""
    rows = [
        ("repeats", f"{len(summaries)} runs of one spec"),
        ("images/s (steady)", _spread([s.steady_images_per_s for s in summaries], ".1f")),
        ("epoch time (steady), s", _spread([s.steady_epoch_s for s in summaries], ".3f")),
        ("first epoch, s", _spread([s.first_epoch_s for s in summaries], ".3f")),
    ]
    contended = sum(s.contended for s in summaries)
    table = Table("over the repeats", "median (min-max)", box=None)
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    if contended:
        console.print(
            f"[yellow]warning:[/yellow] {contended} of {len(summaries)} repeats contended (see `tracer show`)"
        )


def _spread(values: list[float | None], spec: str) -> str:
    from analyzers.steady import spread

    result = spread(values)
    return "-" if result is None else result.text(spec)


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
