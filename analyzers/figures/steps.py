"""Where a step's time goes: the per-step table (data wait, compute, sync) summed per epoch.

The data-wait share of an epoch is the time its steps waited for their batch over the time of its
steps (data wait + compute + sync): above about a half, the input pipeline, not the model, sets the
pace. Every view that prints it (show, compare, report tables, viewer) takes it from here. A step whose
wait nobody saw (a command's steps counted from optimizer updates, Keras `fit` reading its batches inside
the graph) leaves its cell empty: an epoch holding one has no share ("not measured", never 0 %).

An epoch's wall time (its events) holds its steps and what lies between them (a loop's own work outside
any step, a pipeline's tail): `between_steps_s` is that remainder, so the two add up to the epoch.

A step's *compute* is the step minus its data wait (`COMPUTE_TOTAL_S`: the worker's `compute_s` plus
`sync_s`), wherever the framework happens to block. The worker times the dispatch (`compute_s`) and the
loss read (`sync_s`) apart, but an asynchronous framework (JAX on every device, MXNet's engine, CUDA
under any framework) returns from the dispatch at once and waits at the read: JAX on a CPU showed
"compute 0.03 s, loss sync 0.5 s" beside PyTorch's synchronous 0.5 s of compute, as if it computed
20x faster. Only the sum compares across frameworks; `sync_s` says where the waiting happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.run.run import Run
from analyzers.trace.arrays import as_array
from tracer.core import arrow_build, schema
from tracer.core.schema import STEPS_TABLE

STEP_S = "step_s"  # derived: data wait + compute + sync
COMPUTE_TOTAL_S = "compute_total_s"  # derived: the step minus its data wait (compute_s + sync_s)
ZERO = arrow_build.float_scalar(0.0)  # not a bare 0.0: pyarrow would probe for (and import) pandas


def with_step_columns(table: pa.Table) -> pa.Table:
    """The steps table with STEP_S and COMPUTE_TOTAL_S added (where its timing columns are there)."""
    names = table.column_names
    if not all(c in names for c in (schema.DATA_WAIT_S, schema.COMPUTE_S, schema.SYNC_S)):
        return table
    sync = pc.fill_null(table.column(schema.SYNC_S), ZERO)
    compute = pc.add(pc.fill_null(table.column(schema.COMPUTE_S), ZERO), sync)
    table = table.append_column(COMPUTE_TOTAL_S, compute) if COMPUTE_TOTAL_S not in names else table
    step = pc.add(pc.fill_null(table.column(schema.DATA_WAIT_S), ZERO), compute)
    return table.append_column(STEP_S, step) if STEP_S not in names else table


@dataclass(frozen=True)
class EpochSplit:
    """The steps of one epoch, summed."""

    epoch: int
    steps: int
    images: int
    data_wait_s: float
    compute_s: float
    sync_s: float
    waits_seen: int = -1  # steps whose data wait was seen (-1: every step's)
    images_seen: int = -1  # steps whose samples were counted (-1: every step's)

    @property
    def wait_measured(self) -> bool:
        return self.waits_seen < 0 or self.waits_seen == self.steps

    @property
    def images_counted(self) -> bool:
        return self.images_seen < 0 or (self.images_seen == self.steps and self.images > 0)

    @property
    def total_s(self) -> float:
        return self.data_wait_s + self.compute_s + self.sync_s

    @property
    def compute_total_s(self) -> float:
        """The steps' time minus their data wait: dispatch and the wait at the loss read together."""
        return self.compute_s + self.sync_s

    @property
    def data_wait_share(self) -> float | None:
        """Data wait over the steps' time (0..1); None for an epoch whose steps took no time or whose
        wait was not seen."""
        return self.data_wait_s / self.total_s if self.total_s > 0 and self.wait_measured else None


def steps_table(folder: Run) -> pa.Table | None:
    """The run's per-step rows (Parquet once finalised, else the worker's CSV), or None for runs
    made before the table existed or that never reached a step."""
    table = folder.samples(STEPS_TABLE)
    return table if table is not None and table.num_rows > 0 else None


