"""Where a steady step's time goes, per image, in parts that add up to the step: the basis of `tracer diff`.

From the steps table alone (every built-in run): waiting for data, compute (forward, backward and update
as the host saw them), and synchronising with the device (the loss reads). Where a framework returns
from a step before its work is done (`FrameworkInfo.asynchronous`: JAX, MXNet) the work lands wherever
it next blocks, so compute and synchronising are one part there, "compute (step minus data wait)".

Where a trace on the steps' clock exists, the time outside data wait is split by what the GPU did
meanwhile: each instant goes to the class of the kernels or memory operations running (shared evenly
among classes running at once), or to "host" when the GPU was idle (launching, Python, synchronising).
Data wait stays data wait whatever the GPU did meanwhile (`gpu_during_wait` says how much it did).
These parts add up to the traced steps' time exactly. Beside them, `gpu_by_class` is the plain sum of
kernel and memory-operation time per class (a kernel counts where its start falls, as in `analyze
--phase`): the figure to compare between runs, which overlapping streams may make exceed the step.

A run without steps (an imported trace) has no per-image basis: its `gpu_by_class` covers the whole
trace window and its parts are empty (`basis` says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.figures import torch_parts
from analyzers.figures.steady import WARMUP_EPOCHS, epoch_stats
from analyzers.figures.step_part_names import (
    BASIS_STEPS,
    BASIS_TRACED_STEPS,
    BASIS_WINDOW,
    COMPUTE,
    DATA_WAIT,
    GPU_PREFIX,
    HOST,
    NO_IMAGES_NOTE,
    PER_IMAGE,
    PER_STEP,
    SYNC,
    compute_label,
    part_label,
    split_compute,
)
from analyzers.figures.steps import steps_table
from analyzers.run.run import Run
from analyzers.trace import kernel_classes as kc
from analyzers.trace import kernel_names
from analyzers.trace import tables as t
from analyzers.trace.clock import RELATIVE_NS
from tracer.core import schema
from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.records import RunStatus
from tracer.core.workload import Known


@dataclass(frozen=True)
class Part:
    key: str  # DATA_WAIT, COMPUTE, SYNC, HOST or "gpu:<class>"
    label: str
    seconds: float  # per image (per trace window where basis is BASIS_WINDOW)


@dataclass(frozen=True)
class Decomposition:
    """One run's steady step, per image. `parts` add up to `step_s`; everything else is beside them."""

    run_id: str
    framework: str
    model: str
    device: str
    batch: int | None
    data: str
    trace: str  # the trace backend ("none" without a trace)
    basis: str  # BASIS_STEPS, BASIS_TRACED_STEPS or BASIS_WINDOW
    steps: int  # steps the parts cover
    images: int  # images of those steps (0: no per-image basis)
    step_s: float | None  # per image: the sum of the parts
    measured_s: float | None  # per image from the steady epochs' wall time: 1 / steady images/s
    images_per_s: float | None  # steady images/s (what the loader delivered and the step consumed)
    parts: tuple[Part, ...]
    asynchronous: bool
    gpu_by_class: dict[str, float] = field(default_factory=dict)  # per image; "memory" holds memcpy/memset too
    kernels: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # key -> (name, class, s per image)
    gpu_idle_s: float | None = None  # per image: GPU idle inside the steps, data wait included
    gpu_during_wait_s: float | None = None  # per image: GPU busy while the step waited for data
    window_s: float | None = None  # BASIS_WINDOW: the trace window's length
    devices: int = 0  # GPUs the trace saw
    notes: tuple[str, ...] = ()
    steady_steps: int = 0  # the steady steps there are (more than `steps` where a trace covers a window)
    per: str = PER_IMAGE  # PER_IMAGE or PER_STEP: what every seconds figure above is per

    def part(self, key: str) -> float:
        return next((p.seconds for p in self.parts if p.key == key), 0.0)


