"""A report as a plan of steps (so a caller can show progress), each writing files into one folder.

`plan_report` decides what there is to draw from the runs given; running every step and then
`html.write_index` gives the finished folder. Nothing here draws or formats: it wires the pure
analyses (`tables`, `series`) to the renderers (`charts`, `tables.write_csv`, `html`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from analyzers.comparison import pairs
from analyzers.figures.steady import WARMUP_EPOCHS
from analyzers.report import case_steps, charts, classes, like, prose, series, tables
from analyzers.report.outputs import Output, Step
from analyzers.report.runs import CaseKey, LoadedRun, by_case
from analyzers.summaries import cuda_api
from tracer.core import output as out_file
from tracer.core.schema import DATA_FILES, DATA_MODES

TABLES = (("cpu", "table1-cpu", "Table 1: CPU training"), ("gpu", "table2-gpu", "Table 2: GPU training"))
PAIRS_STEM, PAIRS_TITLE = "input-pipeline", "Input pipeline: files, memory and synthetic data side by side"


def plan_report(
    runs: Sequence[LoadedRun], out: Path, formats: Sequence[str] = charts.FORMATS, warmup: int = WARMUP_EPOCHS
) -> list[Step]:
    """Every step of the report on `runs`, in the order the page shows them. Figures a case has no
    data for (CUDA API without a trace, energy without NVML) are not planned. Runs of users' own
    commands get a section of their own, grouped by command (they are no case of the study)."""
    commands = [r for r in runs if r.record.command is not None]
    runs = [r for r in runs if r.record.command is None]
    steps = [
        Step(f"writing {title}", _table_step(runs, device, out / stem, title, warmup)) for device, stem, title in TABLES
    ]
    if pairs.data_pairs(r for r in runs):
        steps.append(Step("comparing the data modes", _pairs_step(runs, out, warmup)))
    steps.append(Step("diagnosing the runs", _diagnosis_step(runs, out, warmup)))
    if any(r.record.world_size > 1 for r in runs):
        steps.append(Step("comparing the ranks", _ranks_step(runs, out)))
    cases = {case: _one_data_mode(group) for case, group in by_case(runs).items()}  # figures: one mode per case
    for case, group in cases.items():  # the comparison first: the figure a reader looks at
        if sum(r.ok and r.record.rankable for r in group) >= 2:
            made = case_steps.frameworks_step(case, group, out, formats, warmup)
            steps.append(Step(f"drawing {case.name} side by side", made))
    for case, group in cases.items():
        if any(r.ok and r.epochs() for r in group):
            steps.append(
                Step(f"drawing throughput of {case.name}", _throughput_step(case, group, out, formats, warmup))
            )
    for case, group in cases.items():
        choice = like.choose(group, _has_process_samples)
        if choice:
            steps.append(Step(f"drawing resources of {case.name}", _resource_step(case, choice, out, formats)))
    for case, group in cases.items():
        choice = like.choose(group, _has_cuda, traced_only=True)
        if choice:
            steps.append(Step(f"summarising CUDA API calls of {case.name}", _cuda_step(case, choice, out, formats)))
    for case, group in cases.items():
        choice = like.choose(group, classes.has_classes, traced_only=True)
        if choice:
            steps.append(
                Step(
                    f"splitting GPU time by kernel class of {case.name}",
                    _class_step(case, choice.runs, out, formats),
                )
            )
    if any(len({r.framework for r in group}) > 1 for group in cases.values()):
        steps.append(Step("explaining why frameworks differ", _diff_step(cases, out)))
    for case, group in cases.items():
        if len({r.framework for r in group}) > 1:
            steps.append(
                Step(f"splitting the steps of {case.name}", case_steps.step_parts_step(case, group, out, formats))
            )
    for case, group in cases.items():
        choice = like.choose(group, _has_gpu_samples)
        if choice:
            steps.append(Step(f"computing GPU energy of {case.name}", _energy_step(case, choice, out, formats)))
    steps.append(Step("drawing the roofline", _roofline_step(runs, out, formats)))
    if commands:
        steps.append(Step("summarising the commands", _commands_step(commands, out)))
    return steps


def _roofline_step(runs: Sequence[LoadedRun], out: Path, formats: Sequence[str]) -> Callable[[], Output | None]:
    def step() -> Output | None:
        from analyzers.report import roofline

        made = roofline.write(runs, out, formats)
        return Output("figure", made[0], made[1], made[2]) if made else None

    return step


def _commands_step(runs: Sequence[LoadedRun], out: Path) -> Callable[[], Output]:
    def step() -> Output:
        from analyzers.report import commands

        path, text = commands.write(runs, out)
        return Output("section", commands.TITLE, [path], text=text)

    return step


def _one_data_mode(group: Sequence[LoadedRun]) -> list[LoadedRun]:
    """The runs of a case fed one way: files where there are such runs (the other modes are in the
    input-pipeline table), so a figure never pools a synthetic run with a files run."""
    modes = [m for m in DATA_MODES if any(r.record.setting("data") == m for r in group)]
    return [r for r in group if (r.record.setting("data") or DATA_FILES) == (modes[0] if modes else DATA_FILES)]


def _has_process_samples(run: LoadedRun) -> bool:
    folder = run
    return folder.sample_parquet_path("process").exists() or folder.sample_stream_path("process").exists()


def _has_gpu_samples(run: LoadedRun) -> bool:
    folder = run
    return folder.samples_dir.joinpath("gpu.parquet").exists() or folder.sample_stream_path("gpu").exists()


def _has_cuda(run: LoadedRun) -> bool:
    from analyzers.trace import tables as trace_tables

    return trace_tables.present(run, trace_tables.CUDA_API)


def _note(run: LoadedRun) -> str:
    """What a figure says under a run's framework: how it ended when not ok, and whether it was contended."""
    parts = ([] if run.ok else [run.record.outcome.status.value]) + (["contended"] if _contended(run) else [])
    return f"({'; '.join(parts)})" if parts else ""


