"""Kineto (PyTorch profiler) Chrome-trace JSON, plain or gzipped, streamed event by event.

Why streamed: traces of long runs reach gigabytes; `json.load` would hold every event as Python
objects at once. ijson's C backend yields one event at a time and only the CUDA rows are kept, in
compact column lists. Numbers are read as Decimal so µs with 3 decimals become exact ns.
Both category spellings are understood: 2021 (`Runtime`, `Kernel`, `Memcpy`, `Memset`) and current
(`cuda_runtime`, `cuda_driver`, `kernel`, `gpu_memcpy`, `gpu_memset`); `user_annotation` ranges
become NVTX-like ranges (PyTorch's `record_function`); `cpu_op` events (aten::conv2d, autograd's
ConvolutionBackward0 ...) become the `operators` table (`analyzers.operators` summarises it).
"""

from __future__ import annotations

import gzip
import re
import zlib
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import ijson
import pyarrow as pa
import pyarrow.compute as pc

from analyzers import tables as t
from analyzers.clock import Clock, kineto_clock
from tracer.core.errors import UserError

RUNTIME_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver"}
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
RANGE_CATS = {"user_annotation"}
OPERATOR_CATS = {"cpu_op", "Operator"}  # current and 2021 spellings
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
TAIL_BYTES = 1 << 16


class _TailKeeper:
    """A read-only file wrapper that remembers the first and last bytes read, where Kineto puts its
    header fields (`baseTimeNanoseconds` may come before or after `traceEvents`)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.head = b""
        self.tail = b""

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        if len(self.head) < TAIL_BYTES:
            self.head += data[: TAIL_BYTES - len(self.head)]
        self.tail = (self.tail + data)[-TAIL_BYTES:]
        return data


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


MAX_NS = 2**63 - 1  # the tables' int64


def _ns(value: Any) -> int:
    """µs (Decimal from ijson, or int) to integer ns, rounding half away from zero like the exporter;
    a time that is negative or does not fit the tables' int64 is refused (ValueError)."""
    ns = int((Decimal(value) * 1000).to_integral_value())
    if not 0 <= ns <= MAX_NS:
        raise ValueError(f"time {value} µs is out of range")
    return ns


def _dur_ns(ev: dict[str, Any]) -> int:
    """A complete ('X') event without `dur`, or with a negative one, is a broken trace, not a zero."""
    if "dur" not in ev:
        raise ValueError(f"'{ev.get('name', '?')}' has no dur")
    return _ns(ev["dur"])


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class _Columns:
    """Kept rows of one table: Python lists for the last few thousand rows, Arrow batches before them,
    so a long trace never sits in memory as Python objects (peak memory is the goal here)."""

    BATCH_ROWS = 8192

    def __init__(self, names: list[str], schema: pa.Schema) -> None:
        self.schema = schema
        self.types = {n: (schema.field(n).type if n in schema.names else pa.int64()) for n in names}
        self.cols: dict[str, list[Any]] = {n: [] for n in names}
        self.batches: list[pa.RecordBatch] = []

    def add(self, **values: Any) -> None:
        for k, v in values.items():
            self.cols[k].append(v)
        if len(self.cols["start_ns"]) >= self.BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.cols["start_ns"]:
            arrays = [pa.array(v, type=self.types[k]) for k, v in self.cols.items()]
            self.batches.append(pa.RecordBatch.from_arrays(arrays, names=list(self.cols)))
            for v in self.cols.values():
                v.clear()

    def table(self, offset_ns: int) -> pa.Table:
        self._flush()
        schema = self.schema
        if not self.batches:
            return t.empty(schema)
        raw = pa.Table.from_batches(self.batches)
        self.batches = []
        n = raw.num_rows
        start = pc.add(raw["start_ns"], offset_ns)
        cols: dict[str, Any] = {k: raw[k] for k in raw.column_names}
        cols["start_ns"] = start
        if "dur_ns" in schema.names:
            cols["end_ns"] = pc.add(start, raw["dur_ns"])
        else:
            cols["end_ns"] = pc.add(raw["end_ns"], offset_ns)
        cols["source"] = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int8()), ["kineto"]).cast(pa.string())
        arrays = [cols[k] if k in cols else pa.nulls(n, schema.field(k).type) for k in schema.names]
        return pa.table(arrays, schema=schema).sort_by("start_ns")


