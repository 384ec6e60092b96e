"""CUPTI's raw activity buffers (written as they are by `tracer/worker/cupti_trace.py`) into the CUPTI
records the analyzers read (`raw/cupti/records-NNNNN.parquet`, columns `CUPTI_COLUMNS`), after the run.

Vectorised over each buffer, no Python per record: the record chain is found by pointer doubling (every
8-byte slot's successor is the slot plus the size of the kind written there; the slots reachable from 0
are the records), the records are grouped by kind and each group viewed through a NumPy structured
dtype built from the layout declared for the CUPTI version that wrote them (`CUPTI_LAYOUT`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracer.core.schema import (
    CUPTI_BUFFER_GLOB,
    CUPTI_COLUMNS,
    CUPTI_INDEX_FILE,
    CUPTI_KERNEL_NAMES_FILE,
    CUPTI_LAYOUT,
    CUPTI_META_FILE,
    MEMCPY_NAMES,
)

L = CUPTI_LAYOUT
_TYPES = {"kind": pa.string(), "name": pa.string()}
RECORD_SCHEMA = pa.schema([(c, _TYPES.get(c, pa.int64())) for c in CUPTI_COLUMNS])
RECORDS_FILE = "records-%05d.parquet"
RECORDS_GLOB = "records-*.parquet"
KIND_LABELS = {
    L.KIND_RUNTIME: "runtime",
    L.KIND_DRIVER: "driver",
    L.KIND_CONCURRENT_KERNEL: "kernel",
    L.KIND_MEMCPY: "memcpy",
    L.KIND_MEMSET: "memset",
}
MEMSET_NAME = "memset"
UNRESOLVED = "unresolved kernel name 0x"


class DecodeError(ValueError):
    pass


def record_dtype(fields: tuple[tuple[str, str], ...]) -> np.dtype:
    """The structured dtype of a packed record (little-endian, explicit offsets, padded itemsize)."""
    names, formats, offsets, offset = [], [], [], 0
    for name, code in fields:
        names.append(name)
        formats.append(code if code.startswith("V") else "<" + code)
        offsets.append(offset)
        offset += L.field_size(code)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": L.record_size(fields)})


@dataclass(frozen=True)
class Layouts:
    """The record dtypes of one CUPTI version, by activity kind."""

    version: int
    dtypes: dict[int, np.dtype]

    @classmethod
    def of(cls, api_version: int) -> Layouts:
        declared = L.layouts_for(api_version)
        if declared is None:
            raise DecodeError(
                f"no CUPTI record layout declared for CUPTI API version {api_version} "
                f"(known majors: {sorted(L.LAYOUTS)}; add one to tracer/worker/cupti_layout.py)"
            )
        return cls(api_version, {kind: record_dtype(fields) for kind, (_, fields) in declared.items()})


@dataclass(frozen=True)
class Walk:
    """Where a buffer's records start (bytes) and of which kind; `error` says where the walk stopped early."""

    offsets: np.ndarray
    kinds: np.ndarray
    error: str | None


def walk(data: bytes | memoryview, layouts: Layouts) -> Walk:
    """The records of a buffer by pointer doubling over its 8-byte slots: log2(slots) vectorised steps."""
    slots = len(data) // L.RECORD_ALIGNMENT
    if slots == 0:
        return Walk(np.zeros(0, np.int64), np.zeros(0, np.uint32), None)
    kinds_at = np.frombuffer(data, "<u4", count=slots * 2)[::2]
    sizes = np.zeros(max(layouts.dtypes) + 1, np.int32)
    for kind, dtype in layouts.dtypes.items():
        sizes[kind] = dtype.itemsize // L.RECORD_ALIGNMENT
    known = kinds_at < len(sizes)
    step = np.where(known, sizes[np.where(known, kinds_at, 0)], 0)
    here = np.arange(slots, dtype=np.int32)  # a buffer's slots fit 32 bits (CUPTI's buffers are MBs)
    nxt = here + step
    stuck = (step == 0) | (nxt > slots)
    nxt[stuck] = here[stuck]  # the walk stops on a slot it cannot step over
    jump = np.append(nxt, np.int32(slots))  # slot `slots` is the end of the buffer
    reached = np.zeros(slots + 1, bool)
    reached[0] = True
    span = 1
    while span <= slots and not reached[slots]:  # once the end is reached, so is every record before it
        reached[jump[reached]] = True
        jump = jump[jump]
        span *= 2
    starts = np.flatnonzero(reached[:slots])
    error = None
    if not reached[slots]:
        last = starts[-1]
        error = f"record kind {int(kinds_at[last])} at byte {int(last) * L.RECORD_ALIGNMENT}: no layout"
        starts = starts[:-1]
    return Walk(starts.astype(np.int64) * L.RECORD_ALIGNMENT, kinds_at[starts], error)


