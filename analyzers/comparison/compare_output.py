"""A comparison as the CLI prints it and as its CSV holds it: cells with each column's range, ratios
to the first column or 'within noise', and the lines under the table. `compare` computes; this formats."""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path

from analyzers.comparison.compare import Comparison, median_of
from analyzers.figures.noise import WITHIN_NOISE
from analyzers.figures.steady import Spread
from analyzers.render.display import ratio_text, significant
from tracer.core import output as out_file


def csv_columns(n: int) -> list[str]:
    """metric, unit, run_a, run_a_min, run_a_max, run_b, ..., ratio_b_over_a, ..., noise_b_over_a, ...
    (noise: why the ratio is within noise, analyzers.figures.noise; empty where it is a finding)."""
    letters = string.ascii_lowercase[:n]
    cols = ["metric", "unit"]
    for x in letters:
        cols += [f"run_{x}", f"run_{x}_min", f"run_{x}_max"]
    return cols + [f"ratio_{x}_over_a" for x in letters[1:]] + [f"noise_{x}_over_a" for x in letters[1:]]


def write_csv(comparison: Comparison, path: Path) -> None:
    """One row per difference (the median of a group, its min and max); the first row names each
    column's runs (space-separated ids)."""
    n = len(comparison.columns)
    ids: list[object] = ["run id", ""]
    for c in comparison.columns:
        ids += [" ".join(c.run_ids), "", ""]
    rows: list[list[object]] = [ids + [""] * 2 * (n - 1)]
    for d in comparison.differences:
        row: list[object] = [d.metric, d.unit]
        for v in d.values:
            row += [median_of(v), v.low if v else None, v.high if v else None]
        rows.append(row + [d.ratio(i) for i in range(1, n)] + [d.within_noise(i) for i in range(1, n)])
    out_file.write_csv(path, "--csv", csv_columns(n), rows)


def format_ratio(ratio: float | None) -> str:
    return ratio_text(ratio)


def rows_for_print(comparison: Comparison) -> Sequence[list[str]]:
    """metric (unit), each column's value (median, range when repeats), then each column's ratio to A, or
    'within noise' where the ratio is no finding (analyzers.figures.noise); the numbers of one metric in one format
    (whole numbers as such, else `analyzers.render.display.significant`); rows no column measured are left out."""
    out = []
    n = len(comparison.columns)
    for d in comparison.differences:
        if all(v is None for v in d.values):
            continue
        numbers = [x for v in d.values if v is not None for x in (v.median, v.low, v.high)]
        whole = all(float(x).is_integer() for x in numbers)
        cells = [f"{d.metric} ({d.unit})" if d.unit else d.metric] + [_spread_text(v, whole) for v in d.values]
        ratios = [WITHIN_NOISE if d.within_noise(i) and d.ratio(i) is not None else format_ratio(d.ratio(i))
                  for i in range(1, n)]  # fmt: skip
        out.append(cells + ratios)
    return out


def noise_notes(comparison: Comparison) -> list[str]:
    """Why ratios read 'within noise', one line per column and reason."""
    out = []
    for i, column in enumerate(comparison.columns[1:], start=1):
        reasons = dict.fromkeys(d.within_noise(i) for d in comparison.differences if d.within_noise(i))
        if reasons:
            out.append(
                f"{column.letter} / A reads 'within noise' where {', '.join(reasons)}: such a ratio is no finding"
            )
    return out


def _spread_text(value: Spread | None, whole: bool = False) -> str:
    if value is None:
        return "-"
    head = _short(value.median, whole)
    return head if value.n < 2 else f"{head} ({_short(value.low, whole)}-{_short(value.high, whole)})"


def _short(value: float, whole: bool = False) -> str:
    return f"{value:.0f}" if whole or abs(value) >= 1000 else significant(value)