def decompose(folder: Run, warmup: int = WARMUP_EPOCHS) -> Decomposition:
    """The steady step of one run, split (see the module docstring)."""
    if not folder.run_json.exists() and (folder.path / t.TRACE_META).exists():
        return _window_only(folder, _bare_head(folder))  # a trace file analysed in place (`ingest.cached_import`)
    record = folder.read_record()
    if record.outcome.status is RunStatus.RUNNING:
        raise UserError(
            f"{folder.path}: its run.json still says running (the run goes on, or its tracer was killed): "
            "its steady step is not known yet; compare it once it has ended"
        )
    spec, command, measured = record.spec, record.command, record.measurement
    # A command's frameworks are the ones its processes imported; the built-in workload's is its spec's.
    frameworks = command.frameworks_imported if command is not None else (measured.framework,)
    asynchronous = any(FRAMEWORKS[f].asynchronous for f in frameworks if f in FRAMEWORKS)
    stats = epoch_stats(folder.epochs(), warmup)
    ips = stats.steady_images_per_s
    # What an imported trace or a user's command does not say stays unknown (its workload records none).
    known = Known.of(record.workload)
    batch = known.batch
    head = dict(
        run_id=folder.run_id,
        framework="+".join(frameworks) if command is not None else measured.framework,
        model=command.label if command is not None else known.model,
        device=measured.device,
        data=str(spec.data) if spec else "",
        trace=str(measured.trace),
        asynchronous=asynchronous,
        measured_s=1 / ips if ips else None,
        images_per_s=ips,
    )
    table = steps_table(folder)
    rank: int | None = None
    notes: list[str] = []
    if table is not None and stats.epochs == 0:  # steps without epochs (a trace's own step ranges): all of them
        notes.append("the run has steps but no epochs: every step counts, none is left out as warm-up")
    elif table is not None:
        table = table.filter(pc.is_in(table["epoch"], pa.array(list(stats.steady_epoch_numbers), pa.int64())))
    if table is None or table.num_rows == 0:
        return _window_only(folder, head)
    if stats.includes_warmup:
        notes.append("the run has no epoch after its warm-up: its steps include the warm-up")
    if schema.RANK in table.column_names and pc.max(table[schema.RANK].fill_null(0)).as_py():
        ranks = len(pc.unique(table[schema.RANK].fill_null(0)))
        notes.append(f"rank 0 of {ranks}: each rank's steps are its own, and they overlap in time")
        table = table.filter(pc.equal(table[schema.RANK].fill_null(0), 0))
        rank = 0  # and rank 0's kernels only: the other ranks' run in its steps' time on their own GPUs
    table = table.sort_by("start_ns")
    per = PER_IMAGE
    if not pc.sum(table["images"].fill_null(0)).as_py():  # per step: each step counts as one unit
        per = PER_STEP
        notes.append(NO_IMAGES_NOTE)
        table = table.set_column(table.schema.get_field_index("images"), "images", pa.array([1] * table.num_rows))
    head["per"] = per
    unseen = bool(table[schema.DATA_WAIT_S].null_count)  # a probe that sees no batch fetched (optimizer, keras.fit)
    if unseen:
        notes.append("data wait not measured for some steps (the probe that saw them cannot tell it)")
    start = table["start_ns"].to_numpy().astype(np.int64)
    wait = table[schema.DATA_WAIT_S].fill_null(0.0).to_numpy()
    compute = table[schema.COMPUTE_S].fill_null(0.0).to_numpy()
    sync = table[schema.SYNC_S].fill_null(0.0).to_numpy()
    images = table["images"].fill_null(0).to_numpy()
    # the reader makes an impossible time (NaN, negative) missing; a step's compute and sync are never missing
    damaged = table[schema.COMPUTE_S].null_count + table[schema.SYNC_S].null_count
    _refuse_damaged_steps(folder, damaged, wait, compute, sync, images)
    gpu = _gpu_rows(folder, rank)
    if gpu is not None and record.imported is None and _relative_clock(folder):
        notes.append("the trace's clock is not the steps' clock (no anchor in the trace): GPU time not split")
        gpu = None
    if gpu is not None:
        end = start + ((wait + compute + sync) * 1e9).astype(np.int64)
        covered = (start >= gpu.first_ns) & (start <= gpu.last_ns)  # steps that began inside the trace
        if record.imported is not None:  # the steps are the trace's own: each that meets its kernels counts
            covered = (end >= gpu.first_ns) & (start <= gpu.last_ns)
        if covered.any():
            if not covered.all():
                notes.append(f"traced: {int(covered.sum())} of {len(covered)} steady steps (a trace window)")
            head["steady_steps"] = len(start)
            return _traced(
                head, gpu, start[covered], wait[covered], end[covered], int(images[covered].sum()), notes, batch
            )
        notes.append("no steady step lies inside the trace: GPU time not split")
    n = int(images.sum())
    if unseen:  # no part for a wait not seen: the whole step, never a data wait of 0
        parts = [(COMPUTE, wait.sum() + compute.sum() + sync.sum())]
    elif asynchronous:
        parts = [(DATA_WAIT, wait.sum()), (COMPUTE, compute.sum() + sync.sum())]
        said = "+".join(frameworks)
        notes.append(f"{said} returns from a step before its work is done: compute is step minus data wait")
    else:
        split = torch_parts.probe_parts(folder, table)
        compute_parts = [(COMPUTE, compute.sum())] if split is None else split_compute(compute.sum(), split)
        parts = [(DATA_WAIT, wait.sum()), *compute_parts, (SYNC, sync.sum())]
    made = tuple(
        Part(k, compute_label(asynchronous, unseen) if k == COMPUTE else part_label(k), float(v) / n) for k, v in parts
    )
    return Decomposition(
        **head,  # type: ignore[arg-type]
        batch=batch,
        basis=BASIS_STEPS,
        steps=len(start),
        steady_steps=len(start),
        images=n,
        step_s=sum(p.seconds for p in made),
        parts=made,
        notes=tuple(notes),
    )