def _contended(run: LoadedRun) -> bool:
    """Taken while other processes held a share of the CPU (analyzers.figures.contention), as the page's
    warnings say."""
    from analyzers.figures.contention import run_contention

    return run_contention(run).contended


def _marks(choice: like.Choice) -> dict[str, str]:
    return {fw: "contended" for fw in choice.contended}


CONTENDED_NOTE = (
    " A framework marked 'contended' (bars hatched) ran while other processes held a share of the CPU: "
    "its times do not compare with a quiet machine's."
)


def _table_step(runs: Sequence[LoadedRun], device: str, base: Path, title: str, warmup: int) -> Callable[[], Output]:
    def step() -> Output:
        rows = tables.table_rows(runs, device, warmup)
        csv_path, md_path = base.with_suffix(".csv"), base.with_suffix(".md")
        tables.write_csv(rows, csv_path)
        out_file.write_text(md_path, tables.to_markdown(rows, device, title), "report --out")
        return Output("table", title, [csv_path, md_path], rows=rows, device=device)

    return step


def _pairs_step(runs: Sequence[LoadedRun], out: Path, warmup: int) -> Callable[[], Output]:
    def step() -> Output:
        found = pairs.data_pairs((r for r in runs), warmup)
        md_path, csv_path = out / f"{PAIRS_STEM}.md", out / f"{PAIRS_STEM}.csv"
        lines = pairs.markdown_lines(found)
        out_file.write_text(md_path, f"### {PAIRS_TITLE}\n\n" + "\n".join(lines) + "\n", "report --out")
        pairs.write_csv(found, csv_path)
        sentences = [f"{p.framework} {p.model} ({p.device}): {p.sentence()}" for p in found if p.sentence()]
        return Output("section", PAIRS_TITLE, [md_path, csv_path], text=[(PAIRS_TITLE, lines), ("In words", sentences)])

    return step


RANKS_TITLE, RANKS_STEM = "Ranks side by side", "ranks"


def _ranks_step(runs: Sequence[LoadedRun], out: Path) -> Callable[[], Output]:
    """Each run of several ranks: its ranks' step time, data wait and communication (analyzers.figures.ranks)."""

    def step() -> Output:
        from analyzers.figures.ranks import markdown_lines, rank_table

        text = []
        for r in runs:
            table = rank_table(r)
            if table is not None:
                text.append((r.run_id, markdown_lines(r.run_id, table)))
                text += _comm_sections(r.run_id, r)
        md_path = out / f"{RANKS_STEM}.md"
        ranks_md = f"### {RANKS_TITLE}\n\n" + "\n\n".join("\n".join(lines) for _, lines in text) + "\n"
        out_file.write_text(md_path, ranks_md, "report --out")
        return Output("section", RANKS_TITLE, [md_path], text=text)

    return step


