"""`tracer runs` and `tracer show`: what is in the runs folder."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from tracer.cli.common import (
    add_runs_dir,
    add_warmup,
    console,
    err_console,
    fits,
    fmt,
    print_pairs,
    print_wrapped,
    table_lines,
    warn_problems,
)
from tracer.core import cases
from tracer.core.errors import UserError
from tracer.core.records import RunStatus
from tracer.core.schema import DATA_FILES

PROBE_NEVER_LOADED = (
    "none seen: the probe never started in the command's Python (python -I, -E or -S, or a PYTHONPATH that "
    "replaced the tracer's, keeps it out): steps not recorded"
)


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
    """The columns, each run's row, its marks and their legend are analyzers.run.run_rows' (the viewer's run
    browser shows the same rows)."""
    from analyzers.run import Run, run_rows
    from analyzers.run.run_rows import LEGEND, RUNS_HEADERS
    from tracer.core.runfolder import list_runs, short_ids

    runs = [Run.open(f) for f in list_runs(args.runs_dir)]
    if not runs:
        err_console().print(f"no runs in {args.runs_dir}: make one with `tracer profile ...`")
        return 0
    out = console()
    ids = short_ids([f.run_id for f in runs])
    rows: list[tuple[str, ...]] = []
    for run in runs:
        try:
            rows.append(run_rows.run_row(run))
        except UserError as e:
            print(f"tracer: warning: {e}", file=sys.stderr)
            rows.append(run_rows.damaged_row(run.run_id))
        run.release()  # its row is made: a folder of many runs holds one run's tables at a time
    shown, shared = _split_shared(rows)
    if shared:
        print_wrapped(out, "every run: " + "; ".join(f"{h} {v}" for h, v in shared))
    # The whole ids where the table then fits the terminal (piped: always), else the ids' tails, else one
    # block per run (whole ids).
    tail_ids = False
    for short in (False, True):
        table = Table(*(RUNS_HEADERS[i] for i in shown), box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
        for row in rows:
            table.add_row(ids[row[0]] if short else row[0], *(row[i] for i in shown[1:]))
        lines = table_lines(out, table)
        if not fits(out) or max(line.cell_len for line in lines) <= out.width:  # piped without COLUMNS: no width
            for table_line in lines:
                out.print(table_line, highlight=False, soft_wrap=True)
            tail_ids = short
            break
    else:
        _print_narrow([RUNS_HEADERS[i] for i in shown], [[row[i] for i in shown] for row in rows], out)
    for mark, legend in LEGEND.items():
        if mark in ("img/s", "load") or any(mark in row[-3] for row in rows):
            print_wrapped(out, legend)
    where = f"in {args.runs_dir.resolve()}"
    print_wrapped(out, where + ("; id: the run id's tail, which every command takes" if tail_ids else ""))
    warn_problems(runs)
    return 0


def _split_shared(rows: list[tuple[str, ...]]) -> tuple[list[int], list[tuple[str, str]]]:
    """The columns that differ between rows (the id always), and (header, value) of those all rows share."""
    shown, shared = [], []
    from analyzers.run.run_rows import RUN_COLUMNS

    for i, column in enumerate(RUN_COLUMNS):
        values = {row[i] for row in rows}
        if i == 0 or len(rows) == 1 and i < 2 or len(values) > 1:
            shown.append(i)
        else:
            shared.append((column.header, values.pop() or column.none))
    return shown, shared


def _print_narrow(headers: list[str], rows: list[list[str]], out: Console) -> None:
    """One run per block when the table is wider than the terminal: the id on its own line, then
    `header value` pairs wrapped at spaces, never cut."""
    for row in rows:
        out.print(row[0], soft_wrap=True, markup=False)
        print_wrapped(out, ", ".join(f"{h} {v}" for h, v in zip(headers[1:], row[1:]) if v), "  ", "  ")


def cmd_show(args: argparse.Namespace) -> int:
    from analyzers.run import Run
    from tracer.cli.diagnose import print_block
    from tracer.cli.diff import print_step_parts
    from tracer.core.runfolder import find_run

    run = Run.open(find_run(args.runs_dir, args.run), args.warmup)
    repeats: list[Run] = []
    try:
        print_summary(run.summary, console())
        print_step_parts(run, console())
        repeats = [run if f.path == run.path else Run.open(f, args.warmup) for f in repeats_of(run)]
        if len(repeats) > 1:
            print_repeats([r.summary for r in repeats], console())
        record = run.record
        if record.world_size > 1:  # a run of several ranks: who they are (`tracer analyze RUN` has their table)
            infos = record.rank_infos
            devices = ", ".join(dict.fromkeys(r.device for r in infos if r.device)) or "devices not recorded"
            backend = ", ".join(dict.fromkeys(r.backend for r in infos if r.backend)) or "backend not recorded"
            console().print(
                f"ranks: {len(infos)} of world size {record.world_size} ({backend}; {devices}); per rank: "
                f"`tracer analyze {run.run_id}`, `--rank R`",
                markup=False,
            )
        if record.outcome.stderr_tail and record.outcome.status is not RunStatus.OK:
            console().print("last lines of the worker's output:")
            for line in record.outcome.stderr_tail[-10:]:
                console().print(f"  {line}", markup=False)
        print_block(run, console())
        print_problems(run, console())
    finally:
        warn_problems([r for r in repeats if r.run_id != run.run_id])
    return 0


def print_problems(run: Any, out: Console) -> None:
    """The run's damaged files (`Run.problems`), one line each under "Problems"; nothing for a sound run."""
    if not run.problems:
        return
    out.print("[bold]Problems[/bold]")
    for problem in run.problems:
        print_wrapped(out, f"- {problem.text()}", "  ", "  ")


