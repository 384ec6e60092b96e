"""The verdicts renderer: what `tracer diagnose` and the Diagnosis block print of a real run's verdicts."""

from __future__ import annotations

from pathlib import Path

from analyzers.diagnosis import diagnose, top
from analyzers.diagnosis.verdict_text import NOTHING_FIRED, top_lines, verdict_body, verdict_head
from analyzers.run.run import Run

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"


def test_each_verdict_and_the_block(real_fixtures: Path) -> None:
    verdicts = diagnose(Run.open(real_fixtures / CF98))
    fired = [v for v in verdicts if v.fired]
    quiet = [v for v in verdicts if v.measured and not v.fired]
    assert fired and quiet
    v = fired[0]
    assert verdict_head(v) == f"{v.rule}: fired, {v.severity.name.lower()}"
    assert verdict_body(v)[0] == v.finding and (not v.knob or verdict_body(v)[-1] == f"try: {v.knob}")
    assert verdict_head(quiet[0]) == f"{quiet[0].rule}: quiet"
    assert all(not line.startswith("try: ") for line in verdict_body(quiet[0]))
    assert top_lines(top(verdicts)) == [f"- {x.headline()}" for x in top(verdicts)]
    assert top_lines([]) == [NOTHING_FIRED]
