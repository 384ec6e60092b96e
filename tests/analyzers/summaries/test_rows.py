"""One duration-statistics record (`analyzers.summaries.rows.DurationStats`): the CUDA API, kernel and
memory-operation rows extend it, and no other class declares those fields again."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from analyzers.summaries.rows import ApiRow, DurationStats, KernelRow, MemcpyRow

ROOT = Path(__file__).resolve().parents[3]
STATS_FIELDS = {"avg_ns", "med_ns", "min_ns", "max_ns", "stddev_ns"}  # what marks a second declaration


@pytest.mark.parametrize("row", [ApiRow, KernelRow, MemcpyRow])
def test_rows_extend_the_one_record(row: type) -> None:
    assert issubclass(row, DurationStats)
    names = [f.name for f in dataclasses.fields(row)]
    assert names[: len(dataclasses.fields(DurationStats))] == [f.name for f in dataclasses.fields(DurationStats)]


def declarations(path: Path) -> list[tuple[str, set[str]]]:
    """Each class in the file with the duration-statistics fields its own body declares."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            own = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            out.append((node.name, own & STATS_FIELDS))
    return out


def test_no_second_declaration_of_the_fields() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name} declares {sorted(own)}"
        for package in ("analyzers", "tracer", "viewer")
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, own in declarations(path)
        if len(own) >= 2
    ]
    assert found == ["analyzers/summaries/rows.py: DurationStats declares " + str(sorted(STATS_FIELDS))]
