"""When two figures may be ordered: only beyond the noise of their repeats, and never from contended runs.

Two PyTorch repeats ran at 4.2 and 10.7 images/s on a busy machine; a ratio of 3.25x between them and
another run is noise, not a finding, and so is TensorFlow's 24.2 above MXNet's 24.1. The rules, in order:
a figure from a contended run (analyzers.figures.contention) is not ordered against another, for figures that
depend on the machine's load (`Figure.timed` in analyzers.figures.basis); repeats that disagree (their range is
wider than `REPEATS_DISAGREE` of their median) order nothing; two groups whose repeat ranges overlap are
within noise; two speeds closer than `MIN_DIFFERENCE` are within noise even without repeats to show it.
Every ranking and ratio that is printed as a finding (compare, the report's ranking, the diagnosis'
sentences) asks `why_not_ordered` first; an empty answer means the order is beyond the noise.
"""

from __future__ import annotations

from analyzers.figures.steady import Spread

REPEATS_DISAGREE = 0.20  # repeats whose max - min exceeds 20 % of their median disagree
MIN_DIFFERENCE = 0.05  # two speeds (or times) closer than 5 % are not ordered
WITHIN_NOISE = "within noise"


def disagree(value: Spread | None) -> bool:
    """Repeats whose spread is wider than REPEATS_DISAGREE of their median: they measured different things
    (another load, another state of the machine), and their median stands for none of them."""
    if value is None or value.n < 2 or value.median <= 0:
        return False
    return (value.high - value.low) / value.median > REPEATS_DISAGREE


def disagreement(value: Spread, spec: str = ".3g") -> str:
    """'4.2-10.7 over 2 repeats, 2.5x apart'."""
    apart = f", {value.high / value.low:.1f}x apart" if value.low > 0 else ""
    return f"{format(value.low, spec)}-{format(value.high, spec)} over {value.n} repeats{apart}"


def overlap(a: Spread, b: Spread) -> bool:
    """The ranges of two groups of repeats overlap (a single run is a range of one value)."""
    return (a.n > 1 or b.n > 1) and a.low <= b.high and b.low <= a.high


REPEATS = "repeats"
"""What a spread is over (`why_not_ordered`'s `over`): repeats of a spec, or one run's own steps or epochs."""


def why_not_ordered(
    a: Spread | None,
    b: Spread | None,
    contended: tuple[bool, bool] = (False, False),
    timed: bool = True,
    min_difference: float = MIN_DIFFERENCE,
    over: tuple[str, str] = (REPEATS, REPEATS),
) -> str:
    """'' when `a` and `b` may be ordered (a ratio between them is a finding); else why not: 'contended',
    'repeats disagree', 'repeats overlap', 'closer than 5 %'. `timed`: the figure depends on the machine's
    load (times, rates, CPU, energy), so contention blurs it; `min_difference` 0 for figures with no
    noise floor of their own. `over`: what each spread is over; a run's own steps or epochs ("steps")
    vary by nature (a step that met a collection), so only repeats can disagree, and ranges of either
    kind that overlap are within noise ('steps overlap')."""
    if a is None or b is None:
        return ""
    if timed and any(contended):
        return "contended"
    if any(disagree(x) for x, kind in zip((a, b), over) if kind == REPEATS):
        return "repeats disagree"
    if overlap(a, b):
        return f"{over[0]} overlap" if over[0] == over[1] else f"{over[0]} and {over[1]} overlap"
    lo, hi = sorted((abs(a.median), abs(b.median)))
    if min_difference and hi > 0 and (hi - lo) / hi < min_difference:
        return f"closer than {100 * min_difference:.0f} %"
    return ""
