"""A run's view: everything the viewer draws of a trace (lanes, their zoom indexes, the CUDA API split per
phase, the kernel top list), computed once and kept on disk as memory-mapped NumPy arrays.

Why: a one-hour traced run holds 10 M events; building its lanes, links and rasters takes seconds, and
the viewer must open it in under three. A run with at least `STORE_MIN_EVENTS` events gets its view
written by the ingest (`analyzers.ingest.pipeline.ingest_run`) into `<run>/view/`, or, where the run folder is
read-only, into the tool's cache. `load` maps the arrays (`numpy.load(mmap_mode="r")`: the OS reads
only the pages a view touches) and rebuilds when the run's tables changed since (their sizes and
mtimes are the key) or the format did. A small run is built in memory on every open: it is cheap.

Opening costs what the first view needs, not what the run holds: what the viewer asks of whole arrays
(`FACTS`: the first start, the kinds present) is kept in the manifest, and the arrays' values are checked
(`lanes_problem`) only where a file is no longer the one written (its size and mtime, kept in the
manifest); their types and lengths always. Scanning a 40 M-event view's 2.3 GB on every open took 3 s and made
every page of it resident.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analyzers.run.memo import per_run
from analyzers.run.run import Run
from analyzers.summaries.rows import ApiRow, KernelRow
from analyzers.timeline import lanes as ln
from analyzers.timeline.lane_index import LaneIndex, lane_indexes
from analyzers.trace import tables as t
from analyzers.trace.correlation import GPU_TABLES
from tracer.core import schema
from tracer.core.problems import Problems
from tracer.core.reading import not_regular, read_bytes

VIEW_DIR = "view"
VIEWS_CACHE = "views"  # under `tracer.core.paths.cache_root`, for read-only run folders
MANIFEST = "manifest.json"
FORMAT = 1  # bump when a stored record changes shape
STORE_MIN_EVENTS = 1 << 18  # lane segments, calls and GPU items: below this a view builds in well under a second
LANE_SETS = tuple(f.name for f in dataclasses.fields(ln.Lanes))  # threads, api_calls, gpu, links
NARROW_FIELDS = (
    "lane",
    "level",
    "code",
    "detail_code",
    "source_code",
    "name_code",
    "api_code",
    "kind_code",
    "label_code",
)
"""Small-integer arrays (lanes, kinds, codes into name lists), stored in the narrowest integer type that
holds them; times, rows and ids stay int64."""
FACTS = ("origin_ns", "activities", "span_ns")
"""Cached properties of the thread and GPU lane sets that read whole arrays: stored with the view, so that
opening it reads none."""


@dataclass
class RunView:
    """What the viewer shows of one run's trace and thread timeline."""

    lanes: ln.Lanes = field(default_factory=lambda: ln.Lanes(None, None, None, None))
    indexes: dict[str, LaneIndex] = field(default_factory=dict)
    api_phases: dict[str, list[ApiRow]] = field(default_factory=dict)  # phases with calls only
    kernels: list[KernelRow] = field(default_factory=list)
    api_label: str = "CUDA API"
    stored: Path | None = None  # where it was read from or written to; None when built in memory

    @property
    def events(self) -> int:
        sets = (self.lanes.threads, self.lanes.api_calls, self.lanes.gpu)
        return sum(len(s.start_ns) for s in sets if s is not None)


def build(folder: Run) -> RunView:
    """The view computed from the run's tables (`analyzers.timeline.lanes`, `lane_index`, `cuda_api`, `kernels`)."""
    lanes = ln.load(folder)
    view = RunView(lanes=lanes, indexes=lane_indexes(lanes))
    if t.present(folder, t.CUDA_API):
        from analyzers.summaries import cuda_api, kernels  # here: a run without a trace does not pay for DuckDB

        view.api_label = f"{cuda_api.api_family(folder)} API"
        view.api_phases = {phase: rows for phase, rows in cuda_api.phase_summaries(folder).items() if rows}
        if t.present(folder, t.KERNELS):
            view.kernels = kernels.kernel_summary(folder)
    return view


