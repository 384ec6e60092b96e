"""How long a cell will take and how much disk it will fill, judged from earlier runs of the same setting
in the runs folder.

Same setting: the same framework, model, dataset, device, batch, image size and limit. Time: the first
epoch apart (it pays for start-up work inside the epoch: graph tracing, autotuning, cold caches; on the
H100 PyTorch's first epoch took 18 s against 4.7 s for the next ones), then `epochs - 1` times the
mean of the later epochs, plus the wall time outside the epochs; only untraced epochs count (an
epoch inside a trace window, or of a run traced whole, runs slower by the trace's own cost), and a
traced cell's traced epochs take that cost from the earlier traced runs of its setting and backend.

Disk: the sampled part grows with wall time and sampling rate (MiB per hour at 1 Hz, from the earlier
runs' samples/ and events); the trace with the epochs traced (MiB per traced epoch, per backend: the
trace files a run kept plus the tables ingested from them). A traced cell of more than
`tracer.core.window.DEFAULT_ABOVE_EPOCHS` epochs traces one epoch by default (`--trace-window`); the
estimate also says what tracing it whole would take. A cell with no such earlier run has no estimate,
and `--dry-run` says so.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Hashable

from tracer.campaign.plan import Cell
from tracer.core import window as trace_window
from tracer.core.errors import UserError
from tracer.core.options import spec_fields
from tracer.core.records import RunRecord, RunSpec, RunStatus
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import EVENTS_FILE

MIB = 2**20


@dataclass(frozen=True)
class Timing:
    first_epoch_s: float
    epoch_s: float  # mean of the later untraced epochs (the first's, where runs had only one)
    overhead_s: float
    runs: int
    samples_mib_per_hz_h: float | None = None  # sampled data per hour of wall time per Hz of sampling

    def cell_s(self, epochs: int) -> float:
        return self.first_epoch_s + max(0, epochs - 1) * self.epoch_s + self.overhead_s


@dataclass(frozen=True)
class TraceCost:
    """What tracing one epoch of a setting with one backend cost earlier."""

    mib_per_epoch: float
    slowdown: float | None  # traced epoch time over the untraced one (None: no untraced epoch to compare)


@dataclass(frozen=True)
class Disk:
    """A cell's disk in MiB: the sampled part, its trace with its window, and its trace taken whole."""

    samples_mib: float
    trace_mib: float | None  # None: a traced cell whose backend no earlier run of its setting used
    trace_whole_mib: float | None
    traced_epochs: int

    @property
    def total_mib(self) -> float | None:
        return None if self.trace_mib is None else self.samples_mib + self.trace_mib

    @property
    def total_whole_mib(self) -> float | None:
        return None if self.trace_whole_mib is None else self.samples_mib + self.trace_whole_mib


def _key(
    framework: str, model: str, dataset: str, device: str, batch: int, image_size: int, limit: int | None
) -> Hashable:
    return (framework, model, dataset, device, batch, image_size, limit)


def spec_key(spec: RunSpec) -> Hashable:
    return _key(spec.framework, spec.model, spec.dataset, spec.device, spec.batch, spec.image_size, spec.limit)


def _default(name: str) -> object:
    return spec_fields()[name][2].default


def cell_key(cell: Cell) -> Hashable:
    k = cell.knobs
    return _key(
        cell.framework,
        cell.model,
        cell.dataset,
        cell.device,
        cell.batch,
        k.get("image_size", _default("image_size")),
        k.get("limit"),
    )


def traced_epochs(trace: str, window_text: str | None, epochs: int, pyspy: bool = False) -> int:
    """Epochs a run traces: none untraced, its window's (a steps window counts as its epoch), or all."""
    spec = SimpleNamespace(trace=trace, trace_window=window_text, epochs=epochs, pyspy=pyspy)
    text, _ = trace_window.resolve(spec)
    if text is None or trace == "none":
        return 0
    window = trace_window.parse(text)
    return epochs if window is None else min(epochs, window.last_epoch) - window.first_epoch + 1


def _traced_set(spec: RunSpec, done: list[int]) -> set[int]:
    if spec.trace == "none":
        return set()
    window = trace_window.of_record(spec)
    if window is None:
        return set(done)
    return set(range(window.first_epoch, window.last_epoch + 1))


def _mib(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths if p.is_file()) / MIB


def _sampled_mib(folder: RunFolder) -> float:
    return _mib([*folder.samples_dir.rglob("*"), folder.path / EVENTS_FILE])


def _trace_mib(folder: RunFolder, record: RunRecord) -> float:
    """The trace files the run kept and the trace tables ingested from them (Parquet at the folder's top)."""
    return _mib([folder.path / f for f in record.trace_files] + sorted(folder.path.glob("*.parquet")))


@dataclass
class _Pool:
    first: list[float]
    later: list[float]
    overheads: list[float]
    traced_overheads: list[float]
    sampled_rates: list[float]
    runs: int = 0


