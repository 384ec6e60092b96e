"""Values computed straight from a run folder's files (events.jsonl, samples/*.parquet, run.json,
cuda_api.parquet), without the analyzers, for tests to hold the report's numbers against."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pyarrow.parquet as pq


def epochs(run: Path) -> list[tuple[int, int, int]]:
    """(start_ns, end_ns, images) of every finished epoch."""
    starts, out = {}, []
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["kind"] == "epoch_start":
            starts[e["epoch"]] = e["t_ns"]
        elif e["kind"] == "epoch_end":
            out.append((starts[e["epoch"]], e["t_ns"], e["images"]))
    return out


def mean_epoch_s(run: Path) -> float:
    return statistics.fmean((end - start) / 1e9 for start, end, _ in epochs(run))


def images_per_s(run: Path) -> float:
    ep = epochs(run)
    return sum(n for _, _, n in ep) / sum((end - start) / 1e9 for start, end, _ in ep)


def steady_epochs(run: Path, warmup: int = 1) -> list[tuple[int, int, int]]:
    """The epochs after the warm-up (all of them when none is left), by start time."""
    ep = sorted(epochs(run))
    return ep[warmup:] or ep


def steady_epoch_s(run: Path, warmup: int = 1) -> float:
    return statistics.fmean((end - start) / 1e9 for start, end, _ in steady_epochs(run, warmup))


def steady_images_per_s(run: Path, warmup: int = 1) -> float:
    ep = steady_epochs(run, warmup)
    return sum(n for _, _, n in ep) / sum((end - start) / 1e9 for start, end, _ in ep)


def first_epoch_s(run: Path) -> float:
    start, end, _ = min(epochs(run))
    return (end - start) / 1e9


def process_column(run: Path, name: str) -> list[float]:
    return [float(v) for v in pq.read_table(run / "samples" / "process.parquet").column(name).to_pylist()]


def record(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def cuda_shares_pct(run: Path) -> dict[str, float]:
    """Whole-run share of CUDA API time per function, nsys style: names without `_vNNNN`."""
    table = pq.read_table(run / "cuda_api.parquet", columns=["name", "dur_ns", "source"])
    rows = table.to_pylist()
    sources = {r["source"] for r in rows}
    preferred = next(s for s in ("nsys", "cupti", "kineto", *sorted(sources)) if s in sources)
    totals: dict[str, int] = {}
    for r in rows:
        if r["source"] != preferred:
            continue
        name = r["name"][:-6] if re.search(r"_v\d{4}$", r["name"]) else r["name"]  # nsys: exactly `_vNNNN`
        totals[name] = totals.get(name, 0) + r["dur_ns"]
    whole = sum(totals.values())
    return {n: 100.0 * v / whole for n, v in totals.items()}


def cuda_totals_ns(run: Path) -> dict[str, int]:
    """Whole-run total CUDA API time per function (ns), same naming as `cuda_shares_pct`."""
    rows = pq.read_table(run / "cuda_api.parquet", columns=["name", "dur_ns", "source"]).to_pylist()
    preferred = next(s for s in ("nsys", "cupti", "kineto") if s in {r["source"] for r in rows})
    totals: dict[str, int] = {}
    for r in rows:
        if r["source"] == preferred:
            name = r["name"][:-6] if re.search(r"_v\d{4}$", r["name"]) else r["name"]
            totals[name] = totals.get(name, 0) + r["dur_ns"]
    return totals


def steady_process_column(run: Path, name: str, warmup: int = 1) -> list[float]:
    """The process samples from the first steady epoch's start to the last epoch's end (the steady phase)."""
    table = pq.read_table(run / "samples" / "process.parquet")
    steady = steady_epochs(run, warmup)
    lo, hi = steady[0][0], max(end for _, end, _ in epochs(run))
    return [float(v) for t, v in zip(table.column("t_ns").to_pylist(), table.column(name).to_pylist()) if lo <= t <= hi]