def _data_wait(steady_pct: float | None, by_epoch: tuple[float | None, ...]) -> str:
    """'92 %; per epoch 2 %, 92 %, 93 %', or '-' for a run without a per-step table. The steady share
    leads: it is the one of the same epochs as the steady images/s (the whole run's is in its own row)."""
    if steady_pct is None:
        return "-"
    per = ", ".join("-" if v is None else f"{v:.0f} %" for v in by_epoch)
    return f"{steady_pct:.0f} %; per epoch {per}"


def power_text(p: object) -> str:
    from analyzers.figures.basis import PhaseFigures

    assert isinstance(p, PhaseFigures)
    return f"mean {fmt(p.power_w_mean, '.0f')} W, temperature max {fmt(p.gpu_temp_c_max, '.0f')} °C"


def print_summary(s: object, console: Console) -> None:
    from analyzers.figures.basis import WHOLE_RUN, figures_text
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    imported = bool(s.imported_from)
    what = f"{s.framework} {s.model} on {cases.dataset_label(s.dataset)}, {s.device}, batch {s.batch}"
    if imported:
        what = f"{s.framework} {s.model}, {s.device}, trace imported from {Path(s.imported_from).name}"
    if s.command:
        what = f"{s.command} ({s.framework}, {s.device})"
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
        *([("compile time, whole run", f"{s.compile_s:.3f} s")] if s.compile_s is not None else []),
        *([("data", f"--data {s.data}")] if s.data != DATA_FILES else []),
        *([("decode into memory", f"{s.decode_s:.3f} s, before the first epoch")] if s.decode_s is not None else []),
        ("data wait (steady, % of step time)", _data_wait(s.steady.data_wait_pct, s.data_wait_pct_by_epoch)),
        ("CPU % (steady, 100 = all cores)", f"mean {fmt(s.cpu_pct_mean, '.1f')}, max {fmt(s.cpu_pct_max, '.1f')}"),
        ("peak RSS (steady)", f"{fmt(s.peak_rss_mib, '.0f')} MiB ({fmt(s.peak_rss_pct_ram, '.1f')} % of RAM)"),
        ("threads (steady)", f"min {fmt(s.threads_min)}, median {fmt(s.threads_median)}, max {fmt(s.threads_max)}"),
        ("last loss, accuracy", learning_text(s)),
        *([("GPU", s.gpu)] if s.gpu else []),
        (
            "GPU utilisation (steady)",
            "no GPU sampled" if s.gpu_util_pct_mean is None else f"mean {s.gpu_util_pct_mean:.1f} %",
        ),
        *([("GPU memory, peak (steady)", gpu_memory_text(s))] if s.device == "gpu" else []),
        *([("GPU power, temperature (steady)", power_text(s.steady))] if s.steady.power_w_mean is not None else []),
        *energy_rows(s),
        (f"{WHOLE_RUN} (start-up to teardown)", figures_text(s.whole)),
        ("trainable parameters", fmt(s.trainable_params, ",")),
        ("samples", str(s.samples)),
    ]
    if imported and not s.samples and not s.epochs_done:  # a trace alone: no sampler, no epoch events
        kept = ("run", "what", "status", "batch", "GPU utilisation (steady)", "trainable parameters")
        rows = [r for r in rows if r[0] in kept] + [("samples", "none: an imported trace has its trace tables only")]
    if s.command:  # the script's own model, data and batch: the tool knows only what it measured
        seen = f"seen by the probe ({', '.join(s.probes)})" if s.probes else "none seen (no loop the probe knows)"
        if s.probe_never_loaded:
            seen = PROBE_NEVER_LOADED
        command_rows = {
            "batch": "the script's own (not recorded)",
            "epochs": f"{s.epochs_done}, {seen}",
            "trainable parameters": "the script's own (not recorded)",
        }
        if s.status != "diverged" and all(math.isnan(x) for x in s.loss_by_epoch):
            command_rows["last loss, accuracy"] = (
                "not read (the probe reads it where free: Keras logs, torch backward())"
            )
        rows = [(k, command_rows.get(k, v)) for k, v in rows]
    print_pairs(console, rows)
    console.print(f"folder {s.folder}", soft_wrap=True, markup=False)  # whole, to copy, however narrow
    if s.contended:
        print_wrapped(console, f"warning: {contention_line(s)}")


