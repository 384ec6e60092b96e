"""How analysis rows read in a terminal: durations in one adaptive unit per column with the unit in the
header, one number format per column (whole numbers as such, else three significant digits with at
least one decimal, so `5.00` stands beside `13.0`, never `5`), ids without thousands separators, long
kernel names shortened (tables only, by the rule of `analyzers.trace.kernel_names`: CSV and JSON keep the
full name and the raw numbers; any other name, an operator's, is shown as the framework recorded it),
and floats without summation noise in CSV."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from analyzers.trace.kernel_names import NAME_WIDTH, short_name, short_names

# (unit, ns per unit), smallest first: a column takes the largest unit its biggest value reaches.
DURATION_UNITS: tuple[tuple[str, float], ...] = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
ID_COLUMNS = frozenset({"pid", "tid", "gpu", "device", "stream", "correlation_id"})
NAME_COLUMNS = frozenset({"name", "kernel", "operator"})
KERNEL_ROWS = "short_name"
"""A key only kernel rows have: their name column takes the kernel-name rule; any other keeps its names."""
RECORDED_WIDTH = 100
"""Characters of a name shown as recorded (an operator's) before its middle is cut."""
SIGNIFICANT = 3
CSV_DIGITS = 15  # significant digits: what a float holds, without the noise of its last bits


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    scale: float  # raw value / scale is what is printed
    kind: str  # "duration", "id", "name", "pct", "float", "int", "text"
    whole: bool = False  # every value of the column is a whole number: printed without decimals


def significant(value: float, least: int = 1) -> str:
    """`value` with SIGNIFICANT digits and at least `least` decimals, never in exponent form:
    4 -> 4.00, 13 -> 13.0, 112.84 -> 112.8, 0.000207 -> 0.000207."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.{least}f}"
    decimals = max(least, SIGNIFICANT - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def ratio_text(ratio: float | None) -> str:
    """A ratio with enough digits to be non-zero: 0.018 / 11.4 -> 0.00158x, not 0.00x."""
    return "-" if ratio is None else f"{significant(ratio, 2)}x"


def _whole(values: Sequence[float]) -> bool:
    return bool(values) and all(float(v).is_integer() for v in values)


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
            whole = _whole([v / (per / to_ns) for v in values])
            out.append(Column(key, f"{base} ({unit})", per / to_ns, "duration", whole))
        elif key.endswith("_pct"):
            out.append(Column(key, f"{key.removesuffix('_pct')} (%)", 1.0, "pct"))
        elif key in ID_COLUMNS:
            out.append(Column(key, key, 1.0, "id"))
        elif key in NAME_COLUMNS:
            out.append(Column(key, key, 1.0, "name"))
        elif values and all(isinstance(v, int) for v in values):
            out.append(Column(key, key, 1.0, "int"))
        elif values:
            out.append(Column(key, key, 1.0, "float", _whole(values)))
        else:
            out.append(Column(key, key, 1.0, "text"))
    return out


def cell(column: Column, value: Any) -> str:
    if value is None:
        return "-"
    if column.kind == "duration":
        scaled = float(value) / column.scale
        return f"{scaled:.0f}" if column.header.endswith("(ns)") or column.whole else significant(scaled)
    if column.kind == "pct":
        return f"{float(value):.1f}"
    if column.kind == "id":
        return str(value)
    if column.kind == "name":
        return as_recorded(str(value))
    if column.kind == "int":
        return f"{int(value):,}"
    if column.kind == "float":
        return f"{float(value):.0f}" if column.whole else significant(float(value))
    return str(value)


def as_recorded(name: str, width: int = RECORDED_WIDTH) -> str:
    """A name as the framework recorded it (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`,
    `autograd::engine::evaluate_function: ConvolutionBackward0`); only a very long one has its middle cut."""
    if len(name) <= width:
        return name
    keep = width - 1
    return name[: keep // 2] + "…" + name[-(keep - keep // 2) :]


def table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """(headers, cells) of rows as a terminal table: the name column of kernel rows shows labels unique
    within the table (a row's own `short_name` where it has one, which is then not a column of its own);
    other rows' names are shown as recorded."""
    cols = [c for c in columns(rows) if c.key != KERNEL_ROWS]
    cells = [[cell(c, r[c.key]) for c in cols] for r in rows]
    kernels = bool(rows) and KERNEL_ROWS in rows[0]
    for j, c in enumerate(cols):
        if c.kind != "name" or not kernels:
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