def _refuse_damaged_steps(folder: Run, missing: int, *columns: np.ndarray) -> None:
    """A step whose parts or images are NaN, infinite or negative (or `missing`: made so by the reader) is
    damage, not a measurement: summed, it would pass for a real step (a NaN gap reads as "the same time")."""
    bad = np.zeros(len(columns[0]), dtype=bool)
    for values in columns:
        numbers = values.astype(np.float64)
        bad |= ~np.isfinite(numbers) | (numbers < 0)
    count = int(bad.sum()) + missing
    if count:
        raise UserError(
            f"{folder.path}: {count} of its {len(bad)} steady steps have NaN, infinite or negative times "
            "or images: its steps table is damaged, and its step is not compared"
        )


@dataclass(frozen=True)
class _Gpu:
    """Kernels and memory operations of a run's trace, each with its class and its name's key."""

    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray  # index into kc.CLASSES
    name_id: np.ndarray  # index into `names`
    names: list[str]  # distinct kernel names (memory operations: their kind)
    first_ns: int
    last_ns: int
    devices: int


def _gpu_rows(folder: Run, rank: int | None = None) -> _Gpu | None:
    """The run's kernels and memory operations (of `rank` only, where given and the tables have ranks)."""
    parts = []
    for name, column in ((t.KERNELS, "name"), (t.MEMCPY, "kind")):
        path = folder.table_file(name)
        if t.present(folder, name):  # absent, or damaged (named in the run's problems)
            table = pq.read_table(path, columns=["start_ns", "end_ns", column, "device"])
            if rank is not None and schema.RANK in pq.ParquetFile(path).schema_arrow.names:
                ranks = pq.read_table(path, columns=[schema.RANK])[schema.RANK]
                table = table.filter(pc.equal(ranks.fill_null(0), rank))
            if table.num_rows:
                classes = kc.classify(table[column]) if name == t.KERNELS else pa.array([kc.MEMORY] * table.num_rows)
                parts.append((table, column, classes))
    if not parts:
        return None
    index = {c.key: i for i, c in enumerate(kc.CLASSES)}
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    cls: list[np.ndarray] = []
    ids: list[np.ndarray] = []
    names: list[str] = []
    devices: set[int] = set()
    for table, column, classes in parts:
        starts.append(table["start_ns"].to_numpy().astype(np.int64))
        ends.append(table["end_ns"].to_numpy().astype(np.int64))
        encoded = pc.dictionary_encode(classes)
        lookup = np.array([index[c] for c in encoded.dictionary.to_pylist()], dtype=np.int64)
        cls.append(lookup[encoded.indices.to_numpy()])
        named = pc.dictionary_encode(table[column].combine_chunks().fill_null(""))
        ids.append(named.indices.to_numpy().astype(np.int64) + len(names))
        names += named.dictionary.to_pylist()
        devices |= set(pc.unique(table["device"].fill_null(0)).to_pylist())
    start, end = np.concatenate(starts), np.concatenate(ends)
    return _Gpu(
        start, end, np.concatenate(cls), np.concatenate(ids), names, int(start.min()), int(end.max()), len(devices)
    )


