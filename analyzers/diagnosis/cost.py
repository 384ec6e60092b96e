"""What measuring a run cost: the sampler's CPU clock (from run.json), the trace's volume, and the
epoch-time ratio to an untraced run of the same spec in the same folder."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow.parquet as pq

from analyzers import tables as t
from analyzers.run_summary import mean_epoch_s
from tracer.core.records import RunRecord
from tracer.core.runfolder import RunFolder, list_runs

TRACE_TABLES = (t.CUDA_API, t.KERNELS, t.MEMCPY, t.NVTX, t.OSRT)


@dataclass(frozen=True)
class Cost:
    sampler_cpu_s: float | None
    training_cpu_s: float | None
    sampler_pct_of_training_cpu: float | None
    sampler_pct_of_wall: float | None
    trace_records: int | None  # rows of the normalised trace tables
    trace_bytes: int | None  # bytes of the raw trace files
    untraced_run: str | None
    traced_over_untraced_epoch: float | None

    def lines(self) -> list[str]:
        out = []
        if self.sampler_cpu_s is None:
            out.append("sampler: not recorded (runs before measurement costs)")
        else:
            share_cpu = _pct(self.sampler_pct_of_training_cpu)
            out.append(
                f"sampler CPU {self.sampler_cpu_s:.3f} s = {share_cpu} of the training's "
                f"{self.training_cpu_s or 0:.1f} CPU s, {_pct(self.sampler_pct_of_wall)} of wall time"
            )
        if self.trace_records is not None:
            out.append(f"trace: {self.trace_records:,} records, {(self.trace_bytes or 0) / 2**20:.1f} MiB raw")
        if self.traced_over_untraced_epoch is not None:
            out.append(f"traced / untraced epoch time: {self.traced_over_untraced_epoch:.2f}x ({self.untraced_run})")
        return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} %"


def measurement_cost(folder: RunFolder) -> Cost:
    record = folder.read_record()
    m = record.measurement_cost
    records = bytes_ = None
    peer = ratio = None
    if record.spec.trace != "none":
        records = sum(
            pq.ParquetFile(folder.table_path(n)).metadata.num_rows
            for n in TRACE_TABLES
            if folder.table_path(n).exists()
        )
        bytes_ = sum((folder.path / f).stat().st_size for f in record.trace_files if (folder.path / f).is_file())
        if not bytes_ and folder.raw_dir.is_dir():
            bytes_ = sum(p.stat().st_size for p in folder.raw_dir.rglob("*") if p.is_file() and p.name != "worker.log")
        found = untraced_peer(folder, record)
        if found is not None:
            mine, theirs = mean_epoch_s(folder.epochs()), mean_epoch_s(found.epochs())
            if mine and theirs:
                peer, ratio = found.run_id, mine / theirs
    return Cost(
        sampler_cpu_s=m.sampler_cpu_s if m else None,
        training_cpu_s=m.training_cpu_s if m else None,
        sampler_pct_of_training_cpu=m.sampler_pct_of_training_cpu if m else None,
        sampler_pct_of_wall=m.sampler_pct_of_wall if m else None,
        trace_records=records,
        trace_bytes=bytes_,
        untraced_run=peer,
        traced_over_untraced_epoch=ratio,
    )


def untraced_peer(folder: RunFolder, record: RunRecord) -> RunFolder | None:
    """The newest finished run beside this one whose spec is the same but for tracing."""
    want = dataclasses.replace(record.spec, trace="none", pyspy=False, nsys_sampling=False, case=None)
    for other in reversed(list_runs(folder.path.parent)):
        if other.path == folder.path:
            continue
        try:
            r = other.read_record()
        except Exception:  # noqa: BLE001 - a damaged neighbour is not this run's business
            continue
        if r.outcome.status.value == "ok" and dataclasses.replace(r.spec, case=None) == want:
            return other
    return None
