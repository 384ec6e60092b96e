"""What `diff` says of two runs' model FLOPs utilisation: one sentence, where both runs have one."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from analyzers.figures.run_summary import summarise
from analyzers.figures.utilisation import percent
from analyzers.run.run import Run


def sentence(a: Run, b: Run) -> str | None:
    """'B reaches 31 % of the peak against A's 12 %.' (steady steps; each against its own device's peak)."""
    ua, ub = summarise(a).utilisation, summarise(b).utilisation
    if ua.mfu is None or ub.mfu is None:
        return None
    same = ua.peak.source == ub.peak.source
    peak = "the peak" if same else "its device's peak"
    return f"B reaches {percent(ub.mfu)} of {peak} against A's {percent(ua.mfu)} (MFU, steady steps)."


D = TypeVar("D", bound=Any)  # analyzers.comparison.diff.Diff, not imported: diff imports this module


def with_mfu(d: D, a: Run, b: Run) -> D:
    """`d` (a `Diff`) with the MFU sentence after the others (unchanged where either run has no MFU)."""
    line = sentence(a, b)
    return dataclasses.replace(d, sentences=(*d.sentences, line)) if line else d
