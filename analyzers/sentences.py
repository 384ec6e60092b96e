"""Numbers in sentences, through one place, so that a sentence always parses: a duration in a unit that
shows it ("0.8 ms", never "0.00 s"), a share only where it is a share (0 to 100 % of its whole, never
negative, never above the whole: `share` says None otherwise and the sentence words it another way),
counts with thousands separators, and "more"/"less" instead of a sign."""

from __future__ import annotations

import math

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