def records_of_kind(data: bytes | memoryview, offsets: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The records at `offsets`, viewed through `dtype` (one gather of their bytes)."""
    raw = np.frombuffer(data, np.uint8)
    index = offsets[:, None] + np.arange(dtype.itemsize, dtype=np.int64)
    return np.ascontiguousarray(raw[index]).view(dtype).reshape(-1)


@dataclass(frozen=True)
class Meta:
    """What the worker wrote at start and stop that decoding needs."""

    version: int
    pid: int
    runtime_names: dict[int, str]
    driver_names: dict[int, str]
    kernel_names: dict[int, str]

    @classmethod
    def read(cls, cupti_dir: Path) -> Meta:
        try:
            meta = json.loads((cupti_dir / CUPTI_META_FILE).read_text())
        except (OSError, ValueError) as e:
            raise DecodeError(f"{cupti_dir / CUPTI_META_FILE}: unreadable ({e})") from None
        names = meta.get("callback_names", {})
        kernel_names: dict[int, str] = {}
        names_file = cupti_dir / CUPTI_KERNEL_NAMES_FILE
        if names_file.exists():
            try:
                kernel_names = {int(k): v for k, v in json.loads(names_file.read_text()).items()}
            except (ValueError, AttributeError):
                kernel_names = {}
        return cls(
            version=int(meta["cupti_version"]),
            pid=int(meta.get("pid", 0)),
            runtime_names={int(k): v for k, v in names.get("runtime", {}).items()},
            driver_names={int(k): v for k, v in names.get("driver", {}).items()},
            kernel_names=kernel_names,
        )


def _strings(values: list[str]) -> pa.Array:
    """A string array from its buffers: `pa.array` on Python or NumPy values imports pandas (a second of CPU)."""
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    offsets[1:] = np.cumsum([len(e) for e in encoded])
    return pa.Array.from_buffers(
        pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


_ARROW_INTS = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32()}


def _ints(values: np.ndarray, dtype: type = np.int64) -> pa.Array:
    data: np.ndarray = np.ascontiguousarray(values, dtype)
    return pa.Array.from_buffers(_ARROW_INTS[data.dtype], len(data), [None, pa.py_buffer(data)])


def _names(keys: np.ndarray, table: dict[int, str], missing: str) -> pa.Array:
    """Each key's name, looked up once per distinct key."""
    unique, inverse = np.unique(keys, return_inverse=True)
    labels = _strings([table.get(int(k), missing % int(k)) for k in unique])
    return labels.take(_ints(inverse.reshape(-1), np.int32))


def _constant(value: str, n: int) -> pa.Array:
    return _strings([value]).take(_ints(np.zeros(n, np.int32), np.int32))


def _column_table(n: int, kind: str, name: pa.Array, recs: np.ndarray, extra: dict[str, Any]) -> pa.Table:
    cols: dict[str, Any] = {
        "kind": _constant(kind, n),
        "name": name,
        "start_ns": _ints(recs["start"]),
        "end_ns": _ints(recs["end"]),
        "correlation_id": _ints(recs["correlation_id"]),
    }
    cols.update(extra)
    arrays = [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in RECORD_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=RECORD_SCHEMA)


def buffer_table(data: bytes | memoryview, layouts: Layouts, meta: Meta) -> tuple[pa.Table, Walk]:
    """One buffer's records as a CUPTI records table (API calls, kernels, copies, sets, in that order)."""
    found = walk(data, layouts)
    parts = []
    for kind in L.ENABLED_KINDS:
        offsets = found.offsets[found.kinds == kind]
        if len(offsets) == 0:
            continue
        recs = records_of_kind(data, offsets, layouts.dtypes[kind])
        n = len(recs)
        pid = _ints(np.full(n, meta.pid, np.int64))
        if kind in (L.KIND_RUNTIME, L.KIND_DRIVER):
            table = meta.runtime_names if kind == L.KIND_RUNTIME else meta.driver_names
            name = _names(recs["cbid"], table, "cbid_%d")
            extra = {"pid": _ints(recs["process_id"]), "tid": _ints(recs["thread_id"])}
        elif kind == L.KIND_CONCURRENT_KERNEL:
            name = _names(recs["name"], meta.kernel_names, UNRESOLVED + "%x")
            extra = {"pid": pid, "device": _ints(recs["device_id"]), "stream": _ints(recs["stream_id"])}
        else:
            if kind == L.KIND_MEMCPY:
                name = _names(recs["copy_kind"], MEMCPY_NAMES, "copy kind %d")
            else:
                name = _constant(MEMSET_NAME, n)
            extra = {
                "pid": pid,
                "device": _ints(recs["device_id"]),
                "stream": _ints(recs["stream_id"]),
                "bytes": _ints(recs["bytes"]),
            }
        parts.append(_column_table(n, KIND_LABELS[kind], name, recs, extra))
    if not parts:
        return pa.Table.from_batches([], schema=RECORD_SCHEMA), found
    return pa.concat_tables(parts), found


@dataclass(frozen=True)
class IndexEntry:
    file: str | None
    valid_bytes: int
    dropped: int


def read_index(cupti_dir: Path) -> list[IndexEntry]:
    """The index lines (a line cut short by a crash is skipped), plus any buffer file the index lacks
    (the worker died between the rename and the index line): valid bytes = its size."""
    entries: list[IndexEntry] = []
    index = cupti_dir / CUPTI_INDEX_FILE
    if index.exists():
        for line in index.read_text().splitlines():
            try:
                d = json.loads(line)
                entries.append(IndexEntry(d.get("file"), int(d.get("valid_bytes", 0)), int(d.get("dropped", 0))))
            except (ValueError, TypeError, AttributeError):
                continue
    listed = {e.file for e in entries}
    for path in sorted(cupti_dir.glob(CUPTI_BUFFER_GLOB)):
        if path.name not in listed:
            entries.append(IndexEntry(path.name, path.stat().st_size, 0))
    return entries


@dataclass
class Converted:
    """What converting a run's buffers gave: the records files, totals, and what went wrong."""

    paths: list[Path] = field(default_factory=list)
    records: int = 0
    dropped: int = 0
    unresolved_kernels: int = 0
    errors: list[str] = field(default_factory=list)


def convert(cupti_dir: Path, remove_buffers: bool = True) -> Converted:
    """Every buffer of `cupti_dir` into `records-NNNNN.parquet` (same number); the buffer is removed once
    its records are in place, unless told otherwise. Half-written `.tmp` files of a crash are dropped."""
    out = Converted()
    for tmp in cupti_dir.glob(CUPTI_BUFFER_GLOB + ".tmp"):
        tmp.unlink()
    entries = read_index(cupti_dir)
    out.dropped = sum(e.dropped for e in entries)
    if not any(e.file for e in entries):
        return out
    meta = Meta.read(cupti_dir)
    layouts = Layouts.of(meta.version)
    for entry in entries:
        if not entry.file:
            continue
        path = cupti_dir / entry.file
        if not path.exists():
            out.errors.append(f"{entry.file}: listed in the index but missing")
            continue
        data = path.read_bytes()[: entry.valid_bytes]
        table, found = buffer_table(data, layouts, meta)
        if found.error:
            out.errors.append(f"{entry.file}: {found.error}")
        number = int(path.stem.split("-")[-1])
        target = cupti_dir / (RECORDS_FILE % number)
        tmp = target.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, target)
        out.paths.append(target)
        out.records += table.num_rows
        out.unresolved_kernels += pc.sum(pc.starts_with(table["name"], UNRESOLVED)).as_py() or 0
        if remove_buffers:
            path.unlink()
    return out
