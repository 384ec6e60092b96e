"""How much of an effect each named part explains: the one rule every explanation follows (a diff's gap,
a straggler's lateness), so that parts and an explicit unexplained remainder add up to the whole.

A cause is named only when one part covers at least NAMED_PCT of the effect (TraceML names a cause at
80 %); otherwise the explanation is "mixed" and lists every part from LISTED_PCT of the effect on (XProf's
input-pipeline rule fires at 10 % of the step). Parts that work against the effect (a rank that waits less
for data than the others, yet arrives last) are kept with their sign: the remainder is what the parts,
both ways, leave unexplained. The thresholds are registered with the diagnosis' (`analyzers.diagnosis.
thresholds`), which prints them in docs/guide/diagnosis.md.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMED_PCT = 80.0
"""A part explains the effect, and is named its cause, from this share of it on (TraceML's rule)."""
LISTED_PCT = 10.0
"""A part is listed in a mixed explanation from this share of the effect on (XProf's 10 % input rule)."""
MIXED = "mixed"
"""The cause where no part covers NAMED_PCT of the effect."""


@dataclass(frozen=True)
class Share:
    label: str
    seconds: float  # in the direction of the effect (negative: it works against it)
    pct: float  # of the effect


@dataclass(frozen=True)
class Explanation:
    """An effect split into parts and what they leave unexplained: `sum(parts) + unexplained_s == effect_s`."""

    effect_s: float
    parts: tuple[Share, ...]  # largest first
    unexplained_s: float
    cause: str | None  # the part covering NAMED_PCT of the effect, MIXED, or None (no effect, or no part)

    @property
    def unexplained_pct(self) -> float:
        return 100.0 * self.unexplained_s / self.effect_s if self.effect_s else 0.0

    def text(self, of: str) -> str:
        """'data wait: 85 % of the lateness, the other parts 5 %, 10 % unexplained' or 'mixed (no part covers 80 %
        of the lateness): data wait 34 %, host time 20 %; 46 % unexplained'."""
        u = round(self.unexplained_pct)
        rest = (
            f"{u} % unexplained" if u > 0 else ("nothing unexplained" if u == 0 else f"the parts exceed it by {-u} %")
        )
        if self.cause is None:
            return f"not explained by the parts measured ({rest})"
        if self.cause != MIXED:
            top = self.parts[0]
            if top.pct > 100:  # the other parts (or the unexplained rest) work against it
                return f"{top.label}: more than the whole of {of}, the rest narrowing it; {rest}"
            others = round(sum(p.pct for p in self.parts[1:]))  # so that the shares said add up to the whole
            if not others:
                return f"{top.label}: {top.pct:.0f} % of {of}, {rest}"
            label = self.parts[1].label if len(self.parts) == 2 else "the other parts"
            said = f"{label} {others} %" if others > 0 else f"{label} against it by {-others} %"
            return f"{top.label}: {top.pct:.0f} % of {of}, {said}, {rest}"
        listed = [p for p in self.parts if abs(p.pct) >= LISTED_PCT] or list(self.parts[:1])
        said = ", ".join(f"{p.label} {p.pct:.0f} %" if p.pct >= 0 else f"{p.label} against it by {-p.pct:.0f} %"
                         for p in listed)  # fmt: skip
        others = round(sum(p.pct for p in self.parts if p not in listed))
        if others:
            said += f", the other parts {others} %" if others > 0 else f", the other parts against it by {-others} %"
        return f"{MIXED} (no part covers {NAMED_PCT:.0f} % of {of}): {said}; {rest}"

    def to_json(self) -> dict[str, object]:
        return {
            "effect_s": self.effect_s,
            "cause": self.cause,
            "parts": [{"label": p.label, "seconds": p.seconds, "pct": p.pct} for p in self.parts],
            "unexplained_s": self.unexplained_s,
            "unexplained_pct": self.unexplained_pct,
            "named_pct": NAMED_PCT,
        }


def explain(effect_s: float, parts: dict[str, float]) -> Explanation:
    """`parts` (seconds in the direction of `effect_s`, a positive effect) sized against the effect."""
    if effect_s <= 0 or not parts:
        return Explanation(effect_s, (), effect_s, None)
    shares = sorted(
        (Share(label, s, 100.0 * s / effect_s) for label, s in parts.items()), key=lambda p: -p.seconds
    )  # fmt: skip
    unexplained = effect_s - sum(p.seconds for p in shares)
    top = shares[0]
    if top.pct >= NAMED_PCT:
        cause: str | None = top.label
    elif top.pct >= LISTED_PCT or any(p.pct > 0 for p in shares):
        cause = MIXED
    else:
        cause = None
    return Explanation(effect_s, tuple(shares), unexplained, cause)
