"""Diagnosis: named rules over one run folder's tables, each returning a verdict (finding, severity,
evidence with units, the knob to try); thresholds in `thresholds`. `diagnose` runs them all."""

from __future__ import annotations

from analyzers.diagnosis import (
    rules_gpu,  # noqa: F401 - registers the rules (host ones first, see there)
    rules_learning,  # noqa: F401 - then whether the run learns
    rules_ranks,  # noqa: F401 - then, for a run of several ranks, the straggler
)
from analyzers.diagnosis.inputs import RunTables, load
from analyzers.diagnosis.verdict import RULES, Evidence, Severity, Verdict, ranked
from tracer.core.runfolder import RunFolder

__all__ = ["RULES", "Evidence", "RunTables", "Severity", "Verdict", "diagnose", "diagnose_tables", "ranked", "top"]
TOP = 3


def diagnose_tables(tables: RunTables) -> list[Verdict]:
    """Every rule's verdict, in declaration order."""
    return [fn(tables) for fn in RULES.rules.values()]


def diagnose(folder: RunFolder) -> list[Verdict]:
    return diagnose_tables(load(folder))


def top(verdicts: list[Verdict], n: int = TOP) -> list[Verdict]:
    """The `n` fired verdicts that matter most (fewer when fewer fired)."""
    return [v for v in ranked(verdicts) if v.fired][:n]