@per_run
def load(folder: Run) -> RunView:
    """The stored view where it is current, else a fresh one (stored where it is big enough); once per run.
    One rank's view of a run (`Run.rank`) is made in memory, never stored: a stored view is the run's."""
    if folder.only_rank is not None:
        return build(folder)
    key = signature(folder)
    for place in (folder.path / VIEW_DIR, _cache_place(folder)):
        view = _read(place, key, folder.problems)
        if view is not None:
            return view
    view = build(folder)
    if view.events >= STORE_MIN_EVENTS:
        view.stored = write(folder, view, key)
    return view


def stored_api_phases(folder: Run) -> dict[str, list[ApiRow]] | None:
    """The CUDA API split per phase of a current stored view (`cuda_api.phase_summaries` with the default
    warm-up, phases with no call left out), from its manifest alone; None where no view is stored or it
    is stale. Why: at 100 M events the split is the costliest part of a diagnosis (23 s of CPU), and
    the ingest computed it when it stored the view. None for one rank's view of a run (`Run.rank`)."""
    if isinstance(folder, Run) and folder.only_rank is not None:
        return None
    key = signature(folder)
    for place in (folder.path / VIEW_DIR, _cache_place(folder)):
        manifest = _current_manifest(place, key)
        if manifest is None:
            continue
        try:
            return _api_phases(manifest)
        except (KeyError, TypeError, AttributeError):
            continue
    return None


@per_run
def api_phases(run: Run) -> dict[str, list[ApiRow]]:
    """The CUDA API split per phase on the trace's clock (`cuda_api.phase_summaries`), from the stored view
    where one is current and the warm-up is the one it was made with; computed once per run."""
    from analyzers.figures import phases as ph
    from analyzers.summaries.cuda_api import phase_summaries

    stored = stored_api_phases(run) if run.warmup == ph.WARMUP_EPOCHS else None
    if stored is not None:
        return {name: [] for name in ph.PHASES} | stored
    return phase_summaries(run)


def store_if_big(folder: Run) -> Path | None:
    """Writes the view of a run whose tables hold at least `STORE_MIN_EVENTS` rows (read from the Parquet
    footers: a small run costs nothing here); where it went, else None."""
    import pyarrow.parquet as pq

    tables = (t.THREAD_TIMELINE, t.CUDA_API, *GPU_TABLES, t.NVTX)
    rows = sum(pq.read_metadata(folder.table_file(n)).num_rows for n in tables if t.present(folder, n))
    return write(folder) if rows >= STORE_MIN_EVENTS else None


def write(folder: Run, view: RunView | None = None, key: dict[str, Any] | None = None) -> Path | None:
    """Stores the view (built here when not given) in the run folder, or in the cache where the folder is
    read-only; returns where, None where neither could be written."""
    view = view if view is not None else build(folder)
    key = key if key is not None else signature(folder)
    for place in (folder.path / VIEW_DIR, _cache_place(folder)):
        try:
            _write(place, view, key)
        except OSError:
            continue
        return place
    return None


def signature(folder: Run) -> dict[str, Any]:
    """Size and mtime of every file a view is computed from, and the format: a change in any rebuilds it."""
    inputs = [*folder.path.glob("*.parquet"), folder.path / t.TRACE_META, folder.events_path, folder.run_json]
    sampled = schema.THREADS_TABLE.name  # the sampler's thread table, which the thread timeline is made from
    inputs += [folder.sample_parquet_path(sampled), folder.sample_stream_path(sampled)]
    files = {}
    for path in sorted(inputs):
        if path.exists():
            st = path.stat()
            files[str(path.relative_to(folder.path))] = [st.st_size, st.st_mtime_ns]
    return {"format": FORMAT, "files": files}


def _cache_place(folder: Run) -> Path:
    from tracer.core.paths import cache_root

    digest = hashlib.sha256(str(folder.path.resolve()).encode()).hexdigest()[:16]
    return cache_root() / VIEWS_CACHE / f"{folder.path.name}-{digest}"


