"""How long a cell will take, judged from earlier runs of the same setting in the runs folder.

A cell's time is its epochs times the mean epoch time of earlier runs with the same framework, model,
dataset, device, batch, image size and limit, plus their mean start-up and wind-down overhead (wall time
outside the epochs). A cell with no such earlier run has no estimate, and `--dry-run` says so.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable

from tracer.campaign.plan import Cell
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import list_runs


@dataclass(frozen=True)
class Timing:
    epoch_s: float
    overhead_s: float
    runs: int

    def cell_s(self, epochs: int) -> float:
        return epochs * self.epoch_s + self.overhead_s


def _key(
    framework: str, model: str, dataset: str, device: str, batch: int, image_size: int, limit: int | None
) -> Hashable:
    return (framework, model, dataset, device, batch, image_size, limit)


def spec_key(spec: RunSpec) -> Hashable:
    return _key(spec.framework, spec.model, spec.dataset, spec.device, spec.batch, spec.image_size, spec.limit)


def cell_key(cell: Cell) -> Hashable:
    k = cell.knobs
    return _key(
        cell.framework, cell.model, cell.dataset, cell.device, cell.batch, k.get("image_size", 224), k.get("limit")
    )


def timings(out_dir: Path) -> dict[Hashable, Timing]:
    """Mean epoch time and overhead per setting, over the ok runs with at least one epoch in `out_dir`."""
    epochs: dict[Hashable, list[float]] = defaultdict(list)
    overheads: dict[Hashable, list[float]] = defaultdict(list)
    counts: dict[Hashable, int] = defaultdict(int)
    for folder in list_runs(out_dir):
        try:
            record = folder.read_record()
        except UserError:
            continue
        done = folder.epochs()
        if record.outcome.status is not RunStatus.OK or not done or record.wall_end_ns is None:
            continue
        key = spec_key(record.spec)
        epochs[key] += [e.duration_s for e in done]
        wall = (record.wall_end_ns - record.wall_start_ns) / 1e9
        overheads[key].append(max(0.0, wall - sum(e.duration_s for e in done)))
        counts[key] += 1
    return {k: Timing(statistics.fmean(epochs[k]), statistics.fmean(overheads[k]), counts[k]) for k in epochs}


def estimate(cells: list[Cell], out_dir: Path) -> dict[str, float | None]:
    """Seconds per cell id, `None` where no earlier run tells."""
    known = timings(out_dir)
    out: dict[str, float | None] = {}
    for cell in cells:
        t = known.get(cell_key(cell))
        out[cell.cell_id] = t.cell_s(cell.epochs) if t else None
    return out


def clock(seconds: float) -> str:
    s = int(round(seconds))
    days, s = divmod(s, 86400)
    text = f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days} d {text}" if days else text
