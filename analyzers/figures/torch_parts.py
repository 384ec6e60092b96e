"""What the probe's step parts of a PyTorch command say (samples/step_parts, tracer/probe/step_parts.py):
the forward, backward and optimizer time of a run's steps (`analyzers.figures.step_parts` splits compute
with them), and each rank's arrival at its step's `backward()`, where DDP's all-reduce begins (the
straggler's arrivals, `analyzers.figures.ranks`, where no collective is recorded)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.run.run import Run
from tracer.core import schema


def probe_parts(folder: Run, steps: pa.Table) -> tuple[float, float, float] | None:
    """Seconds of forward, backward and optimizer over `steps` (rank 0's steady steps) from the probe's
    step parts; None where the run has none for every one of them (not a PyTorch command, or an older run)."""
    table = folder.samples(schema.STEP_PARTS_TABLE)
    if table is None or not table.num_rows:
        return None
    epoch, step = schema.STEP_COLUMNS[:2]
    table = table.filter(pc.equal(table[schema.RANK].fill_null(0), 0))
    keys = zip(table[epoch].to_pylist(), table[step].to_pylist())
    columns = (schema.FORWARD_S, schema.BACKWARD_S, schema.OPTIMIZER_S)
    values = zip(*(table[c].fill_null(0.0).to_pylist() for c in columns))
    by_step = dict(zip(keys, values))
    wanted = list(zip(steps[epoch].to_pylist(), steps[step].to_pylist()))
    if not wanted or any(k not in by_step for k in wanted):
        return None
    f, b, o = (sum(by_step[k][i] for k in wanted) for i in range(3))
    return f, b, o


def step_arrivals(folder: Run) -> pa.Table | None:
    """The probe's step parts with an arrival (a step that called backward()), or None."""
    table = folder.samples(schema.STEP_PARTS_TABLE)
    if table is None or schema.ARRIVE_NS not in table.column_names:
        return None
    table = table.filter(pc.is_valid(table[schema.ARRIVE_NS]))
    return table if table.num_rows else None


def arrival_rows(table: pa.Table, steady: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    """(epoch, step, arrive_ns, done_ns) per step of `steady` (all, where empty): matched across ranks by
    (epoch, step); done when the step's backward returned."""
    epoch, step = schema.STEP_COLUMNS[:2]
    rows = zip(*(table[c].to_pylist() for c in (epoch, step, schema.ARRIVE_NS, schema.BACKWARD_S)))
    return [
        (int(e), int(s), int(arrive), int(arrive + (backward or 0.0) * 1e9))
        for e, s, arrive, backward in rows
        if not steady or e in steady
    ]
