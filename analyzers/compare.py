"""Two runs side by side: every headline number of B as a ratio to A's, and the CUDA API functions
whose time changed most. Pure: `compare` computes, the CLI prints and `write_csv` writes."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from analyzers.run_summary import RunSummary, summarise
from tracer.core.runfolder import RunFolder

# (metric, RunSummary field, unit): the order is the order printed.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("mean epoch time", "mean_epoch_s", "s"),
    ("images/s", "images_per_s", "img/s"),
    ("data-wait share of step time", "data_wait_pct", "%"),
    ("CPU % mean (100 = all cores)", "cpu_pct_mean", "%"),
    ("CPU % max", "cpu_pct_max", "%"),
    ("peak RSS", "peak_rss_mib", "MiB"),
    ("peak RSS % of RAM", "peak_rss_pct_ram", "%"),
    ("threads median", "threads_median", "threads"),
    ("threads max", "threads_max", "threads"),
    ("GPU utilisation mean", "gpu_util_pct_mean", "%"),
    ("GPU memory peak", "gpu_mem_peak_mib", "MiB"),
)
TOP_CUDA = 5


@dataclass(frozen=True)
class Difference:
    metric: str
    unit: str
    a: float | None
    b: float | None

    @property
    def ratio(self) -> float | None:
        """B / A; None where either is missing or A is zero."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a


@dataclass(frozen=True)
class Comparison:
    a: RunSummary
    b: RunSummary
    differences: tuple[Difference, ...]


def compare(a: RunFolder, b: RunFolder, top_cuda: int = TOP_CUDA) -> Comparison:
    sa, sb = summarise(a), summarise(b)
    diffs = [
        Difference(metric, unit, _num(getattr(sa, name)), _num(getattr(sb, name))) for metric, name, unit in METRICS
    ]
    diffs += energy_differences(sa, sb)
    diffs += cuda_differences(a, b, top_cuda)
    return Comparison(sa, sb, tuple(diffs))


def energy_differences(sa: RunSummary, sb: RunSummary) -> list[Difference]:
    """Joules per epoch and per image of every energy source either run had, named by source; a
    source only one run had shows as missing in the other. Empty: neither run had a source."""
    a = {e.source: e for e in sa.energy}
    b = {e.source: e for e in sb.energy}
    out = []
    for source in list(a) + [s for s in b if s not in a]:
        ea, eb = a.get(source), b.get(source)
        out.append(
            Difference(
                f"energy per epoch, {source}",
                "J",
                ea.j_per_epoch if ea else None,
                eb.j_per_epoch if eb else None,
            )
        )
        out.append(
            Difference(
                f"energy per image, {source}",
                "J",
                ea.j_per_image if ea else None,
                eb.j_per_image if eb else None,
            )
        )
    return out


def cuda_differences(a: RunFolder, b: RunFolder, top: int = TOP_CUDA) -> list[Difference]:
    """Total CUDA API time, then the `top` functions whose total time differs most (in ms), over the
    whole run; empty unless both runs have a CUDA API trace."""
    ta, tb = _api_totals_ns(a), _api_totals_ns(b)
    if ta is None or tb is None:
        return []
    out = [Difference("CUDA API total time", "ms", sum(ta.values()) / 1e6, sum(tb.values()) / 1e6)]
    names = sorted(set(ta) | set(tb), key=lambda n: (-abs(tb.get(n, 0) - ta.get(n, 0)), n))
    for name in names[:top]:
        out.append(Difference(f"CUDA {name} time", "ms", ta.get(name, 0) / 1e6, tb.get(name, 0) / 1e6))
    return out


def _api_totals_ns(folder: RunFolder) -> dict[str, int] | None:
    from analyzers import tables as trace_tables

    if not folder.table_path(trace_tables.CUDA_API).exists():
        return None
    from analyzers.cuda_api import api_summary

    return {row.name: int(row.total_ns) for row in api_summary(folder)}


def _num(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


CSV_COLUMNS = ("metric", "unit", "run_a", "run_b", "ratio_b_over_a")


def write_csv(comparison: Comparison, path: Path) -> None:
    """One row per difference; the header's first line names the runs in `run_a`/`run_b` order."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        writer.writerow(["run id", "", comparison.a.run_id, comparison.b.run_id, ""])
        for d in comparison.differences:
            writer.writerow([d.metric, d.unit, _cell(d.a), _cell(d.b), _cell(d.ratio)])


def _cell(value: float | None) -> str:
    return "" if value is None else repr(value)


def format_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def rows_for_print(comparison: Comparison) -> Sequence[tuple[str, str, str, str]]:
    out = []
    for d in comparison.differences:
        out.append((f"{d.metric} ({d.unit})", _short(d.a), _short(d.b), format_ratio(d.ratio)))
    return out


def _short(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
