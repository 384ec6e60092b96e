"""The verdict record and the rule registry: every rule is a pure function of one run's tables that
returns a Verdict (fired, quiet, or not measured), registered once under its name."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from analyzers.diagnosis.inputs import RunTables


class Severity(int, enum.Enum):
    """How much a finding is likely to change the epoch time; the order is the print order."""

    HIGH = 3
    MEDIUM = 2
    LOW = 1
    NONE = 0  # quiet, or not measured


@dataclass(frozen=True)
class Evidence:
    """One number behind a verdict, with its unit (`%`, `s`, `MiB/epoch`, `calls/step` ...)."""

    name: str
    value: float | None
    unit: str

    def text(self) -> str:
        if self.value is None:
            return f"{self.name} not measured"
        v = self.value
        shown = f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
        return f"{self.name} {shown} {self.unit}".rstrip()


@dataclass(frozen=True)
class Verdict:
    """What one rule says about one run. `value` is the rule's headline number (in `unit`), compared
    with `threshold` to decide `fired`; `measured` is False where the run lacks the tables it needs."""

    rule: str
    title: str
    fired: bool
    measured: bool
    severity: Severity
    finding: str
    value: float | None = None
    unit: str = ""
    threshold: float | None = None
    evidence: tuple[Evidence, ...] = ()
    knob: str = ""

    @property
    def state(self) -> str:
        return "fired" if self.fired else ("quiet" if self.measured else "not measured")

    def headline(self) -> str:
        """One line: the finding with its number and the knob to try."""
        number = "" if self.value is None else f" [{Evidence('', self.value, self.unit).text().strip()}]"
        knob = f"; try {self.knob}" if self.knob and self.fired else ""
        return f"{self.title}: {self.finding}{number}{knob}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "state": self.state,
            "fired": self.fired,
            "measured": self.measured,
            "severity": self.severity.name.lower(),
            "finding": self.finding,
            "value": self.value,
            "unit": self.unit,
            "threshold": self.threshold,
            "evidence": [{"name": e.name, "value": e.value, "unit": e.unit} for e in self.evidence],
            "knob": self.knob,
        }


def not_measured(rule: str, title: str, why: str) -> Verdict:
    return Verdict(rule, title, False, False, Severity.NONE, f"not measured: {why}")


def quiet(rule: str, title: str, finding: str, value: float | None, unit: str, threshold: float | None,
          evidence: tuple[Evidence, ...] = ()) -> Verdict:  # fmt: skip
    return Verdict(rule, title, False, True, Severity.NONE, finding, value, unit, threshold, evidence)


Rule = Callable[["RunTables"], Verdict]


class RuleName(NamedTuple):
    """A rule's name (its key in `tracer diagnose --json`) and its title, declared once beside the rule: the
    registry keys the rule by it and the rule's verdicts carry it (`name, title = INPUT_BOUND`)."""

    name: str
    title: str


@dataclass
class Registry:
    """Rules by name, in the order they were declared (the order of `tracer diagnose`)."""

    rules: dict[str, Rule] = field(default_factory=dict)

    def register(self, named: RuleName) -> Callable[[Rule], Rule]:
        name = named.name

        def add(fn: Rule) -> Rule:
            if name in self.rules:
                raise ValueError(f"diagnosis rule {name!r} declared twice")
            self.rules[name] = fn
            return fn

        return add


RULES = Registry()
rule = RULES.register


def ranked(verdicts: list[Verdict]) -> list[Verdict]:
    """Fired verdicts first, by severity, then by how far past its threshold the number is."""

    def key(v: Verdict) -> tuple[int, int, float]:
        over = 0.0
        if v.value is not None and v.threshold:
            over = abs(v.value) / abs(v.threshold)
        return (0 if v.fired else 1, -int(v.severity), -over)

    return sorted(verdicts, key=key)