def epoch_splits(folder: Run) -> list[EpochSplit]:
    """One EpochSplit per epoch that has steps, in epoch order."""
    table = steps_table(folder)
    if table is None:
        return []
    epochs, group = np.unique(as_array(table.column("epoch"), np.int64), return_inverse=True)

    def sums(column: str) -> list[float]:
        """Per epoch, in row order (as Arrow's grouped sum adds); a missing value adds nothing."""
        values = np.nan_to_num(as_array(table.column(column), np.float64), nan=0.0)
        return np.bincount(group, weights=values, minlength=len(epochs)).tolist()  # type: ignore[no-any-return]

    # NumPy, not Table.group_by: Arrow's grouping imports pyarrow.acero and with it pandas (0.4 s of every open)
    steps = np.bincount(group, minlength=len(epochs)).tolist()
    images, wait, compute, sync = (sums(c) for c in ("images", schema.DATA_WAIT_S, schema.COMPUTE_S, schema.SYNC_S))

    def seen(column: str) -> list[int]:
        present = ~np.isnan(as_array(table.column(column), np.float64))
        return np.bincount(group, weights=present, minlength=len(epochs)).astype(np.int64).tolist()  # type: ignore[no-any-return]

    waits, counted = seen(schema.DATA_WAIT_S), seen("images")
    return [
        EpochSplit(
            epoch=int(epochs[i]),
            steps=int(steps[i]),
            images=int(images[i]),  # an imported trace's steps record no images (null): 0
            data_wait_s=wait[i],
            compute_s=compute[i],
            sync_s=sync[i],
            waits_seen=waits[i],
            images_seen=counted[i],
        )
        for i in range(len(epochs))
    ]


def between_steps(folder: Run) -> dict[int, float]:
    """Epoch number -> its wall time (events) minus its steps' time: what lies outside every step."""
    splits = {s.epoch: s for s in epoch_splits(folder)}
    return {e.epoch: max(0.0, e.duration_s - splits[e.epoch].total_s) for e in folder.epochs() if e.epoch in splits}


def probes(folder: Run) -> tuple[str, ...]:
    """Who saw the run's steps (the steps table's PROBE column: `worker`, `torch.DataLoader`, `marker` ...)."""
    table = steps_table(folder)
    if table is None or schema.PROBE not in table.column_names:
        return ()
    return tuple(sorted(str(p) for p in table.column(schema.PROBE).unique().to_pylist() if p))


def images_by_rank(folder: Run, epochs: Collection[int]) -> dict[int, int]:
    """Images each rank's steps of `epochs` took (a data-parallel run's steps table has every rank's);
    {} for a run of one rank."""
    table = steps_table(folder)
    if table is None or schema.RANK not in table.column_names or not table.num_rows:
        return {}
    table = table.filter(pc.is_in(table["epoch"], pa.array(sorted(epochs), pa.int64())))
    ranks = table[schema.RANK].fill_null(0).to_numpy()
    images = table["images"].fill_null(0).to_numpy()
    out = {int(r): int(images[ranks == r].sum()) for r in np.unique(ranks)}
    return out if len(out) > 1 else {}


def data_wait_shares(folder: Run) -> dict[int, float | None]:
    """Epoch number -> its data-wait share (0..1)."""
    return {s.epoch: s.data_wait_share for s in epoch_splits(folder)}


def run_share(splits: list[EpochSplit]) -> float | None:
    """The whole run's data-wait share from its epochs' sums: every step's wait over every step's time
    (None where some step's wait was not seen)."""
    if not all(s.wait_measured for s in splits):
        return None
    total = sum(s.total_s for s in splits)
    return sum(s.data_wait_s for s in splits) / total if total > 0 else None


def share_over(splits: list[EpochSplit], epochs: Collection[int]) -> float | None:
    """The data-wait share over the steps of `epochs` (the steady state: `analyzers.figures.phases` picks them)."""
    return run_share([s for s in splits if s.epoch in epochs])


def run_data_wait_share(folder: Run) -> float | None:
    """The whole run's data-wait share: every step's wait over every step's time."""
    return run_share(epoch_splits(folder))