def _write(place: Path, view: RunView, key: dict[str, Any]) -> None:
    """Into a scratch folder, then renamed into place: a half-written view is never read."""
    scratch = place.with_name(f"{place.name}.tmp-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        saved: dict[int, str] = {}  # an array two records share (a lane set's and its index's lanes) is saved once
        records = {name: _dump(scratch, name, getattr(view.lanes, name), saved) for name in LANE_SETS}
        indexes = {name: _dump(scratch, f"index-{name}", index, saved) for name, index in view.indexes.items()}
        facts = {name: _facts(getattr(view.lanes, name)) for name in LANE_SETS}
        manifest = {
            "key": key,
            "files": _file_stats(scratch),
            "facts": {name: f for name, f in facts.items() if f},
            "lanes": records,
            "indexes": indexes,
            "api_phases": {p: [dataclasses.asdict(r) for r in rows] for p, rows in view.api_phases.items()},
            "kernels": [dataclasses.asdict(k) for k in view.kernels],
            "api_label": view.api_label,
        }
        (scratch / MANIFEST).write_text(json.dumps(manifest))
        old = place.with_name(f"{place.name}.old-{os.getpid()}")
        if place.exists():
            place.rename(old)
        scratch.rename(place)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _current_manifest(place: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest stored at `place` where it was written for `key` (the run's files as they are now);
    None where it is absent, not a regular file, not JSON, or stale."""
    raw = read_bytes(place / MANIFEST)
    if not isinstance(raw, bytes):  # absent, or no regular file (a FIFO would block the viewer)
        return None
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("key") == key else None


def _api_phases(manifest: dict[str, Any]) -> dict[str, list[ApiRow]]:
    return {p: [ApiRow(**r) for r in rows] for p, rows in manifest["api_phases"].items()}


def _read(place: Path, key: dict[str, Any], problems: Problems | None = None) -> RunView | None:
    manifest = _current_manifest(place, key)
    if manifest is None:
        return None
    try:
        lanes = ln.Lanes(*(_undump(place, manifest["lanes"][name], _LANE_TYPES[name]) for name in LANE_SETS))
        indexes = {name: _undump(place, spec, LaneIndex) for name, spec in manifest["indexes"].items()}
        phases = _api_phases(manifest)
        kernels = [KernelRow(**k) for k in manifest["kernels"]]
        api_label = str(manifest["api_label"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # damaged: built again
        return None
    for name, facts in manifest.get("facts", {}).items():  # views stored before facts were: computed when asked
        record = getattr(lanes, name, None)
        if record is not None and isinstance(facts, dict) and set(facts) <= set(FACTS):
            record.__dict__.update({k: tuple(v) if k == "span_ns" else v for k, v in facts.items()})
    unchanged = manifest.get("files") == _file_stats(place)
    why = lanes_problem(lanes, indexes, values=not unchanged)
    if why is not None:
        if problems is not None:
            problems.add(place, why)
        return None
    return RunView(lanes, indexes, phases, kernels, api_label, place)


CODE_LISTS = {
    "lane": "lane_names",
    "code": "names",
    "detail_code": "details",
    "source_code": "sources",
    "name_code": "names",
    "api_code": "apis",
    "kind_code": "kinds",
    "label_code": "labels",
}
"""Each code array of a lane set and the list it indexes (-1: none)."""


def lanes_problem(lanes: ln.Lanes, indexes: dict[str, LaneIndex], values: bool = True) -> str | None:
    """Why stored lanes cannot be drawn: an array of text or of non-finite numbers, arrays of one set
    of unequal lengths, a code outside its list, a link to an item that does not exist; None when sound.
    `values=False` checks only what the arrays' headers say (types and lengths), reading no array."""
    sizes = {}
    for name in LANE_SETS:
        record = getattr(lanes, name)
        if record is None:
            continue
        arrays = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        for key, value in arrays.items():
            if isinstance(value, np.ndarray) and _bad_numbers(value, values):
                return f"{name}.{key} holds {value.dtype} values that are no finite numbers"
        items = arrays.get("start_ns")
        if isinstance(items, np.ndarray):
            sizes[name] = len(items)
            for key, value in arrays.items():
                if isinstance(value, np.ndarray) and not key.startswith("lane_") and len(value) != len(items):
                    return f"{name}.{key} holds {len(value)} values for {len(items)} items"
        for key, listed in CODE_LISTS.items():
            codes, names = arrays.get(key), arrays.get(listed)
            if values and isinstance(codes, np.ndarray) and codes.size and names is not None:
                if int(codes.min()) < -1 or int(codes.max()) >= len(names):
                    return f"{name}.{key} holds codes outside its {len(names)} {listed}"
    links = lanes.links
    if links is not None and values:
        for key, target, own in (("call_of_item", "api_calls", "gpu"), ("item_of_call", "gpu", "api_calls")):
            value = getattr(links, key)
            if len(value) != sizes.get(own, len(value)) or (
                value.size and int(value.max()) >= sizes.get(target, int(value.max()) + 1)
            ):
                return f"links.{key} does not match the lanes it links"
    for name, index in indexes.items():
        for f in dataclasses.fields(index):
            value = getattr(index, f.name)
            if isinstance(value, np.ndarray) and _bad_numbers(value, values):
                return f"index {name}.{f.name} holds {value.dtype} values that are no finite numbers"
    return None


def _bad_numbers(array: np.ndarray, values: bool = True) -> bool:
    if array.dtype.kind in "iub":
        return False
    if array.dtype.kind != "f":
        return True
    return values and not bool(np.isfinite(array).all())


def _facts(record: Any) -> dict[str, Any]:
    """The `FACTS` a lane set has (computed here, once, at write)."""
    return {k: getattr(record, k) for k in FACTS if record is not None and hasattr(type(record), k)}


def _file_stats(place: Path) -> dict[str, list[int]]:
    """Size and mtime of each stored array: the files written (and checked) are the files read."""
    stats = {}
    for path in sorted(place.glob("*.npy")):
        st = path.stat()
        stats[path.name] = [st.st_size, st.st_mtime_ns]
    return stats


_LANE_TYPES: dict[str, type] = {
    "threads": ln.ThreadLanes,
    "api_calls": ln.ApiCalls,
    "gpu": ln.GpuLanes,
    "links": ln.LaunchLinks,
}


def _dump(place: Path, prefix: str, record: Any, saved: dict[int, str]) -> dict[str, Any] | None:
    """A dataclass's arrays as `<prefix>.<field>[.<i>].npy` (`NARROW_FIELDS` narrowed, an array already
    saved under another name referred to), the rest as JSON (tuples marked as such)."""
    if record is None:
        return None
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, np.ndarray):
            out[f.name] = {"array": _save(place, f"{prefix}.{f.name}", value, f.name in NARROW_FIELDS, saved)}
        elif isinstance(value, tuple) and value and isinstance(value[0], np.ndarray):
            out[f.name] = {
                "arrays": [_save(place, f"{prefix}.{f.name}.{i}", a, False, saved) for i, a in enumerate(value)]
            }
        elif isinstance(value, tuple):
            out[f.name] = {"tuple": list(value)}
        else:
            out[f.name] = {"value": value}
    return out


def _save(place: Path, stem: str, array: np.ndarray, narrow: bool, saved: dict[int, str]) -> str:
    if id(array) in saved:
        return saved[id(array)]
    saved[id(array)] = f"{stem}.npy"
    if narrow and array.dtype.kind == "i" and array.size:
        lo, hi = int(array.min()), int(array.max())
        array = array.astype(
            next(d for d in (np.int8, np.int16, np.int32, np.int64) if np.iinfo(d).min <= lo <= hi <= np.iinfo(d).max)
        )
    np.save(place / f"{stem}.npy", array)
    return f"{stem}.npy"


def _undump(place: Path, spec: dict[str, Any] | None, cls: type) -> Any:
    if spec is None:
        return None
    values: dict[str, Any] = {}
    for name, how in spec.items():
        if "array" in how:
            values[name] = _mapped(place / how["array"])
        elif "arrays" in how:
            values[name] = tuple(_mapped(place / file) for file in how["arrays"])
        elif "tuple" in how:
            values[name] = tuple(how["tuple"])
        else:
            values[name] = how["value"]
    return cls(**values)


def _mapped(path: Path) -> np.ndarray:
    """Memory-mapped, read-only; an empty array is read (an empty mapping is an error on Linux). No
    regular file (a FIFO would block the viewer) is a ValueError, as a damaged one is."""
    why = not_regular(path)
    if why is not None:
        raise ValueError(f"{path.name} is {why}")
    try:
        return np.load(path, mmap_mode="r")
    except ValueError:
        return np.load(path)
