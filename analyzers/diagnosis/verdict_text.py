"""The verdicts' renderer: what `tracer diagnose` prints for each rule and what the Diagnosis block of
`tracer profile` and `tracer show` prints for the few that matter. It sits in the diagnosis package, not in
analyzers.render, because analyzers.render is a layer below the verdicts it would word."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analyzers.diagnosis.verdict import Verdict

NOTHING_FIRED = "no rule fired (`tracer diagnose` lists every rule)"


def verdict_head(v: Verdict) -> str:
    """The rule, its state and, when it fired, its severity."""
    severity = f", {v.severity.name.lower()}" if v.fired else ""
    return f"{v.rule}: {v.state}{severity}"


def verdict_body(v: Verdict) -> list[str]:
    """The finding, its evidence and, when it fired, the knob to try: one paragraph each."""
    lines = [v.finding]
    if v.evidence:
        lines.append("evidence: " + "; ".join(e.text() for e in v.evidence))
    if v.fired and v.knob:
        lines.append(f"try: {v.knob}")
    return lines


def top_lines(verdicts: list[Verdict]) -> list[str]:
    """The Diagnosis block's lines: one headline per verdict that matters, or that none fired."""
    return [f"- {v.headline()}" for v in verdicts] if verdicts else [NOTHING_FIRED]