def _pools(out_dir: Path) -> tuple[dict[Hashable, _Pool], dict[tuple[Hashable, str], list[tuple[float, list[float]]]]]:
    pools: dict[Hashable, _Pool] = defaultdict(lambda: _Pool([], [], [], [], []))
    traces: dict[tuple[Hashable, str], list[tuple[float, list[float]]]] = defaultdict(list)
    for folder in list_runs(out_dir):
        try:
            record = folder.read_record()
        except UserError:
            continue
        done = folder.epochs()
        spec = record.spec  # a campaign's cells are built-in runs: a command's or an import's times say nothing
        if spec is None or record.outcome.status is not RunStatus.OK or not done or record.wall_end_ns is None:
            continue
        key = spec_key(spec)
        pool = pools[key]
        pool.runs += 1
        traced = _traced_set(spec, [e.epoch for e in done])
        first_epoch = min(e.epoch for e in done)
        for e in done:
            if e.epoch not in traced:
                (pool.first if e.epoch == first_epoch else pool.later).append(e.duration_s)
        wall = (record.wall_end_ns - record.wall_start_ns) / 1e9
        outside = max(0.0, wall - sum(e.duration_s for e in done))  # start-up, wind-down (a trace's export too)
        (pool.traced_overheads if traced else pool.overheads).append(outside)
        if wall > 0 and spec.sample_hz > 0:
            pool.sampled_rates.append(_sampled_mib(folder) / (wall / 3600) / spec.sample_hz)
        if traced:
            traced_later = [e.duration_s for e in done if e.epoch in traced and e.epoch != first_epoch]
            per_epoch = _trace_mib(folder, record) / len(traced)
            traces[(key, spec.trace)].append((per_epoch, traced_later))
    return pools, traces


def timings(out_dir: Path) -> dict[Hashable, Timing]:
    """Per setting, over the ok runs with at least one untraced epoch in `out_dir`."""
    return _model(out_dir)[0]


def _model(out_dir: Path) -> tuple[dict[Hashable, Timing], dict[tuple[Hashable, str], TraceCost]]:
    pools, traces = _pools(out_dir)
    known: dict[Hashable, Timing] = {}
    for key, p in pools.items():
        if not p.first and not p.later:
            continue
        first = statistics.fmean(p.first) if p.first else statistics.fmean(p.later)
        later = statistics.fmean(p.later) if p.later else first
        rate = statistics.fmean(p.sampled_rates) if p.sampled_rates else None
        overhead = statistics.fmean(p.overheads or p.traced_overheads)  # untraced runs' where there are any
        known[key] = Timing(first, later, overhead, p.runs, rate)
    costs: dict[tuple[Hashable, str], TraceCost] = {}
    for (key, backend), seen in traces.items():
        traced = [s for _, later in seen for s in later]
        untraced = known.get(key)
        slowdown = statistics.fmean(traced) / untraced.epoch_s if traced and untraced and untraced.epoch_s else None
        costs[(key, backend)] = TraceCost(statistics.fmean(m for m, _ in seen), slowdown)
    return known, costs


def _cell_traced(cell: Cell) -> int:
    return traced_epochs(cell.trace, cell.knobs.get("trace_window"), cell.epochs, bool(cell.knobs.get("pyspy")))


def estimate(cells: list[Cell], out_dir: Path) -> dict[str, float | None]:
    """Seconds per cell id, `None` where no earlier run tells; a traced cell's traced epochs at the
    slowdown its backend showed on that setting (at untraced speed where none was measured)."""
    known, costs = _model(out_dir)
    out: dict[str, float | None] = {}
    for cell in cells:
        t = known.get(cell_key(cell))
        if t is None:
            out[cell.cell_id] = None
            continue
        cost = costs.get((cell_key(cell), cell.trace))
        extra = (cost.slowdown - 1) * t.epoch_s if cost and cost.slowdown else 0.0
        out[cell.cell_id] = t.cell_s(cell.epochs) + _cell_traced(cell) * max(0.0, extra)
    return out


def disk(cells: list[Cell], out_dir: Path, seconds: dict[str, float | None] | None = None) -> dict[str, Disk | None]:
    """MiB per cell id (`None` where no earlier run of the setting tells), with and without its window."""
    known, costs = _model(out_dir)
    seconds = seconds if seconds is not None else estimate(cells, out_dir)
    hz_default = float(_default("sample_hz"))  # type: ignore[arg-type]
    out: dict[str, Disk | None] = {}
    for cell in cells:
        t, wall = known.get(cell_key(cell)), seconds.get(cell.cell_id)
        if t is None or wall is None or t.samples_mib_per_hz_h is None:
            out[cell.cell_id] = None
            continue
        hz = float(cell.knobs.get("sample_hz", hz_default))
        sampled = t.samples_mib_per_hz_h * hz * wall / 3600
        traced = _cell_traced(cell)
        if cell.trace == "none":
            out[cell.cell_id] = Disk(sampled, 0.0, 0.0, 0)
            continue
        cost = costs.get((cell_key(cell), cell.trace))
        per_epoch = cost.mib_per_epoch if cost else None
        out[cell.cell_id] = Disk(
            sampled,
            None if per_epoch is None else per_epoch * traced,
            None if per_epoch is None else per_epoch * cell.epochs,
            traced,
        )
    return out


def size(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.1f} MiB"


def clock(seconds: float) -> str:
    s = int(round(seconds))
    days, s = divmod(s, 86400)
    text = f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days} d {text}" if days else text