def _comm_sections(run_id: str, folder: Any) -> list[tuple[str, list[str]]]:
    """A run's collectives table, straggler summary and the straggler in words (its cause's coverage), each a
    section of its own below its ranks (a section's table rows make one table)."""
    from analyzers.figures import collectives, straggler

    out: list[tuple[str, list[str]]] = []
    found = collectives.table(folder)
    if found is not None:
        out.append((f"{run_id}: collectives", collectives.markdown_lines(found)))
    s = straggler.straggler(folder)
    if s is not None and s.summary:
        out.append((f"{run_id}: straggler summary", straggler.rank_lines(s)))
        out.append((f"{run_id}: straggler", straggler.summary_lines(s)))
    return out


FINDINGS_TITLE, SUMMARY_STEM = "Findings, case by case", "summary"
CLAIMS_TITLE = "The study's claims on these runs"


def _diagnosis_step(runs: Sequence[LoadedRun], out: Path, warmup: int) -> Callable[[], Output]:
    """The findings in sentences per case (summary.md), the study's claims (findings.md) and the full
    diagnosis (diagnosis.md: every run's ranking and verdicts)."""

    def step() -> Output:
        from analyzers.report import diagnosis

        diag_md, findings_md, sections, found = diagnosis.write(runs, out)
        cases = diagnosis.case_findings(runs, warmup)
        summary_md = out / f"{SUMMARY_STEM}.md"
        out_file.write_text(summary_md, prose.markdown(cases), "report --out")
        text = [(CLAIMS_TITLE, found.splitlines())] + sections
        files = [summary_md, findings_md, diag_md]
        return Output("findings", FINDINGS_TITLE, files, text=text, findings=cases)

    return step


def _resource_step(case: CaseKey, choice: like.Choice, out: Path, formats: Sequence[str]) -> Callable[[], Output]:
    chosen = choice.runs

    def step() -> Output:
        data = {fw: series.resource_series(r) for fw, r in chosen.items()}
        env = {fw: r.record.environment for fw, r in chosen.items()}
        fig = charts.resource_figure(
            f"CPU, RAM and threads over time\n{case.title}",
            data,
            {fw: _note(r) for fw, r in chosen.items()},
            {fw: e.cpu_logical_cores for fw, e in env.items()},
            {fw: e.ram_total_mib / 1024 for fw, e in env.items()},
            {fw: choice.title(fw) for fw in chosen},
        )
        files = charts.save(fig, out / f"fig-resources-{case.slug}", formats)
        hz = sorted({f"{r.record.measurement.sample_hz:g}" for r in chosen.values()})
        caption = (
            f"The training process and its children, sampled at {' / '.join(hz)} Hz; shaded bands are epochs. "
            "All columns share one time axis (seconds since each run's start), so run lengths compare; "
            "'contended' under a name: other processes held a share of the CPU during that run. "
            "Each panel's title says how its run was measured: the figure draws runs of one kind. " + choice.caption()
        )
        return Output("figure", f"CPU %, RAM % and threads over time: {case.title}", files, caption)

    return step


def _throughput_step(
    case: CaseKey, group: Sequence[LoadedRun], out: Path, formats: Sequence[str], warmup: int
) -> Callable[[], Output]:
    def step() -> Output:
        bars = throughput_bars(group, warmup)
        fig = charts.throughput_figure(f"Training throughput\n{case.title}", bars, warmup)
        files = charts.save(fig, out / f"fig-throughput-{case.slug}", formats)
        counted = [i for cp in tables.case_pools(group, warmup) for i in cp.pool.counted]
        caption = (
            f"Left: images/s over the epochs after the first {warmup} (the steady state), median over the repeats "
            "of one spec (the rows of Tables 1-2: trace backend and knobs alike) with their range; diverged and "
            "failed runs left out. Right: every epoch's time in the newest run of each, warm-up shaded; the legend "
            "is below the panels."
            + "".join(
                f" Fed by --data {m}."
                for m in sorted({r.record.setting("data") or DATA_FILES for r in group})
                if m != DATA_FILES
            )
            + (CONTENDED_NOTE if any(b.mark for b in bars) else "")
            + " Runs: "
            + ", ".join(counted)
            + "."
        )
        return Output("figure", f"Training throughput: {case.title}", files, caption)

    return step