def _by_kernel(gpu: _Gpu, rows: np.ndarray, per: float) -> dict[str, tuple[str, str, float]]:
    """Plain time of `rows` (a mask) by kernel, keyed by `kernel_names.key` (one kernel whichever
    backend spelt it): key -> (a name, its class, seconds / `per`)."""
    durations = (gpu.end - gpu.start).astype(np.float64)
    totals = np.bincount(gpu.name_id[rows], weights=durations[rows], minlength=len(gpu.names))
    classes = np.zeros(len(gpu.names), dtype=np.int64)
    classes[gpu.name_id] = gpu.cls
    out: dict[str, tuple[str, str, float]] = {}
    for i in np.flatnonzero(totals):
        key = kernel_names.key(gpu.names[i])
        _, _, before = out.get(key, ("", "", 0.0))
        out[key] = (gpu.names[i], kc.CLASSES[classes[i]].key, before + totals[i] / 1e9 / per)
    return out


def _relative_clock(folder: Run) -> bool:
    path = folder.path / t.TRACE_META
    if not path.exists():
        return False
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return any(isinstance(v, dict) and v.get("clock") == RELATIVE_NS for v in meta.values())


def _traced(
    head: dict[str, object],
    gpu: _Gpu,
    start: np.ndarray,
    wait: np.ndarray,
    end: np.ndarray,
    images: int,
    notes: list[str],
    batch: int | None,
) -> Decomposition:
    """The exclusive split of the steps [start, end), their data wait [start, start + wait), by a sweep
    over every start and end of a GPU interval and of a step."""
    waited = start + (wait * 1e9).astype(np.int64)
    n_cls = len(kc.CLASSES)
    near = (gpu.end > start.min()) & (gpu.start < end.max())  # the intervals that can touch a step
    g_start, g_end, g_cls = gpu.start[near], gpu.end[near], gpu.cls[near]
    times = np.concatenate([g_start, g_end, start, waited, end])
    order = np.argsort(times, kind="stable")
    k, zeros = len(g_start), np.zeros(3 * len(start), dtype=np.int8)
    sign = np.concatenate([np.ones(k, dtype=np.int8), -np.ones(k, dtype=np.int8), zeros])[order]
    cls = np.concatenate([g_cls, g_cls, np.full(3 * len(start), -1)]).astype(np.int16)[order]
    times = times[order]
    length = np.diff(times).astype(np.float64)  # segment i is [times[i], times[i+1])
    mid = times[:-1] + length / 2
    step = np.maximum(np.searchsorted(start, mid, side="right") - 1, 0)
    inside = (mid >= start[step]) & (mid < end[step])
    in_wait = inside & (mid < waited[step])
    running = np.cumsum(sign, dtype=np.int64)[:-1]  # intervals running in each segment
    busy = running > 0
    work = inside & ~in_wait & busy
    weight = np.where(work, length / np.maximum(running, 1), 0.0)  # each running interval's share of a segment
    seconds = {
        DATA_WAIT: float((waited - start).sum()) / 1e9,
        HOST: float(length[inside & ~in_wait & ~busy].sum()) / 1e9,
    }
    for i in np.unique(g_cls):  # one pass per class present: memory stays a few arrays of the events
        active = np.cumsum(np.where(cls == i, sign, 0), dtype=np.int64)[:-1]
        share = float((weight * active).sum()) / 1e9
        if share > 0:
            seconds[GPU_PREFIX + kc.CLASSES[i].key] = share
    seconds = {DATA_WAIT: seconds.pop(DATA_WAIT), HOST: seconds.pop(HOST)} | dict(
        sorted(seconds.items(), key=lambda kv: kc.order(kv[0].removeprefix(GPU_PREFIX)))
    )
    parts = tuple(Part(key, part_label(key), value / images) for key, value in seconds.items())
    # Plain sums: every interval whose start falls inside a step.
    s_step = np.searchsorted(start, gpu.start, side="right") - 1
    counted = (s_step >= 0) & (gpu.start < end[np.maximum(s_step, 0)])
    durations = (gpu.end - gpu.start).astype(np.float64)
    plain = np.bincount(gpu.cls[counted], weights=durations[counted], minlength=n_cls) / 1e9
    return Decomposition(
        **head,  # type: ignore[arg-type]
        batch=batch,
        basis=BASIS_TRACED_STEPS,
        steps=len(start),
        images=images,
        step_s=sum(p.seconds for p in parts),
        parts=parts,
        gpu_by_class={c.key: float(plain[i]) / images for i, c in enumerate(kc.CLASSES) if plain[i] > 0},
        kernels=_by_kernel(gpu, counted, images),
        gpu_idle_s=float(length[inside & ~busy].sum()) / 1e9 / images,
        gpu_during_wait_s=float(length[in_wait & busy].sum()) / 1e9 / images,
        devices=gpu.devices,
        notes=tuple(notes),
    )


