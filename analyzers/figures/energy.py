"""Joules per epoch and per image, from every energy source a run's samples hold.

Sources: NVML's total-energy counter per GPU (or its power readings integrated over time where the card
has no counter), RAPL package/DRAM counters (wrap-around at `max_energy_range_uj` undone here) and the
Jetson board-input rail from tegrastats (power integrated over time). Every source becomes a cumulative
energy series (J at sample times); an epoch's energy is that series, interpolated linearly, at the
epoch's end minus at its start. Pure: reads tables, computes, returns records.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from analyzers.run.run import Run
from tracer.core import schema
from tracer.core.records import EpochRecord
from tracer.core.schema import RAILS_TABLE, RAPL_TABLE

NO_SOURCE = "no energy source"


@dataclass(frozen=True)
class SourceEnergy:
    """One source's energy over each epoch; None for an epoch its samples do not cover."""

    source: str  # as printed and compared, e.g. "NVML GPU 0 (energy counter)"
    epoch_j: tuple[float | None, ...]
    epoch_images: tuple[int, ...]

    @property
    def j_per_epoch(self) -> float | None:
        known = [j for j in self.epoch_j if j is not None]
        return sum(known) / len(known) if known else None

    @property
    def j_per_image(self) -> float | None:
        pairs = [(j, n) for j, n in zip(self.epoch_j, self.epoch_images) if j is not None]
        images = sum(n for _, n in pairs)
        return sum(j for j, _ in pairs) / images if images else None


@dataclass(frozen=True)
class CumulativeSeries:
    """Energy in J consumed since the first sample, at each sample time (ns)."""

    t_ns: tuple[int, ...]
    joules: tuple[float, ...]

    def at(self, t_ns: int) -> float | None:
        """Linear interpolation; None outside the sampled span (the energy there was not measured)."""
        ts = self.t_ns
        if not ts or t_ns < ts[0] or t_ns > ts[-1]:
            return None
        i = bisect.bisect_left(ts, t_ns)
        if ts[i] == t_ns:
            return self.joules[i]
        t0, t1 = ts[i - 1], ts[i]
        j0, j1 = self.joules[i - 1], self.joules[i]
        return j0 + (j1 - j0) * (t_ns - t0) / (t1 - t0)

    def between(self, start_ns: int, end_ns: int) -> float | None:
        a, b = self.at(start_ns), self.at(end_ns)
        return None if a is None or b is None else b - a


def from_counter(t_ns: Sequence[int], values: Sequence[float], wrap_at: float | None = None) -> CumulativeSeries:
    """A monotonic counter (in J) as a series from 0; a counter that went down wrapped at `wrap_at`
    (RAPL), or was reset where there is no wrap value (then that step counts as 0)."""
    pairs = sorted(zip(t_ns, values))
    out_t: list[int] = []
    out_j: list[float] = []
    total = 0.0
    prev: float | None = None
    for t, v in pairs:
        if prev is not None:
            step = v - prev
            if step < 0:
                step = (wrap_at - prev + v) if wrap_at else 0.0
            total += step
        out_t.append(int(t))
        out_j.append(total)
        prev = v
    return CumulativeSeries(tuple(out_t), tuple(out_j))


def from_power(t_ns: Sequence[int], watts: Sequence[float]) -> CumulativeSeries:
    """Power samples integrated over time (trapezoids between samples)."""
    pairs = sorted(zip(t_ns, watts))
    out_t: list[int] = []
    out_j: list[float] = []
    total = 0.0
    for i, (t, w) in enumerate(pairs):
        if i:
            t0, w0 = pairs[i - 1]
            total += (w0 + w) / 2.0 * (t - t0) / 1e9
        out_t.append(int(t))
        out_j.append(total)
    return CumulativeSeries(tuple(out_t), tuple(out_j))


def series_by_source(folder: Run) -> dict[str, CumulativeSeries]:
    """Every source's cumulative series, named as printed."""
    out: dict[str, CumulativeSeries] = {}
    gpu = _rows(folder, "gpu")
    by_gpu: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in gpu:
        by_gpu[int(row["gpu"])].append(row)
    # The GPUs the run used (its processes held memory there); all sampled ones where NVML cannot tell.
    used = {g for g, rows in by_gpu.items() if any((r.get(schema.PROC_MEM_MIB) or 0) > 0 for r in rows)}
    for index, rows in sorted(by_gpu.items()):
        if used and index not in used:
            continue
        counter = [r for r in rows if r.get(schema.ENERGY_MJ) is not None]
        power = [r for r in rows if r.get(schema.POWER_W) is not None]
        if len(counter) >= 2:
            series = from_counter([r["t_ns"] for r in counter], [r[schema.ENERGY_MJ] / 1000.0 for r in counter])
            out[f"NVML GPU {index} (energy counter)"] = series
        elif len(power) >= 2:
            out[f"NVML GPU {index} (power integrated)"] = from_power(
                [r["t_ns"] for r in power], [r[schema.POWER_W] for r in power]
            )
    by_zone: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in _rows(folder, RAPL_TABLE):
        by_zone[(str(row["zone"]), str(row["domain"]))].append(row)
    for (zone, domain), rows in sorted(by_zone.items()):
        if len(rows) >= 2:
            out[f"RAPL {domain} ({zone})"] = from_counter(
                [r["t_ns"] for r in rows],
                [r[schema.ENERGY_UJ] / 1e6 for r in rows],
                wrap_at=rows[0][schema.MAX_ENERGY_RANGE_UJ] / 1e6,
            )
    board: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _rows(folder, RAILS_TABLE):
        if row.get(schema.BOARD_INPUT):
            board[str(row["rail"])].append(row)
    for rail, rows in sorted(board.items()):
        if len(rows) >= 2:
            out[f"tegrastats {rail} (board input)"] = from_power(
                [r["t_ns"] for r in rows], [r[schema.INSTANT_MW] / 1000.0 for r in rows]
            )
    return out


def energy(folder: Run, epochs: Sequence[EpochRecord] | None = None) -> tuple[SourceEnergy, ...]:
    """Each source's energy per epoch (empty: the run had no energy source)."""
    epochs = list(folder.epochs() if epochs is None else epochs)
    out = []
    for name, series in series_by_source(folder).items():
        per_epoch = tuple(series.between(e.start_ns, e.end_ns) for e in epochs)
        out.append(SourceEnergy(name, per_epoch, tuple(e.images for e in epochs)))
    return tuple(out)


def _rows(folder: Run, table: str) -> list[dict[str, Any]]:
    t = folder.samples(table)
    return t.to_pylist() if t is not None else []


@dataclass(frozen=True)
class Headline:
    """The one energy figure of a run that tables and comparisons show, and what it adds up."""

    source: str
    j_per_epoch: float | None
    j_per_image: float | None


def headline(sources: Sequence[SourceEnergy]) -> Headline | None:
    """The board's input rail where there is one (it already holds everything); else the sum of the
    non-overlapping parts measured (GPUs, CPU packages, DRAM; RAPL psys only when alone, as it holds
    the package). None: no energy source."""
    if not sources:
        return None
    board = [s for s in sources if s.source.startswith("tegrastats ")]
    parts = board[:1] or [s for s in sources if not s.source.startswith("RAPL psys")] or list(sources)
    per_epoch = [s.j_per_epoch for s in parts]
    per_image = [s.j_per_image for s in parts]
    return Headline(
        source=" + ".join(s.source for s in parts),
        j_per_epoch=None if None in per_epoch else sum(v for v in per_epoch if v is not None),
        j_per_image=None if None in per_image else sum(v for v in per_image if v is not None),
    )
