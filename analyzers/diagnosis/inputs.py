"""One run's tables, loaded once and handed to every rule, so rules stay pure functions of tables
(tests swap a table with `dataclasses.replace`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.cuda_api import ApiRow
from tracer.core import schema
from tracer.core.records import EpochRecord, RunRecord
from tracer.core.runfolder import RunFolder
from tracer.core.schema import STEPS_TABLE


@dataclass(frozen=True)
class RunTables:
    run_id: str
    record: RunRecord
    epochs: tuple[EpochRecord, ...]
    process: pa.Table | None
    steps: pa.Table | None
    gpu: pa.Table | None
    cuda_startup: tuple[ApiRow, ...]
    cuda_steady: tuple[ApiRow, ...]
    cuda_whole: tuple[ApiRow, ...]
    startup_cut_ns: int | None  # end of the first step/epoch start, as analyzers.cuda_api cuts phases
    trace_span_ns: tuple[int, int] | None  # first CUDA API call's start, last one's end
    kernel_count: int
    kernel_total_ns: int
    kernel_median_ns: float | None
    nvtx_steps: int  # NVTX `step…` ranges, the step count of traces without a steps table
    errors: tuple[str, ...]  # the worker's own error events
    worker_start_ns: int  # the worker's `start` event (else the run's wall start): start-up begins here

    @property
    def cores(self) -> int:
        return max(1, self.record.environment.cpu_logical_cores)

    def steady_epochs(self) -> list[EpochRecord]:
        """Every epoch after the first (the first holds warm-up); all of them when there is one."""
        return list(self.epochs[1:]) if len(self.epochs) > 1 else list(self.epochs)

    def in_epochs(self, table: pa.Table | None, epochs: list[EpochRecord]) -> pa.Table | None:
        """Rows of a sample table whose t_ns falls inside one of `epochs` (vectorised: hours of
        samples over a hundred epochs stay cheap)."""
        if table is None or not epochs or "t_ns" not in table.column_names:
            return None
        t = table.column("t_ns")
        keep = pc.and_(pc.greater_equal(t, epochs[0].start_ns), pc.less_equal(t, epochs[0].end_ns))
        for e in epochs[1:]:
            keep = pc.or_(keep, pc.and_(pc.greater_equal(t, e.start_ns), pc.less_equal(t, e.end_ns)))
        return table.filter(keep)

    def median_epoch_s(self) -> float | None:
        steady = self.steady_epochs()
        return statistics.median(e.duration_s for e in steady) if steady else None


def load(folder: RunFolder) -> RunTables:
    from analyzers import tables as t
    from analyzers.cuda_api import api_summary, connect, phases

    record = folder.read_record()
    startup: list[ApiRow] = []
    steady: list[ApiRow] = []
    whole: list[ApiRow] = []
    cut = None
    span = None
    kernels: tuple[int, int, float | None] = (0, 0, None)
    nvtx_steps = 0
    api_path = folder.table_path(t.CUDA_API)
    if api_path.exists():
        whole = api_summary(folder)
        for p in phases(folder):
            if p.name == "startup":
                cut = p.end_ns
                startup = api_summary(folder, None, p.end_ns)
            elif p.name == "steady":
                steady = api_summary(folder, p.start_ns, None)
        q = f"SELECT min(start_ns), max(end_ns) FROM read_parquet('{_sql(api_path)}')"
        lo, hi = connect().execute(q).fetchone() or (None, None)
        span = (int(lo), int(hi)) if lo is not None else None
    kpath = folder.table_path(t.KERNELS)
    if kpath.exists():
        row = (
            connect()
            .execute(f"SELECT count(*), coalesce(sum(dur_ns), 0), median(dur_ns) FROM read_parquet('{_sql(kpath)}')")
            .fetchone()
        )
        if row is not None:
            kernels = (int(row[0]), int(row[1]), float(row[2]) if row[2] is not None else None)
    npath = folder.table_path(t.NVTX)
    if npath.exists():
        from analyzers.cuda_api import _STEP

        names = connect().execute(f"SELECT name FROM read_parquet('{_sql(npath)}')").fetchall()
        nvtx_steps = sum(1 for (n,) in names if _STEP.match(str(n)))
    events = folder.events()
    errors = tuple(str(e.get("error", "")) for e in events if e.get("kind") == schema.Event.ERROR)
    starts = [int(e["t_ns"]) for e in events if e.get("kind") == schema.Event.START and "t_ns" in e]
    return RunTables(
        run_id=folder.run_id,
        record=record,
        epochs=tuple(folder.epochs()),
        process=folder.samples("process"),
        steps=folder.samples(STEPS_TABLE),
        gpu=folder.samples("gpu"),
        cuda_startup=tuple(startup),
        cuda_steady=tuple(steady),
        cuda_whole=tuple(whole),
        startup_cut_ns=cut,
        trace_span_ns=span,
        kernel_count=kernels[0],
        kernel_total_ns=kernels[1],
        kernel_median_ns=kernels[2],
        nvtx_steps=nvtx_steps,
        errors=errors,
        worker_start_ns=starts[0] if starts else record.wall_start_ns,
    )


def _sql(path: object) -> str:
    return str(path).replace("'", "''")


def column(table: pa.Table | None, name: str) -> list[float]:
    if table is None or name not in table.column_names:
        return []
    return [float(v) for v in table.column(name).to_pylist() if v is not None]
