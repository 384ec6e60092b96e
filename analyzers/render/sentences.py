"""Numbers in sentences, through one place, so that a sentence always parses: a duration in a unit that
shows it ("0.8 ms", never "0.00 s"), a share only where it is a share (0 to 100 % of its whole, never
negative, never above the whole: `share` says None otherwise and the sentence words it another way),
counts with thousands separators, and "more"/"less" instead of a sign; and the gap between two runs' times
set against the part one cause explains (`gap_sentence`: compare, diagnose and the report take it from here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from analyzers.figures.coverage import NAMED_PCT
from analyzers.figures.noise import WITHIN_NOISE

# (unit, seconds per unit), largest first: a duration takes the largest unit it reaches 1 of.
UNITS: tuple[tuple[str, float], ...] = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
DIGITS = 3  # significant digits of a duration


def seconds(value: float) -> str:
    """`value` seconds in the largest unit it reaches, to three significant digits: "1.19 ms", "850 µs"."""
    if value == 0 or not math.isfinite(value):
        return "0 s" if value == 0 else "unknown"
    size = abs(value)
    unit, per = next(((u, p) for u, p in UNITS if size >= p), UNITS[-1])
    scaled = value / per
    text = f"{scaled:.{DIGITS}g}"
    if "e" in text:  # 1.23e+03 ns: below the smallest unit's range never happens above it
        text = f"{scaled:.0f}"
    return f"{text} {unit}"


def seconds_pair(a: float, b: float) -> tuple[str, str]:
    """Two durations in one unit (the larger one's), so that "0.80 ms against 1.99 ms" reads as a pair."""
    size = max(abs(a), abs(b))
    if size == 0:
        return "0 s", "0 s"
    unit, per = next(((u, p) for u, p in UNITS if size >= p), UNITS[-1])
    decimals = max(0, DIGITS - 1 - int(math.floor(math.log10(size / per))))
    small = min(abs(a), abs(b))
    if small and round(small / per, decimals) == 0:  # one unit would show the smaller as 0.00: each its own
        return seconds(a), seconds(b)
    return tuple(f"{v / per:.{decimals}f} {unit}" if v else f"0 {unit}" for v in (a, b))  # type: ignore[return-value]


def share(part: float, whole: float) -> float | None:
    """`part` as a fraction of `whole` (0..1), or None where it is not a share of it: a whole of zero,
    a part of the other sign, or a part larger than the whole."""
    if whole == 0 or not math.isfinite(part) or not math.isfinite(whole):
        return None
    value = part / whole
    return value if 0 <= value <= 1 else None


def percent(fraction: float) -> str:
    """A share (0..1) as "93 %"; under 1 % as "<1 %", never "0 %" for something there."""
    if fraction <= 0:
        return "0 %"
    pct = 100 * fraction
    return "<1 %" if pct < 1 else f"{pct:.0f} %"


def more_or_less(delta: float) -> str:
    """The word for a difference's sign: "more" (positive) or "less"."""
    return "more" if delta > 0 else "less"


def count(value: float) -> str:
    """An integer count or rate with thousands separators: "1,256"."""
    return f"{value:,.0f}"


def ratio(a: float, b: float) -> str | None:
    """b / a as "2.5x" (two significant digits; "4,000x" from 10 on), None where a is zero."""
    if a == 0:
        return None
    value = b / a
    return f"{value:,.0f}x" if value >= 10 else f"{value:.2g}x"


# --- the gap between two runs' times and the part of it one cause explains (compare, diagnose, the report)

MIN_GAP_S = 0.005  # a gap that would print as 0.00 s is no gap
MOSTLY = NAMED_PCT / 100  # a part covering this share of its whole is "mostly" it: the one coverage rule


@dataclass(frozen=True)
class Gap:
    """The gap between two runs' times and one part of those times (e.g. the data wait per epoch).

    Before this, `compare` printed "data wait explains -0.64 of the 2.50 s gap", "explains -0.69 of the
    0.00 s gap" and "the gap in epoch time is mostly data wait (0.90 of 0.48 s)": here a part is set against
    a whole only when it is one (`share`)."""

    what: str  # "epoch time"
    part: str  # "data wait"
    slower_s: float
    faster_s: float
    part_slower_s: float  # the part in the slower run
    part_faster_s: float
    noise: str = ""  # analyzers.figures.noise.why_not_ordered of the two times: '' when the gap is beyond noise
    mostly: float = MOSTLY  # above this share of the gap the part is "mostly" it (the diagnosis' threshold)

    @property
    def gap_s(self) -> float:
        return self.slower_s - self.faster_s

    @property
    def part_gap_s(self) -> float:
        return self.part_slower_s - self.part_faster_s


def gap_sentence(g: Gap) -> str:
    """How much of the gap in `g.what` its `g.part` explains, in words that parse: a part that went the other
    way "does not explain" it, a part larger than the gap "differs by more than the whole gap", a gap within
    noise or too small to print is not explained at all."""
    gap, part = g.gap_s, g.part_gap_s
    if g.noise or gap < MIN_GAP_S:
        return f"the {g.what}s are {WITHIN_NOISE}" + (f" ({g.noise})" if g.noise else "")
    fraction = share(part, gap)
    part_text, gap_text = seconds_pair(part, gap)  # one unit: "0.60 s of the 1.00 s gap"
    if part <= 0:
        return f"{g.part} does not explain the {seconds(gap)} gap in {g.what} (the slower run waits no longer)"
    if fraction is None:  # the part is larger than the whole gap
        return (
            f"{g.part} alone differs by more than the whole {gap_text} gap in {g.what} ({part_text}): "
            "the rest of the slower run's step is faster"
        )
    if fraction >= g.mostly:
        return f"the {gap_text} gap in {g.what} is mostly {g.part} ({part_text} of it, {percent(fraction)})"
    return (
        f"{g.part} explains {part_text} of the {gap_text} gap in {g.what} ({percent(fraction)}; the other "
        f"{percent(1 - fraction)} is not {g.part}, and no part here covers {percent(g.mostly)} of it)"
    )


def versus(label_a: str, value_a: str, label_b: str, value_b: str, title: str) -> str:
    """'B (jax): input-bound 91 % vs A (pytorch) 53 %'."""
    return f"{label_a}: {title} {value_a} vs {label_b} {value_b}"
