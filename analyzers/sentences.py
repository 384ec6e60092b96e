"""Generated sentences with numbers in them, made from typed values in one place, so that none can say
what does not parse: a negative share of a gap, a gap of 0.00 s, a share larger than its whole, an
order the noise does not support.

Before this module, `compare` printed "data wait explains -0.64 of the 2.50 s gap", "explains -0.69 of
the 0.00 s gap" and "the gap in epoch time is mostly data wait (0.90 of 0.48 s)". Here a part is set
against a whole only when it is one: a part that went the other way "does not explain" the gap, a part
larger than the gap "differs by more than the whole gap", a gap within noise is not explained at all.
compare, diagnose and the report take their sentences from here (`tracer diff` may share it: new
sentences belong here, not inline where a number is formatted).
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.noise import WITHIN_NOISE

MIN_GAP_S = 0.005  # a gap that would print as 0.00 s is no gap
MOSTLY = 0.5  # a part above half of its whole is "mostly" it


def seconds(value: float) -> str:
    """Seconds with as many decimals as the size needs ('12.3 s', '0.48 s', '0.034 s'): never '0.00 s'
    for a time that is not zero."""
    size = abs(value)
    return f"{value:.1f} s" if size >= 10 else f"{value:.2f} s" if size >= 0.1 else f"{value:.3f} s"


def share(part: float, whole: float) -> str | None:
    """'38 %' of a part in [0, whole]; None where the part is no share of the whole (negative, larger than
    it, or the whole is nothing): say something else then."""
    if whole <= 0 or part < 0 or part > whole:
        return None
    return f"{100 * part / whole:.0f} %"


@dataclass(frozen=True)
class Gap:
    """The gap between two runs' times and one part of those times (e.g. the data wait per epoch)."""

    what: str  # "epoch time"
    part: str  # "data wait"
    slower_s: float
    faster_s: float
    part_slower_s: float  # the part in the slower run
    part_faster_s: float
    noise: str = ""  # analyzers.noise.why_not_ordered of the two times: '' when the gap is beyond noise

    @property
    def gap_s(self) -> float:
        return self.slower_s - self.faster_s

    @property
    def part_gap_s(self) -> float:
        return self.part_slower_s - self.part_faster_s


def gap_sentence(g: Gap) -> str:
    """How much of the gap in `g.what` its `g.part` explains, in words that parse: '' for a gap within
    noise or too small to print."""
    gap, part = g.gap_s, g.part_gap_s
    if g.noise or gap < MIN_GAP_S:
        return f"the {g.what}s are {WITHIN_NOISE}" + (f" ({g.noise})" if g.noise else "")
    if part <= 0:
        return f"{g.part} does not explain the {seconds(gap)} gap in {g.what} (the slower run waits no longer)"
    if part > gap:
        return (
            f"{g.part} alone differs by more than the whole {seconds(gap)} gap in {g.what} ({seconds(part)}): "
            "the rest of the slower run's step is faster"
        )
    if part / gap > MOSTLY:
        return f"the {seconds(gap)} gap in {g.what} is mostly {g.part} ({seconds(part)} of it)"
    return f"{g.part} explains {seconds(part)} of the {seconds(gap)} gap in {g.what}"


def versus(label_a: str, value_a: str, label_b: str, value_b: str, title: str) -> str:
    """'B (jax): input-bound 91 % vs A (pytorch) 53 %'."""
    return f"{label_a}: {title} {value_a} vs {label_b} {value_b}"
