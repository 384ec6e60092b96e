"""The step-parts renderer: one run's steady step per image, part by part, as the lines `tracer show` prints
(analyzers.figures.step_parts computes the parts; this only words them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzers.render import sentences as say

if TYPE_CHECKING:
    from analyzers.figures.step_parts import Decomposition


def step_parts_lines(d: Decomposition) -> list[str]:
    """The parts, largest first, with their shares of the step, then the decomposition's notes; no lines for
    a run with neither parts nor a step time."""
    if not d.parts or not d.step_s:
        return []
    ranked = sorted(d.parts, key=lambda p: -p.seconds)
    text = ", ".join(
        f"{p.label} {say.seconds(p.seconds)} ({say.percent(p.seconds / d.step_s)})" for p in ranked if p.seconds > 0
    )
    return [f"steady step per image ({d.basis}): {say.seconds(d.step_s)} = {text}", *(f"   {n}" for n in d.notes)]
