"""The step-parts renderer words a real run's decomposition: the parts largest first, each with its share."""

from __future__ import annotations

from pathlib import Path

from analyzers.figures.step_parts import decompose
from analyzers.render.step_parts import step_parts_lines
from analyzers.run.run import Run

CF98 = "gpu-h100/20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"


def test_parts_largest_first_with_their_shares(real_fixtures: Path) -> None:
    d = decompose(Run.open(real_fixtures / CF98))
    lines = step_parts_lines(d)
    head = lines[0]
    assert head.startswith(f"steady step per image ({d.basis}): ")
    shown = [p for p in sorted(d.parts, key=lambda p: -p.seconds) if p.seconds > 0]
    positions = [head.index(f"{p.label} ") for p in shown]
    assert positions == sorted(positions) and "%)" in head
    assert lines[1:] == [f"   {n}" for n in d.notes]
