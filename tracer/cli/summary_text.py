"""A run's summary, repeats and problems as the terminal prints them (`tracer show`, `tracer profile`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console

from tracer.cli.common import (
    fmt,
    print_pairs,
    print_wrapped,
)
from tracer.core import cases
from tracer.core.schema import DATA_FILES
from tracer.core.workload import NOT_RECORDED

PROBE_NEVER_LOADED = (
    "none seen: the probe never started in the command's Python (python -I, -E or -S, or a PYTHONPATH that "
    "replaced the tracer's, keeps it out): steps not recorded"
)


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


def _command_wait(s: object) -> str:
    """A command's data wait, or why it is not measured (steps whose wait the probe did not see)."""
    from analyzers.figures.run_summary import RunSummary
    from analyzers.render.marker import wait_not_seen

    assert isinstance(s, RunSummary)
    if s.steady.data_wait_pct is None and s.probes:
        return f"not measured: {wait_not_seen(s.probes)}"
    return _data_wait(s.steady.data_wait_pct, s.data_wait_pct_by_epoch)


def power_text(p: object) -> str:
    from analyzers.figures.basis import PhaseFigures

    assert isinstance(p, PhaseFigures)
    return f"mean {fmt(p.power_w_mean, '.0f')} W, temperature max {fmt(p.gpu_temp_c_max, '.0f')} °C"


def print_summary(s: object, console: Console) -> None:
    from analyzers.figures import utilisation
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
        ("batch", f"{NOT_RECORDED} (imported trace)" if s.batch is None else str(s.batch)),
        (
            "epochs",
            f"{s.epochs_done}/{s.epochs_planned}" if s.epochs_planned else f"{s.epochs_done} (planned: {NOT_RECORDED})",
        ),
        ("images/s (steady)", steady_text(s)),
        *([("images/s (steady), the job", job_text(s))] if s.rank_images_per_s else []),
        ("epoch time (steady)", f"{fmt(s.steady_epoch_s, '.3f')} s"),
        ("first epoch", f"{fmt(s.first_epoch_s, '.3f')} s (warm-up: first {s.warmup_epochs} left out)"),
        *([("compile time, whole run", f"{s.compile_s:.3f} s")] if s.compile_s is not None else []),
        *([("data", f"--data {s.data}")] if s.data not in (DATA_FILES, "") else []),
        *([("decode into memory", f"{s.decode_s:.3f} s, before the first epoch")] if s.decode_s is not None else []),
        ("data wait (steady, % of step time)", _data_wait(s.steady.data_wait_pct, s.data_wait_pct_by_epoch)),
        ("CPU % (steady, 100 = all cores)", f"mean {fmt(s.cpu_pct_mean, '.1f')}, max {fmt(s.cpu_pct_max, '.1f')}"),
        ("peak memory (steady)", memory_text(s)),
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
        *utilisation.rows(s.utilisation),
        (f"{WHOLE_RUN} (start-up to teardown)", figures_text(s.whole)),
        ("trainable parameters", fmt(s.trainable_params, ",")),
        ("samples", str(s.samples)),
    ]
    if imported and not s.samples and not s.epochs_done:  # a trace alone: no sampler, no epoch events
        kept = {"run", "what", "status", "batch", "GPU utilisation (steady)", "trainable parameters"}
        kept |= {name for name, _ in utilisation.rows(s.utilisation)}  # FLOPs from its shapes, or why not
        rows = [r for r in rows if r[0] in kept] + [("samples", "none: an imported trace has its trace tables only")]
    if s.command:  # the script's own model, data and batch: the tool knows only what it measured
        seen = f"seen by the probe ({', '.join(s.probes)})" if s.probes else "none seen (no loop the probe knows)"
        if s.probe_never_loaded:
            seen = PROBE_NEVER_LOADED
        if s.probe_missed:  # why, where it is known
            why = "; ".join(s.probe_missed)
            seen = f"{seen}; the probe did not load: {why}" if s.probes else f"none seen: the probe did not load: {why}"
        partial = "".join(f"; epoch {e} partial ({n} steps, left out)" for e, n in s.partial_epochs)
        command_rows = {
            "batch": "the script's own (not recorded)",
            "epochs": f"{s.epochs_done}, {seen}{partial}",
            "trainable parameters": "the script's own (not recorded)",
            "data wait (steady, % of step time)": _command_wait(s),
        }
        if s.steady_between_ms is not None:
            at = rows.index(next(r for r in rows if r[0] == "epoch time (steady)")) + 1
            rows.insert(at, ("between steps (steady, per epoch)", f"{s.steady_between_ms:.1f} ms"))
        if s.status != "diverged" and all(math.isnan(x) for x in s.loss_by_epoch):
            command_rows["last loss, accuracy"] = (
                "not read (the probe reads it where free: Keras logs, torch backward())"
            )
        rows = [(k, command_rows.get(k, v)) for k, v in rows]
    print_pairs(console, rows)
    if s.command and not s.probes:
        from analyzers.render.marker import marker_lines

        console.print("to see its steps, add to the script:", markup=False)
        for line in marker_lines(s.framework):
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
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


def memory_text(s: object) -> str:
    """The tree's peak memory: PSS (a page shared by forked workers counted once) with RSS summed beside it."""
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    rss = f"RSS summed over processes {fmt(s.peak_rss_mib, '.0f')} MiB ({fmt(s.peak_rss_pct_ram, '.1f')} % of RAM)"
    if s.peak_pss_mib is None:
        return f"PSS not measured; {rss}"
    return f"PSS {s.peak_pss_mib:.0f} MiB (shared pages counted once); {rss}"


def job_text(s: object) -> str:
    """A data-parallel run's images/s: the job's (every rank's images) beside each rank's."""
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    each = ", ".join(f"rank {r} {v:.1f}" for r, v in enumerate(s.rank_images_per_s))
    return f"{sum(s.rank_images_per_s):.1f}, {len(s.rank_images_per_s)} ranks ({each}); the row above is rank 0's"


def contention_line(s: object) -> str:
    from analyzers.figures.contention import Contention
    from analyzers.figures.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    return Contention(s.other_cpu_pct, None, s.contended).warning()


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
