"""Diagnosis: named rules over one run folder's tables, each returning a verdict (finding, severity,
evidence with units, the knob to try); thresholds in `thresholds`. `diagnose` runs them all."""

from __future__ import annotations

import dataclasses

from analyzers.diagnosis import (
    rules_gpu,  # noqa: F401 - registers the rules (host ones first, see there)
    rules_learning,  # noqa: F401 - then whether the run learns
    rules_mfu,  # noqa: F401 - then how much of the GPU's peak the steps reach
    rules_ranks,  # noqa: F401 - then, for a run of several ranks, the straggler
)
from analyzers.diagnosis.inputs import RunTables, load
from analyzers.diagnosis.knobs import for_command
from analyzers.diagnosis.verdict import RULES, Evidence, Severity, Verdict, ranked
from analyzers.run.memo import per_run
from analyzers.run.run import Run

__all__ = [
    "RULES",
    "Evidence",
    "RunTables",
    "Severity",
    "Verdict",
    "diagnose",
    "diagnose_tables",
    "load",
    "ranked",
    "top",
]
TOP = 3


def diagnose_tables(tables: RunTables) -> list[Verdict]:
    """Every rule's verdict, in declaration order; a command's knobs in its script's words."""
    verdicts = [fn(tables) for fn in RULES.rules.values()]
    if tables.record.command is not None:
        verdicts = [dataclasses.replace(v, knob=for_command(v.knob)) for v in verdicts]
    return verdicts


@per_run
def diagnose(run: Run) -> list[Verdict]:
    """Every rule's verdict on the run, judged once per run (`tracer show`, `compare`, the report and the
    viewer's tab ask for the same verdicts; the inputs: `analyzers.diagnosis.inputs.load`)."""
    return diagnose_tables(load(run))


def top(verdicts: list[Verdict], n: int = TOP) -> list[Verdict]:
    """The `n` fired verdicts that matter most (fewer when fewer fired)."""
    return [v for v in ranked(verdicts) if v.fired][:n]
