"""The report's section on users' own training (`tracer profile -- COMMAND`): one table per command,
one row per run of it, on the figures a command's own steps give (the built-in tables are about cases
of the study, which a command is not)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analyzers.figures.run_summary import RunSummary, summarise
from analyzers.report.runs import LoadedRun
from tracer.core import output as out_file

TITLE = "Your own training: commands"
STEM = "commands"
COLUMNS = ("run", "framework", "status", "steps seen by", "step ms (steady)", "data wait %", "CPU %", "peak RSS MiB",
           "threads")  # fmt: skip


def by_command(runs: Sequence[LoadedRun]) -> dict[str, list[LoadedRun]]:
    """Command runs grouped by their command (argv as typed) in the order first met."""
    groups: dict[str, list[LoadedRun]] = {}
    for run in runs:
        if run.record.command is not None:
            groups.setdefault(run.record.command.text, []).append(run)
    return groups


def _cells(s: RunSummary) -> tuple[str, ...]:
    def f(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    return (s.run_id, s.framework, s.status, ", ".join(s.probes) or "-", f(s.steady_step_ms, ".1f"),
            f(s.steady_data_wait_pct, ".0f"), f(s.cpu_pct_mean, ".1f"), f(s.peak_rss_mib, ".0f"),
            f(s.threads_median, "g"))  # fmt: skip


def write(runs: Sequence[LoadedRun], out: Path) -> tuple[Path, list[tuple[str, list[str]]]]:
    """commands.md (a table per command) and the section's text for the page."""
    text: list[tuple[str, list[str]]] = []
    md = [f"### {TITLE}", ""]
    for command, group in by_command(runs).items():
        rows = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
        rows += ["| " + " | ".join(_cells(summarise(r))) + " |" for r in group]
        md += [f"`{command}`", "", *rows, ""]
        text.append((command, rows))
    path = out / f"{STEM}.md"
    out_file.write_text(path, "\n".join(md) + "\n", "report --out")
    return path, text
