"""How analysis rows read in a terminal: durations in one adaptive unit per column with the unit in the
header, ids without thousands separators, long kernel names shortened (tables only, by the rule of
`analyzers.kernel_names`: CSV and JSON keep the full name and the raw numbers), and floats without
summation noise in CSV."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from analyzers.kernel_names import NAME_WIDTH, short_name, short_names

# (unit, ns per unit), smallest first: a column takes the largest unit its biggest value reaches.
DURATION_UNITS: tuple[tuple[str, float], ...] = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
ID_COLUMNS = frozenset({"pid", "tid", "gpu", "device", "stream", "correlation_id"})
NAME_COLUMNS = frozenset({"name", "kernel", "operator"})
CSV_DIGITS = 15  # significant digits: what a float holds, without the noise of its last bits


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    scale: float  # raw value / scale is what is printed
    kind: str  # "duration", "id", "name", "pct", "float", "int", "text"


def duration_unit(largest_ns: float) -> tuple[str, float]:
    unit = DURATION_UNITS[0]
    for candidate in DURATION_UNITS:
        if abs(largest_ns) >= candidate[1]:
            unit = candidate
    return unit


def columns(rows: Sequence[Mapping[str, Any]]) -> list[Column]:
    """One display column per key of the rows; a duration column's unit fits its largest value."""
    if not rows:
        return []
    out = []
    for key in rows[0]:
        values = [r[key] for r in rows if isinstance(r[key], (int, float)) and not isinstance(r[key], bool)]
        if key.endswith("_ns") or key.endswith("_s"):
            to_ns = 1.0 if key.endswith("_ns") else 1e9
            base = key.removesuffix("_ns").removesuffix("_s")
            unit, per = duration_unit(max((abs(v) * to_ns for v in values), default=0.0))
            out.append(Column(key, f"{base} ({unit})", per / to_ns, "duration"))
        elif key.endswith("_pct"):
            out.append(Column(key, f"{key.removesuffix('_pct')} (%)", 1.0, "pct"))
        elif key in ID_COLUMNS:
            out.append(Column(key, key, 1.0, "id"))
        elif key in NAME_COLUMNS:
            out.append(Column(key, key, 1.0, "name"))
        elif values and all(isinstance(v, int) for v in values):
            out.append(Column(key, key, 1.0, "int"))
        elif values:
            out.append(Column(key, key, 1.0, "float"))
        else:
            out.append(Column(key, key, 1.0, "text"))
    return out


def cell(column: Column, value: Any) -> str:
    if value is None:
        return "-"
    if column.kind == "duration":
        scaled = float(value) / column.scale
        return (
            f"{scaled:.0f}" if column.header.endswith("(ns)") else f"{scaled:.3g}" if scaled < 10 else f"{scaled:.1f}"
        )
    if column.kind == "pct":
        return f"{float(value):.1f}"
    if column.kind == "id":
        return str(value)
    if column.kind == "name":
        return short_name(str(value))
    if column.kind == "int":
        return f"{int(value):,}"
    if column.kind == "float":
        return f"{float(value):.3g}" if abs(float(value)) < 10 else f"{float(value):.1f}"
    return str(value)


def table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(headers, cells) of rows as a terminal table: a name column shows labels unique within the
    table (a row's own `short_name` where it has one, which is then not a column of its own)."""
    cols = [c for c in columns(rows) if c.key != "short_name"]
    cells = [[cell(c, r[c.key]) for c in cols] for r in rows]
    for j, c in enumerate(cols):
        if c.kind != "name":
            continue
        labels = short_names(str(r[c.key]) for r in rows if r[c.key] is not None)
        for i, r in enumerate(rows):
            if r[c.key] is not None:
                cells[i][j] = str(r["short_name"]) if c.key == "name" and r.get("short_name") else labels[str(r[c.key])]
    return [c.header for c in cols], cells


__all__ = ["NAME_WIDTH", "short_name", "table"]


def csv_value(value: Any) -> Any:
    """CSV keeps full names and raw units; floats at CSV_DIGITS significant digits (no 1.1600000000000001)."""
    if isinstance(value, float):
        return f"{value:.{CSV_DIGITS}g}"
    return value