def read_json(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The CUDA tables of a Kineto trace; UserError (one line) for anything that is not one."""
    api = _Columns(
        ["start_ns", "dur_ns", "name", "api", "kind", "pid", "tid", "thread_name", "correlation_id"],
        t.CUDA_API_SCHEMA,
    )
    kern = _Columns(
        ["start_ns", "dur_ns", "name", "short_name", "device", "stream", "correlation_id", "pid"]
        + ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"],
        t.KERNELS_SCHEMA,
    )
    mem = _Columns(["start_ns", "dur_ns", "kind", "bytes", "device", "stream", "correlation_id"], t.MEMCPY_SCHEMA)
    ranges = _Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.NVTX_SCHEMA)
    ops = _Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.OPERATORS_SCHEMA)
    seen = 0
    try:
        with _open(path) as raw:
            f = _TailKeeper(raw)
            for ev in ijson.items(f, "traceEvents.item", use_float=False):
                seen += 1
                if not isinstance(ev, dict) or ev.get("ph") != "X":
                    continue
                cat = ev.get("cat")
                args = ev.get("args") or {}
                if cat in RUNTIME_CATS:
                    name = str(ev.get("name", ""))
                    api.add(
                        start_ns=_ns(ev["ts"]),
                        dur_ns=_dur_ns(ev),
                        name=name,
                        api=t.api_display_name(name),
                        kind=RUNTIME_CATS[cat],
                        pid=_int(ev.get("pid")),
                        tid=_int(ev.get("tid")),
                        thread_name="",
                        correlation_id=_int(args.get("correlation")),
                    )
                elif cat in KERNEL_CATS:
                    grid = list(args.get("grid") or [None] * 3)
                    block = list(args.get("block") or [None] * 3)
                    name = str(ev.get("name", ""))
                    kern.add(
                        start_ns=_ns(ev["ts"]),
                        dur_ns=_dur_ns(ev),
                        name=name,
                        short_name=name,
                        device=_int(args.get("device"), 0),
                        stream=_int(args.get("stream")),
                        correlation_id=_int(args.get("correlation")),
                        pid=_int(ev.get("pid")),
                        grid_x=_int(grid[0]),
                        grid_y=_int(grid[1]),
                        grid_z=_int(grid[2]),
                        block_x=_int(block[0]),
                        block_y=_int(block[1]),
                        block_z=_int(block[2]),
                    )
                elif cat in MEMCPY_CATS or cat in MEMSET_CATS:
                    mem.add(
                        start_ns=_ns(ev["ts"]),
                        dur_ns=_dur_ns(ev),
                        kind=t.MEMSET_KIND if cat in MEMSET_CATS else t.kineto_memcpy_kind(str(ev.get("name", ""))),
                        bytes=_int(args.get("bytes"), 0),
                        device=_int(args.get("device"), 0),
                        stream=_int(args.get("stream")),
                        correlation_id=_int(args.get("correlation")),
                    )
                elif cat in OPERATOR_CATS:
                    start = _ns(ev["ts"])
                    ops.add(
                        start_ns=start,
                        end_ns=start + _ns(ev.get("dur", 0)),
                        name=str(ev.get("name", "")),
                        pid=_int(ev.get("pid")),
                        tid=_int(ev.get("tid")),
                    )
                elif cat in RANGE_CATS:
                    start = _ns(ev["ts"])
                    ranges.add(
                        start_ns=start,
                        end_ns=start + _dur_ns(ev),
                        name=str(ev.get("name", "")),
                        pid=_int(ev.get("pid")),
                        tid=_int(ev.get("tid")),
                    )
    except (ijson.JSONError, ijson.IncompleteJSONError) as e:
        raise UserError(f"{path}: not valid JSON or truncated ({_first_line(e)})") from None
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: cannot read ({_first_line(e)}); truncated or corrupt gzip?") from None
    except (KeyError, TypeError, ArithmeticError, ValueError) as e:
        raise UserError(f"{path}: a trace event lacks a usable field ({_first_line(e)})") from None
    if seen == 0:
        raise UserError(f"{path}: not a Chrome/Kineto trace (no traceEvents)")
    m = _BASE_TIME.search(f.head) or _BASE_TIME.search(f.tail)
    clock = kineto_clock(int(m.group(1)) if m else None)
    out = {
        t.CUDA_API: api.table(clock.offset_ns),
        t.KERNELS: kern.table(clock.offset_ns),
        t.MEMCPY: mem.table(clock.offset_ns),
        t.NVTX: ranges.table(clock.offset_ns),
        t.OPERATORS: ops.table(clock.offset_ns),
    }
    return {k: v for k, v in out.items() if v.num_rows}, clock


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]