def throughput_bars(group: Sequence[LoadedRun], warmup: int = WARMUP_EPOCHS) -> list[series.ThroughputBar]:
    """The throughput figure's bars: one per pool of `tables.case_pools`, the table rows' own pools."""
    bars = []
    for cp in tables.case_pools(group, warmup):
        newest = next((r for r in reversed(cp.runs) if r.run_id in cp.pool.counted), None)
        epoch_s = tuple(e.duration_s for e in newest.epochs()) if newest else ()
        note = ", ".join(sorted({r.record.outcome.status.value for r in cp.runs if not r.record.rankable}))
        counted = [r for r in cp.runs if r.run_id in cp.pool.counted]
        contended = sum(_contended(r) for r in counted)
        mark = "" if not contended else "contended" if len(counted) == 1 else f"{contended} of {len(counted)} contended"
        bars.append(series.ThroughputBar(cp.framework, cp.label, cp.pool.throughput, epoch_s, note, mark))
    return bars


def _cuda_step(case: CaseKey, choice: like.Choice, out: Path, formats: Sequence[str]) -> Callable[[], Output]:
    chosen = choice.runs

    def step() -> Output:
        phases = {fw: series.cuda_phases(r) for fw, r in chosen.items()}
        panels = []
        for phase, label in (("whole", "whole run"), ("steady", "steady state: the epochs after the warm-up")):
            shares = {fw: p[phase] for fw, p in phases.items() if p.get(phase)}
            names, grouped = series.group_shares(shares)
            panels.append((label, names, grouped))
        api = "/".join(dict.fromkeys(cuda_api.api_family(r) for r in chosen.values())) + " API"
        marks = _marks(choice)
        titles = {fw: choice.title(fw) for fw in chosen}
        fig = charts.cuda_api_figure(f"Share of {api} time per function\n{case.title}", panels, api, marks, titles)
        files = charts.save(fig, out / f"fig-cuda-api-{case.slug}", formats)
        caption = (
            f"Functions with at least 1 % of the {api} time in some framework; the rest is grouped as 'other'. "
            "Steady state: the calls that start in the epochs after the warm-up (the NVTX epoch ranges; start-up "
            "and the warm-up epoch's module loading and pinned-memory allocation are left out)."
            + (CONTENDED_NOTE.replace(" (bars hatched)", "") if marks else "")
            + " "
            + choice.caption()
        )
        return Output("figure", f"{api} time per function: {case.title}", files, caption)

    return step


def _class_step(
    case: CaseKey, chosen: dict[str, LoadedRun], out: Path, formats: Sequence[str]
) -> Callable[[], Output | None]:
    def step() -> Output | None:
        made = classes.class_figure(case, chosen, out, formats)
        if made is None:
            return None
        return Output("figure", f"GPU time per image by kernel class: {case.title}", made[0], made[1])

    return step


def _diff_step(cases: dict[CaseKey, list[LoadedRun]], out: Path) -> Callable[[], Output | None]:
    def step() -> Output | None:
        made = classes.diff_sections(cases, out)
        if made is None:
            return None
        return Output("section", classes.DIFF_TITLE, [made[0]], text=made[1])

    return step


def _energy_step(case: CaseKey, choice: like.Choice, out: Path, formats: Sequence[str]) -> Callable[[], Output | None]:
    chosen = choice.runs

    def step() -> Output | None:
        energy = {fw: rows for fw, r in chosen.items() if (rows := series.epoch_energy(r))}
        if not energy:
            return None
        marks = {fw: m for fw, m in _marks(choice).items() if fw in energy}
        titles = {fw: choice.title(fw) for fw in energy}
        fig = charts.energy_figure(f"GPU energy and power per epoch\n{case.title}", energy, marks, titles)
        files = charts.save(fig, out / f"fig-energy-{case.slug}", formats)
        caption = (
            "Sum over the GPUs the run used. Tables 1-2's energy per epoch is the mean of the steady epochs' bars."
            + (CONTENDED_NOTE.replace(" (bars hatched)", "") if marks else "")
            + " "
            + choice.caption()
        )
        return Output("figure", f"GPU energy and power per epoch: {case.title}", files, caption)

    return step
