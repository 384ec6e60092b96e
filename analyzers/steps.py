"""Where a step's time goes: the per-step table (data wait, compute, sync) summed per epoch.

The data-wait share of an epoch is the time its steps waited for their batch over the time of its
steps (data wait + compute + sync): above about a half, the input pipeline, not the model, sets the
pace. Every view that prints it (show, compare, report tables, viewer) takes it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import pyarrow as pa

from tracer.core import schema
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE


@dataclass(frozen=True)
class EpochSplit:
    """The steps of one epoch, summed."""

    epoch: int
    steps: int
    images: int
    data_wait_s: float
    compute_s: float
    sync_s: float

    @property
    def total_s(self) -> float:
        return self.data_wait_s + self.compute_s + self.sync_s

    @property
    def data_wait_share(self) -> float | None:
        """Data wait over the steps' time (0..1); None for an epoch whose steps took no time."""
        return self.data_wait_s / self.total_s if self.total_s > 0 else None


def steps_table(folder: RunFolder) -> pa.Table | None:
    """The run's per-step rows (Parquet once finalised, else the worker's CSV), or None for runs
    made before the table existed or that never reached a step."""
    table = folder.samples(STEPS_TABLE)
    return table if table is not None and table.num_rows > 0 else None


def epoch_splits(folder: RunFolder) -> list[EpochSplit]:
    """One EpochSplit per epoch that has steps, in epoch order."""
    table = steps_table(folder)
    if table is None:
        return []
    sums = table.group_by("epoch").aggregate(
        [
            ("step", "count"),
            ("images", "sum"),
            (schema.DATA_WAIT_S, "sum"),
            (schema.COMPUTE_S, "sum"),
            (schema.SYNC_S, "sum"),
        ]
    )
    sums = sums.sort_by("epoch")
    return [
        EpochSplit(
            epoch=int(row["epoch"]),
            steps=int(row["step_count"]),
            images=int(row["images_sum"] or 0),  # an imported trace's steps record no images (null)
            data_wait_s=float(row["data_wait_s_sum"]),
            compute_s=float(row["compute_s_sum"]),
            sync_s=float(row["sync_s_sum"]),
        )
        for row in sums.to_pylist()
    ]


def probes(folder: RunFolder) -> tuple[str, ...]:
    """Who saw the run's steps (the steps table's PROBE column: `worker`, `torch.DataLoader`, `marker` ...)."""
    table = steps_table(folder)
    if table is None or schema.PROBE not in table.column_names:
        return ()
    return tuple(sorted(str(p) for p in table.column(schema.PROBE).unique().to_pylist() if p))


def data_wait_shares(folder: RunFolder) -> dict[int, float | None]:
    """Epoch number -> its data-wait share (0..1)."""
    return {s.epoch: s.data_wait_share for s in epoch_splits(folder)}


def run_share(splits: list[EpochSplit]) -> float | None:
    """The whole run's data-wait share from its epochs' sums: every step's wait over every step's time."""
    total = sum(s.total_s for s in splits)
    return sum(s.data_wait_s for s in splits) / total if total > 0 else None


def share_over(splits: list[EpochSplit], epochs: Collection[int]) -> float | None:
    """The data-wait share over the steps of `epochs` (the steady state: `analyzers.phases` picks them)."""
    return run_share([s for s in splits if s.epoch in epochs])


def run_data_wait_share(folder: RunFolder) -> float | None:
    """The whole run's data-wait share: every step's wait over every step's time."""
    return run_share(epoch_splits(folder))
