"""`tracer diff`'s words on two real traced H100 runs: each side's head line, then tables whose rows are the
diff's parts and kernel classes, signed B - A."""

from __future__ import annotations

from pathlib import Path

from analyzers.comparison.diff import diff
from analyzers.comparison.diff_output import side_lines, signed, tables
from analyzers.run.run import Run

A = "gpu-h100/20261125-001123-pytorch-alexnet-big-gpu-b100-a9b3"
B = "gpu-h100/20261125-001502-pytorch-alexnet-big-gpu-b100-a266"


def test_sides_then_tables_of_the_parts_and_classes(real_fixtures: Path) -> None:
    result = diff(Run.open(real_fixtures / A), Run.open(real_fixtures / B), 1)
    lines = side_lines(result)
    assert lines[0].startswith(f"A: {result.a.run_id} [") and any(
        x.startswith(f"B: {result.b.run_id} [") for x in lines
    )
    drawn = tables(result)
    assert [t.title for t in drawn][:2] == [
        f"the steady step, per {result.per}",
        f"GPU time by kernel class, per {result.per}",
    ]
    parts, classes = drawn[0], drawn[1]
    assert [r[0] for r in parts.rows][: len(result.parts)] == [p.label for p in result.parts]
    assert [r[3] for r in classes.rows] == [signed(c.delta) for c in result.classes]
    assert all(len(r) == len(t.headers) for t in drawn for r in t.rows)
    assert signed(0.0) == "0" and signed(-0.002).startswith("-") and signed(0.002).startswith("+")