def _bare_head(folder: Run) -> dict[str, object]:
    """What a trace file ingested without a run record says of itself: its name and its tracer."""
    try:
        sources = list(json.loads((folder.path / t.TRACE_META).read_text()))
    except (OSError, ValueError):
        sources = []
    trace = "/".join(t.TRACE_OF_SOURCE.get(s, s) for s in sources) or "unknown"
    return dict(run_id=folder.run_id, framework="trace file", model="", device="gpu", data="", trace=trace,
                asynchronous=False, measured_s=None, images_per_s=None)  # fmt: skip


def _window_only(folder: Run, head: dict[str, object]) -> Decomposition:
    """A run without steady steps: GPU time by class over its whole trace, or nothing to split."""
    gpu = _gpu_rows(folder)
    if gpu is None:
        raise UserError(f"{folder.path}: neither steps nor a GPU trace: nothing to split (was the run cut short?)")
    durations = (gpu.end - gpu.start).astype(np.float64)
    plain = np.bincount(gpu.cls, weights=durations, minlength=len(kc.CLASSES)) / 1e9
    return Decomposition(
        **head,  # type: ignore[arg-type]
        batch=None,
        basis=BASIS_WINDOW,
        steps=0,
        images=0,
        step_s=None,
        parts=(),
        gpu_by_class={c.key: float(plain[i]) for i, c in enumerate(kc.CLASSES) if plain[i] > 0},
        kernels=_by_kernel(gpu, np.ones(len(gpu.start), dtype=bool), 1.0),
        window_s=(gpu.last_ns - gpu.first_ns) / 1e9,
        devices=gpu.devices,
        notes=("no steps in this run: GPU time over the whole trace window, not per image",),
    )
