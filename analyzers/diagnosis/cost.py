"""What measuring a run cost: the sampler's CPU clock (from run.json) against the training's CPU, the
trace's volume, and the steady epoch-time ratio to an untraced run of the same spec in the same folder.

The training's CPU is the worker's process tree under every backend. The tracer records the CPU the
kernel charged its reaped children; where a backend launches the worker itself (nsys wraps it:
`TraceBackend.wraps_process`), that is the launcher's CPU, not the training's, so the tree's CPU is
read from the sampler's own samples of the worker's tree instead. The traced/untraced ratio compares
steady epochs (analyzers.figures.phases) of runs whose spec differs only in what measures them
(analyzers.figures.repeats.UNMEASURED): warm-up epochs hold tracing start-up, not its running cost. A run traced
in a window of epochs (`--trace-window`) compares those epochs with the same epochs of its peer (its
other epochs ran untraced); a window of steps inside one epoch gives no epoch ratio."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

import pyarrow.parquet as pq

from analyzers.figures.contention import run_contention
from analyzers.figures.noise import WITHIN_NOISE
from analyzers.figures.repeats import UNMEASURED
from analyzers.figures.steady import epoch_stats
from analyzers.render.display import ratio_text
from analyzers.run.run import Run
from analyzers.trace import tables as t
from tracer.core import schema
from tracer.core import window as trace_window
from tracer.core.records import RunRecord
from tracer.core.runfolder import list_runs
from tracer.measure.tracing import BACKENDS

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
    traced_over_untraced_epoch: float | None  # steady (or window) epoch time, traced over untraced
    training_cpu_basis: str = "the worker's process tree, as the kernel charged it"
    ratio_basis: str = "steady"  # which epochs the ratio compares: "steady", or the trace window's label
    no_ratio_why: str = ""  # why there is an untraced peer but no ratio (a contended run: analyzers.figures.noise)

    def lines(self) -> list[str]:
        out = []
        if self.sampler_cpu_s is None:
            out.append("sampler: not recorded (runs before measurement costs)")
        else:
            share_cpu = _pct(self.sampler_pct_of_training_cpu)
            out.append(
                f"sampler CPU {self.sampler_cpu_s:.3f} s = {share_cpu} of the training's "
                f"{self.training_cpu_s or 0:.1f} CPU s, {_pct(self.sampler_pct_of_wall)} of wall time "
                f"(training CPU: {self.training_cpu_basis})"
            )
        if self.trace_records is not None:
            records = f"{self.trace_records:,} records" if self.trace_records else "no trace tables in the folder"
            raw = _size(self.trace_bytes) + " raw" if self.trace_bytes else "the raw trace files not kept"
            out.append(f"trace: {records}, {raw}")
        if self.traced_over_untraced_epoch is not None:
            out.append(
                f"traced / untraced epoch time, {self.ratio_basis}: {ratio_text(self.traced_over_untraced_epoch)}"
                f" ({self.untraced_run})"
            )
        elif self.no_ratio_why:
            out.append(f"traced / untraced epoch time: not measured here ({self.no_ratio_why})")
        return out


def _size(n: int) -> str:
    """'142.5 MiB', '38.2 KiB', '20 bytes': never '0.0 MiB' for a file that is there."""
    if n >= 2**20 // 10:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} %"


def measurement_cost(folder: Run) -> Cost:
    record = folder.read_record()
    m = record.measurement_cost
    records = bytes_ = None
    peer = ratio = None
    no_ratio = ""
    ratio_basis = Cost.ratio_basis
    if record.measurement.trace != "none":
        records = sum(
            pq.ParquetFile(folder.table_file(n)).metadata.num_rows for n in TRACE_TABLES if t.present(folder, n)
        )
        bytes_ = sum((folder.path / f).stat().st_size for f in record.trace_files if (folder.path / f).is_file())
        if not bytes_ and folder.raw_dir.is_dir():
            bytes_ = sum(p.stat().st_size for p in folder.raw_dir.rglob("*") if p.is_file() and p.suffix != ".log")
        found = untraced_peer(folder, record)
        window = trace_window.of_record(record.measurement)
        if found is not None:
            if window is None:
                mine, theirs = epoch_stats(folder.epochs()).steady_epoch_s, epoch_stats(found.epochs()).steady_epoch_s
            elif window.first_step is None:
                ratio_basis = window.label
                mine, theirs = _window_epoch_s(folder, window), _window_epoch_s(found, window)
            else:
                mine = theirs = None  # a few traced steps inside an untraced epoch: no epoch ratio
            busy = [f.run_id for f in (found, folder) if run_contention(f).contended]
            if mine and theirs and busy:  # a contended run is never the baseline (nor the subject) of a cost ratio
                peer, no_ratio = found.run_id, f"{' and '.join(busy)} contended: {WITHIN_NOISE}"
            elif mine and theirs:
                peer, ratio = found.run_id, mine / theirs
    training = m.training_cpu_s if m else None
    share = m.sampler_pct_of_training_cpu if m else None
    basis = Cost.training_cpu_basis
    backend = BACKENDS.get(record.measurement.trace)
    if m is not None and backend is not None and backend.wraps_process:
        training = sampled_tree_cpu_s(folder)
        share = 100 * m.sampler_cpu_s / training if training else None
        basis = f"the worker's process tree as sampled ({record.measurement.trace} launched the worker)"
    return Cost(
        sampler_cpu_s=m.sampler_cpu_s if m else None,
        training_cpu_s=training,
        sampler_pct_of_training_cpu=share,
        sampler_pct_of_wall=m.sampler_pct_of_wall if m else None,
        trace_records=records,
        trace_bytes=bytes_,
        untraced_run=peer,
        traced_over_untraced_epoch=ratio,
        training_cpu_basis=basis,
        ratio_basis=ratio_basis,
        no_ratio_why=no_ratio,
    )


def _window_epoch_s(folder: Run, window: trace_window.TraceWindow) -> float | None:
    """Mean time of the window's epochs in this run (None when it did not reach them all)."""
    wanted = range(window.first_epoch, window.last_epoch + 1)
    times = {e.epoch: e.duration_s for e in folder.epochs()}
    return statistics.fmean(times[n] for n in wanted) if all(n in times for n in wanted) else None


def sampled_tree_cpu_s(folder: Run) -> float | None:
    """CPU seconds of the worker's process tree from the sampler's samples: each sample's cores busy
    since the one before, times the time between them."""
    process = folder.samples("process")
    if process is None or process.num_rows < 2 or schema.CPU_CORES not in process.column_names:
        return None
    t = process.column("t_ns").to_pylist()
    cores = process.column(schema.CPU_CORES).to_pylist()
    return sum((c or 0.0) * (t[i] - t[i - 1]) / 1e9 for i, c in enumerate(cores) if i > 0)


def untraced_peer(folder: Run, record: RunRecord) -> Run | None:
    """The newest finished run beside this one whose spec is the same but for what measured it."""
    if record.spec is None:  # a command's or an import's peers are not ours to pair
        return None
    want = dataclasses.replace(record.spec, case=None, **UNMEASURED)
    for other in reversed(list_runs(folder.path.parent)):
        if other.path == folder.path:
            continue
        try:
            r = other.read_record()
        except Exception:  # noqa: BLE001 - a damaged neighbour is not this run's business
            continue
        if r.rankable and r.spec is not None and dataclasses.replace(r.spec, case=None) == want:
            return Run.open(other)
    return None
