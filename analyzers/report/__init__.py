"""The study's tables and figures regenerated from run folders: `tables` and `series` compute,
`charts` and `html` render, `build` plans the steps and `write_report` runs them all."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from analyzers.figures.steady import WARMUP_EPOCHS
from analyzers.report import charts
from analyzers.report.build import plan_report
from analyzers.report.html import write_index
from analyzers.report.outputs import Output, Step
from analyzers.report.runs import LoadedRun, collect_runs
from analyzers.run.run import problems_of

__all__ = ["Output", "Step", "collect_runs", "contention_warnings", "plan_report", "write_report"]


def write_report(
    runs: Sequence[LoadedRun],
    out: Path,
    formats: Sequence[str] = charts.FORMATS,
    warnings: Sequence[str] = (),
    on_step: Callable[[Step], None] | None = None,
    warmup: int = WARMUP_EPOCHS,
    single_file: bool = False,
) -> tuple[Path, list[Output]]:
    """Writes every table and figure into `out` (created if needed) and `out/index.html`; `on_step`
    is called before each step (for progress); `single_file`: the page embeds its figures and links to
    no other file. Returns the page and what was written."""
    out.mkdir(parents=True, exist_ok=True)
    outputs = []
    contended = contention_warnings(runs)
    for step in plan_report(runs, out, formats, warmup):
        if on_step is not None:
            on_step(step)
        result = step.run()
        if result is not None:
            outputs.append(result)
        for run in runs:  # what a step computed stays (summaries); the tables it read are read again if needed
            run.release()
    warnings = [*warnings, *(p.text() for p in problems_of(runs))]  # damaged files the steps met and skipped
    return write_index(out, runs, outputs, warnings, contended, single_file), outputs


def contention_warnings(runs: Sequence[LoadedRun]) -> list[str]:
    """One line per run taken on a busy machine (analyzers.figures.contention), shown at the top of the page."""
    from analyzers.figures.contention import run_contention

    out = []
    for run in runs:
        load = run_contention(run)
        if load.contended:
            out.append(f"run {run.run_id}: {load.warning()}")
    return out