def learning_text(s: object) -> str:
    """'loss 0.6401, accuracy 71.2 % (epoch 2)'; a non-finite loss as itself; '-' without epochs."""
    from analyzers.figures.run_summary import RunSummary, last_learning

    assert isinstance(s, RunSummary)
    loss, accuracy = last_learning(s)
    if loss is None:
        return "-"
    acc = "accuracy not recorded" if accuracy is None else f"accuracy {100 * accuracy:.1f} %"
    return f"loss {loss:.4f}, {acc} (epoch {len(s.loss_by_epoch)}, training set)"


def gpu_memory_text(s: object) -> str:
    """NVML's process memory (what the allocator holds) beside the framework's own peak in use."""
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    own = (
        f"{s.device_peak_mib:.0f} MiB in use ({s.device_peak_source})"
        if s.device_peak_mib is not None
        else (s.device_peak_source or "not recorded (the run predates it)")
    )
    return f"NVML, the process: {fmt(s.gpu_mem_peak_mib, '.0f')} MiB; the framework's own: {own}"


def steady_text(s: object) -> str:
    """Steady-state images/s with how many epochs it counts, marked when it had to count the warm-up."""
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    if s.steady_images_per_s is None:
        return "-"
    if s.steady_includes_warmup:
        return f"{s.steady_images_per_s:.1f} (all {s.steady_epochs} epochs: none after the warm-up)"
    epochs = f"{s.steady_epochs} epoch{'s' if s.steady_epochs != 1 else ''}"
    return f"{s.steady_images_per_s:.1f} ({epochs} after the first {s.warmup_epochs})"


def contention_line(s: object) -> str:
    from analyzers.figures.contention import Contention
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    return Contention(s.other_cpu_pct, None, s.contended).warning()


def repeats_of(folder: Any) -> list[Any]:
    """The run and its repeats (runs of the same spec, analyzers.figures.repeats) in the same folder of runs."""
    from analyzers.figures.repeats import repeat_key
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
    print_pairs(console, [("over the repeats", "median (min-max)"), *rows])
    from analyzers.figures.noise import REPEATS_DISAGREE, disagree, disagreement
    from analyzers.figures.steady import spread

    rate = spread([s.steady_images_per_s for s in summaries])
    if rate is not None and disagree(rate):
        print_wrapped(
            console,
            f"warning: the repeats disagree: images/s (steady) {disagreement(rate, '.1f')} (more than "
            f"{100 * REPEATS_DISAGREE:.0f} % of their median): their median stands for none of them; "
            "rank nothing on it (a busy machine? `tracer runs` shows each run's load)",
        )
    if contended:
        print_wrapped(console, f"warning: {contended} of {len(summaries)} repeats contended (see `tracer show`)")


def _spread(values: list[float | None], spec: str) -> str:
    from analyzers.figures.steady import spread

    result = spread(values)
    return "-" if result is None else result.text(spec)


def energy_rows(s: object) -> list[tuple[str, str]]:
    """One row per energy source, named; a run without any says so (never 0 J)."""
    from analyzers.figures.energy import NO_SOURCE
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    if not s.energy:
        why = "; ".join(s.energy_unavailable)
        return [("energy", NO_SOURCE + (f" ({why})" if why else ""))]
    rows = []
    for src in s.steady.energy:
        rows.append(
            (
                f"energy, {src.source} (steady)",
                f"{fmt(src.j_per_epoch, '.3f')} J/epoch, {fmt(src.j_per_image, '.4f')} J/image",
            )
        )
    if s.energy_source and " + " in s.energy_source:  # a sum of parts: its total as well
        rows.append(
            (
                f"energy, {s.energy_source} (steady)",
                f"{fmt(s.energy_j_per_epoch, '.3f')} J/epoch, {fmt(s.energy_j_per_image, '.4f')} J/image",
            )
        )
    return rows
