"""The report steps of a case's comparison figures (`analyzers.report.case_charts`): the frameworks side by
side on the table's numbers, and `tracer diff`'s step decomposition."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from analyzers.report import charts, classes, tables
from analyzers.report.outputs import Output
from analyzers.report.runs import CaseKey, LoadedRun


def frameworks_step(
    case: CaseKey, group: Sequence[LoadedRun], out: Path, formats: Sequence[str], warmup: int
) -> Callable[[], Output | None]:
    """The case's table rows as bars on shared axes (analyzers.report.case_charts): speed, data wait, GPU, energy."""

    def step() -> Output | None:
        from analyzers.report import case_charts, headline

        found = headline.case_tables(tables.table_rows(group, case.device, warmup))
        bars = case_charts.bars_of(found[0]) if found else []
        if len(bars) < 2:
            return None
        fig = case_charts.frameworks_figure(f"Frameworks side by side, steady state\n{case.title}", bars)
        files = charts.save(fig, out / f"fig-frameworks-{case.slug}", formats)
        caption = (
            "One bar per row of the case's table (Tables 1-2), with its number: the steady state's images/s (the "
            "range of the repeats in brackets), the share of the step spent waiting for data, the GPU's busy "
            "share and the GPU's energy per image. Rows differ by framework and by the settings named under it; "
            "a ranking is said in the findings only beyond the noise of repeats."
        )
        return Output("figure", f"Frameworks side by side: {case.title}", files, caption)

    return step


def step_parts_step(
    case: CaseKey, group: Sequence[LoadedRun], out: Path, formats: Sequence[str]
) -> Callable[[], Output | None]:
    """`tracer diff`'s step decomposition of each framework's run as stacked bars (analyzers.report.case_charts)."""

    def step() -> Output | None:
        from analyzers.report import case_charts

        parts = {fw: d for fw, d in classes.case_parts(group).items() if d.parts and d.images_per_s}
        if len(parts) < 2:
            return None
        fig = case_charts.step_parts_figure(f"Where the steady step goes, per image\n{case.title}", parts)
        files = charts.save(fig, out / f"fig-step-parts-{case.slug}", formats)
        runs = ", ".join(f"{d.run_id} ({d.basis})" for d in parts.values())
        caption = (
            "The steady step of each framework's run per image, split into the parts `tracer diff` compares "
            "(analyzers.figures.step_parts): the parts add up to the step. Where a framework returns before its "
            f"work is done (JAX, MXNet) compute and synchronising are one part. Runs: {runs}."
        )
        return Output("figure", f"Where the steady step goes: {case.title}", files, caption)

    return step
