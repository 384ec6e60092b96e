"""The report's Diagnosis section (per case: runs ranked by steady images/s, each run's top verdicts, the
verdicts that differ per pair) and its Findings table (the study's claims re-checked)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analyzers.diagnosis import diagnose, top
from analyzers.diagnosis.across import Labelled, pair_lines, ranked_runs
from analyzers.diagnosis.findings import findings, to_markdown
from analyzers.figures.contention import run_contention
from analyzers.figures.noise import WITHIN_NOISE, why_not_ordered
from analyzers.figures.steady import Spread
from analyzers.report import prose
from analyzers.report.like import UNTRACED, run_kind
from analyzers.report.prose import CaseFindings
from analyzers.report.runs import LoadedRun, by_case
from tracer.core import output as out_file
from tracer.core.schema import DATA_FILES


def diagnosed(runs: Sequence[LoadedRun]) -> list[Labelled]:
    """Frameworks label the runs, with the settings that tell their specs apart (the table rows' labels,
    analyzers.report.tables.case_pools); a framework that repeats in a case gets its run id as well."""
    from analyzers.report.tables import case_pools

    labels = {i: cp.label for cp in case_pools(runs) for i in cp.pool.run_ids}
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.framework] = seen.get(r.framework, 0) + 1
    out = []
    for r in runs:
        label = labels.get(r.run_id, r.framework)
        out.append(Labelled((label if seen[r.framework] == 1 else f"{label} ({r.run_id})") + _fed(r), r))
    return out


def _fed(run: LoadedRun) -> str:
    """' [--data memory]' for a run not fed from files: its epoch time measures another input."""
    data = run.record.spec.data if run.record.spec else DATA_FILES  # an import records none: no tag
    return "" if data == DATA_FILES else f" [--data {data}]"


def case_sections(runs: Sequence[LoadedRun]) -> list[tuple[str, list[str]]]:
    """(case title, lines) per case and kind of run (analyzers.report.like: untraced runs ranked among
    themselves, each tracer's runs apart, as a tracer costs time): ranking, top verdicts per run, then
    differing verdicts per pair."""
    out = []
    for case, whole_group in by_case(runs).items():
        kinds: dict[str, list[LoadedRun]] = {}
        for r in whole_group:
            kinds.setdefault(run_kind(r.record), []).append(r)
        for kind in sorted(kinds, key=lambda k: (k != UNTRACED, k)):
            title = case.title if kind == UNTRACED else f"{case.title}, traced with {kind} (ranked apart)"
            out.append((title, _kind_lines(kinds[kind])))
    return out


def _kind_lines(group: Sequence[LoadedRun]) -> list[str]:
    """The ranking; a run within noise of the one above it (analyzers.figures.noise) is said to be, not ordered."""
    runs_d = ranked_runs(diagnosed(group))
    busy = {r.run_id: run_contention(r).contended for r in group}
    lines = []
    for i, d in enumerate(runs_d, 1):
        epoch = (
            "not ranked (failed or diverged)"
            if not d.ok
            else (
                f"{d.steady_images_per_s:.1f} images/s, {d.steady_epoch_s:.3f} s/epoch, steady"
                if d.steady_images_per_s and d.steady_epoch_s
                else "no epochs"
            )
        )
        above = runs_d[i - 2] if i > 1 else None
        why = _noise(above, d, busy) if above is not None and d.ok and above.ok else ""
        lines.append(f"{i}. {d.label}: {epoch}" + (f" ({WITHIN_NOISE} of {i - 1}.: {why})" if why else ""))
        for v in top(list(d.verdicts)):
            lines.append(f"   - {v.headline()}")
    for _faster, _slower, diffs in pair_lines(runs_d):
        lines += diffs
    return lines


def _noise(a: Labelled, b: Labelled, busy: dict[str, bool]) -> str:
    if a.steady_images_per_s is None or b.steady_images_per_s is None:
        return ""
    ra, rb = a.steady_images_per_s, b.steady_images_per_s
    return why_not_ordered(Spread(ra, ra, ra, 1), Spread(rb, rb, rb, 1), (busy[a.run_id], busy[b.run_id]))


def case_findings(runs: Sequence[LoadedRun], warmup: int) -> list[CaseFindings]:
    """Per case of Tables 1-2 (imported traces aside): its sentences and the verdicts of each row's newest run."""
    from analyzers.report import headline, tables

    by_id = {r.run_id: r for r in runs}
    out = []
    for device in ("cpu", "gpu"):
        for table in headline.case_tables(tables.table_rows(runs, device, warmup)):
            if table.key.imported:
                continue
            labelled = []
            for i, row in enumerate(table.rows):
                run = by_id.get(row.run_ids.split(" ")[-1])
                if run is not None:
                    labelled.append((table.label(i), tuple(diagnose(run))))
            said, items = prose.case_sentences(table), prose.verdict_items(labelled, table.key.slug)
            out.append(CaseFindings(table, tuple(said), tuple(items)))
    return out


def write(runs: Sequence[LoadedRun], out: Path) -> tuple[Path, Path, list[tuple[str, list[str]]], str]:
    """diagnosis.md (the per-case sections) and findings.md; returns both paths, the sections and
    the findings as Markdown."""
    sections = case_sections(runs)
    diag_md = out / "diagnosis.md"
    text = ["# Diagnosis", ""]
    for title, lines in sections:
        text += [f"## {title}", "", *lines, ""]
    out_file.write_text(diag_md, "\n".join(text), "report --out")
    found = to_markdown(findings(list(runs)))
    findings_md = out / "findings.md"
    out_file.write_text(findings_md, "# Findings: the study's claims on these runs\n\n" + found, "report --out")
    return diag_md, findings_md, sections, found
