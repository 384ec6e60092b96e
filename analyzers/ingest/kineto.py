"""Kineto (PyTorch profiler) Chrome-trace JSON, plain or gzipped, read in bounded chunks.

Why chunks: traces of long runs reach gigabytes; `json.load` would hold every event as Python
objects at once. `analyzers.ingest.trace_events` decodes the events array a megabyte at a time into
typed msgspec records and only the CUDA rows are kept, in compact columns. Times are Decimal so µs
with 3 decimals become exact ns.
Both category spellings are understood: 2021 (`Runtime`, `Kernel`, `Memcpy`, `Memset`) and current
(`cuda_runtime`, `cuda_driver`, `kernel`, `gpu_memcpy`, `gpu_memset`); `user_annotation` ranges
become NVTX-like ranges (PyTorch's `record_function`); `cpu_op` events (aten::conv2d, autograd's
ConvolutionBackward0 ...) become the `operators` table (`analyzers.summaries.operators` summarises it).
"""

from __future__ import annotations

import functools
import gzip
import re
import zlib
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from analyzers.ingest.trace_events import Args, Event, TraceEvents, TraceFormatError
from analyzers.trace import arrow_build as build
from analyzers.trace import tables as t
from analyzers.trace.clock import Clock, kineto_clock
from tracer.core.errors import UserError

RUNTIME_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver"}
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
RANGE_CATS = {"user_annotation"}
OPERATOR_CATS = {"cpu_op", "Operator", "operator"}  # current and 2021 spellings (paddle.profiler's too; MXNet's)
_CALL_TIME = re.compile(r"\[\d+(?:\.\d+)? (?:ns|us|ms|s)\]$")
"""paddle.profiler ends each operator's name with its own duration (`conv2d dygraph[31.950 us]`)."""


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


MAX_NS = 2**63 - 1  # the tables' int64
_THOUSAND = Decimal(1000)


def _ns(value: Decimal | None) -> int:
    """µs to integer ns, exact for the exporter's 3 decimals (more are rounded half to even); a time
    that is missing, negative or does not fit the tables' int64 is refused (ValueError)."""
    if value is None:
        raise ValueError("a complete event has no ts")
    ns = int((value * _THOUSAND).to_integral_value())
    if not 0 <= ns <= MAX_NS:
        raise ValueError(f"time {value} µs is out of range")
    return ns


def _dur_ns(ev: Event) -> int:
    """A complete ('X') event without `dur`, or with a negative one, is a broken trace, not a zero."""
    if ev.dur is None:
        raise ValueError(f"'{ev.name}' has no dur")
    return _ns(ev.dur)


def _pid_tid(ev: Event) -> tuple[int, int]:
    pid, tid = ev.pid, ev.tid
    if type(pid) is int and type(tid) is int and -MAX_NS <= tid <= MAX_NS:
        return pid, tid
    return _int(pid), _int(tid) & MAX_NS  # MXNet's thread ids are unsigned 64-bit hashes: one bit goes


def _dims(value: Any) -> list[Any]:
    """A kernel's `grid` or `block`: three numbers, or none at all."""
    if not value:
        return [None] * 3
    if not isinstance(value, list) or len(value) != 3:
        raise ValueError(f"a kernel's grid or block {value!r} is not 3 numbers")
    return value


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class _Columns:
    """Kept rows of one table: Python tuples for the last few thousand rows, Arrow arrays before them,
    so a long trace never sits in memory as Python objects (peak memory is the goal here). Strings are
    kept as int32 codes into one dictionary per column (a trace repeats a few thousand names), made
    plain strings only in `table`. Arrays are built from raw buffers (`analyzers.trace.arrow_build`): no
    pandas probe."""

    BATCH_ROWS = 8192

    def __init__(
        self, names: list[str], schema: pa.Schema, aliases: dict[str, str] | None = None, source: str = t.SOURCE_KINETO
    ) -> None:
        self.schema = schema
        self.source = source
        self.names = names
        self.aliases = aliases or {}
        """Columns of the table that equal another (name: the column it repeats)."""
        self.types = [schema.field(n).type if n in schema.names else pa.int64() for n in names]
        self.codes: dict[int, dict[str, int]] = {i: {} for i, typ in enumerate(self.types) if typ == pa.string()}
        self.rows: list[tuple[Any, ...]] = []
        self.parts: list[list[pa.Array]] = []

    def add(self, *values: Any) -> None:
        """One row, values in the order of `names`."""
        self.rows.append(values)
        if len(self.rows) >= self.BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        arrays = []
        for i, col in enumerate(zip(*self.rows)):
            codes = self.codes.get(i)
            if codes is None:
                arrays.append(build.ints(col, self.types[i]))
            else:
                arrays.append(build.ints([codes.setdefault(v, len(codes)) for v in col], pa.int32()))
        self.parts.append(arrays)
        self.rows = []

    def table(self, offset_ns: int) -> pa.Table:
        self._flush()
        schema = self.schema
        if not self.parts:
            return t.empty(schema)
        words = {i: build.strings(list(codes)) for i, codes in self.codes.items()}
        raw = pa.Table.from_batches([pa.RecordBatch.from_arrays(part, names=self.names) for part in self.parts])
        self.parts = []
        # by start, the longer first at one start (a parent before the child it opens with), whatever order
        # the trace had them in; Table.sort_by probes for pandas
        length = "dur_ns" if "dur_ns" in self.names else "end_ns"
        keys = [("start_ns", "ascending"), (length, "descending")]
        keys += [(SEQUENCE, "ascending")] if SEQUENCE in self.names else []  # equal spans: the one made first
        raw = raw.take(pc.sort_indices(raw, sort_keys=keys))
        # Strings are made from their codes only now, after the sort: each is built once, never copied.
        cols: dict[str, Any] = {
            k: pc.take(words[i], raw[k]) if i in words else raw[k] for i, k in enumerate(self.names)
        }
        n = raw.num_rows
        offset = build.int_scalar(offset_ns)
        # checked: a time past int64 is refused (ArrowInvalid), never wrapped to a negative one
        start = cols["start_ns"] = pc.add_checked(raw["start_ns"], offset)
        if "dur_ns" in schema.names:
            cols["end_ns"] = pc.add_checked(start, raw["dur_ns"])
        else:
            cols["end_ns"] = pc.add_checked(raw["end_ns"], offset)
        cols["source"] = build.repeated(self.source, n)
        for alias, column in self.aliases.items():
            cols[alias] = cols[column]  # the same buffers, not a copy
        arrays = [cols[k] if k in cols else pa.nulls(n, schema.field(k).type) for k in schema.names]
        return pa.Table.from_arrays(arrays, schema=schema)


SEQUENCE = "sequence"
"""A column kept only to order rows: an operator's `External id` (Kineto numbers ops as it creates them, so
of two ops with the same start and end, the enclosing one has the smaller number)."""

BATCH_OPS = ("aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution")
"""Operators whose first input is the NCHW image batch: its N is the batch size (with record_shapes)."""


def _batch_of(ev: Event) -> int | None:
    """N of an NCHW first input in a recorded operator's `Input Dims`, else None."""
    dims = ev.args.input_dims if ev.args is not None else None
    if isinstance(dims, list) and dims and isinstance(dims[0], list) and len(dims[0]) == 4:
        n = dims[0][0]
        return n if type(n) is int and n > 0 else None
    return None


def read_json(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The CUDA tables of a Kineto trace; UserError (one line) for anything that is not one."""
    tables, clock, _batch = parse(path)
    return tables, clock


def parse(path: Path) -> tuple[dict[str, pa.Table], Clock, int | None]:
    """`read_json`'s tables and clock, and the batch size where the trace recorded shapes (the first
    convolution's input: PyTorch's profiler writes it with `record_shapes=True`), else None."""
    tables, clock, batch, _header = parse_with_header(path)
    return tables, clock, batch


def parse_with_header(path: Path) -> tuple[dict[str, pa.Table], Clock, int | None, dict[str, Any]]:
    """`parse`, and the trace's top-level keys besides its events (`distributedInfo`: the rank and
    world size of a data-parallel job; `deviceProperties`: its GPUs)."""
    api = _Columns(
        ["start_ns", "dur_ns", "name", "api", "kind", "pid", "tid", "thread_name", "correlation_id"],
        t.CUDA_API_SCHEMA,
    )
    kern = _Columns(
        ["start_ns", "dur_ns", "name", "device", "stream", "correlation_id", "pid"]
        + ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"],
        t.KERNELS_SCHEMA,
        aliases={"short_name": "name"},  # Kineto records one kernel name
    )
    mem = _Columns(["start_ns", "dur_ns", "kind", "bytes", "device", "stream", "correlation_id"], t.MEMCPY_SCHEMA)
    ranges = _Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.NVTX_SCHEMA)
    ops = _Columns(["start_ns", "end_ns", "name", "pid", "tid", SEQUENCE], t.OPERATORS_SCHEMA)
    seen = 0
    batch: int | None = None
    shown = functools.cache(t.api_display_name)  # a trace repeats a few dozen API names
    no_args = Args()
    begin_end: list[tuple[int, bool, str, int, int]] = []
    try:
        with _open(path) as raw:
            events = TraceEvents(raw)
            for chunk in events:
                for ev in chunk:
                    seen += 1
                    if ev.ph != "X":
                        if ev.ph in BEGIN_END and ev.cat in OPERATOR_CATS:  # MXNet's operators: B/E pairs
                            begin_end.append((_ns(ev.ts), ev.ph == "B", str(ev.name), *_pid_tid(ev)))
                        continue
                    cat = ev.cat
                    if cat in OPERATOR_CATS:  # the most frequent kept kind first (about half the rows)
                        start = _ns(ev.ts)
                        name = _CALL_TIME.sub("", str(ev.name))
                        op_args = ev.args or no_args
                        number = op_args.external_id if op_args.external_id is not None else op_args.external_id_2021
                        ops.add(
                            start, start + (0 if ev.dur is None else _ns(ev.dur)), name, *_pid_tid(ev), _int(number)
                        )
                        if batch is None and name in BATCH_OPS:
                            batch = _batch_of(ev)
                        continue
                    args = ev.args or no_args
                    if cat in RUNTIME_CATS:
                        name = str(ev.name)
                        api.add(
                            _ns(ev.ts),
                            _dur_ns(ev),
                            name,
                            shown(name),
                            RUNTIME_CATS[cat],
                            *_pid_tid(ev),
                            "",
                            _int(args.correlation),
                        )
                    elif cat in KERNEL_CATS:
                        grid = _dims(args.grid)
                        block = _dims(args.block)
                        name = str(ev.name)
                        kern.add(
                            _ns(ev.ts),
                            _dur_ns(ev),
                            name,
                            _int(args.device, 0),
                            _int(args.stream),
                            _int(args.correlation),
                            _int(ev.pid),
                            _int(grid[0]),
                            _int(grid[1]),
                            _int(grid[2]),
                            _int(block[0]),
                            _int(block[1]),
                            _int(block[2]),
                        )
                    elif cat in MEMCPY_CATS or cat in MEMSET_CATS:
                        mem.add(
                            _ns(ev.ts),
                            _dur_ns(ev),
                            t.MEMSET_KIND if cat in MEMSET_CATS else t.kineto_memcpy_kind(str(ev.name)),
                            _int(args.bytes, 0),
                            _int(args.device, 0),
                            _int(args.stream),
                            _int(args.correlation),
                        )
                    elif cat in RANGE_CATS:
                        start = _ns(ev.ts)
                        ranges.add(start, start + _dur_ns(ev), str(ev.name), *_pid_tid(ev))
    except TraceFormatError as e:
        raise UserError(f"{path}: not a Chrome/Kineto trace ({_first_line(e)})") from None
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: cannot read ({_first_line(e)}); truncated or corrupt gzip?") from None
    except OverflowError as e:
        raise UserError(f"{path}: a number in a trace event does not fit 64 bits ({_first_line(e)})") from None
    except RecursionError:
        raise UserError(f"{path}: a trace event's values are nested too deeply to read") from None
    except (TypeError, ArithmeticError, ValueError) as e:
        raise UserError(f"{path}: a trace event lacks a usable field ({_first_line(e)})") from None
    for start, end, name, pid, tid in _paired(begin_end):
        ops.add(start, end, name, pid, tid, -1)
    if seen == 0:
        raise UserError(f"{path}: the trace holds no events (its traceEvents array is empty): nothing to import")
    writer = _writer(events.header, mxnet=bool(begin_end))
    for columns in (api, kern, mem, ranges, ops):
        columns.source = writer
    base = events.header.get("baseTimeNanoseconds")
    if base is not None and (type(base) is not int or not 0 <= base <= MAX_NS):
        raise UserError(f"{path}: baseTimeNanoseconds {base!r} is not a time from 0 to 2^63-1 ns")
    clock = kineto_clock(base)
    try:
        out = {
            t.CUDA_API: api.table(clock.offset_ns),
            t.KERNELS: kern.table(clock.offset_ns),
            t.MEMCPY: mem.table(clock.offset_ns),
            t.NVTX: ranges.table(clock.offset_ns),
            t.OPERATORS: ops.table(clock.offset_ns),
        }
    except (OverflowError, pa.ArrowInvalid) as e:
        raise UserError(
            f"{path}: times or numbers beyond 64 bits (baseTimeNanoseconds {base}; {_first_line(e)})"
        ) from None
    return {k: v for k, v in out.items() if v.num_rows}, clock, batch, events.header


BEGIN_END = ("B", "E")
PADDLE_HEADER = "span_index"
"""A top-level key only paddle.profiler's Chrome-trace JSON has."""


def _writer(header: dict[str, Any], mxnet: bool) -> str:
    """Which profiler wrote a Chrome-trace JSON, for the rows' `source`: paddle.profiler (its header),
    MXNet's profiler (operators as B/E pairs), else the PyTorch profiler (Kineto)."""
    if PADDLE_HEADER in header:
        return t.SOURCE_PADDLE
    return t.SOURCE_MXNET if mxnet else t.SOURCE_KINETO


def _paired(marks: list[tuple[int, bool, str, int, int]]) -> list[tuple[int, int, str, int, int]]:
    """(start, end, name, pid, tid) of duration events written as `B`/`E` pairs (MXNet's profiler), paired
    per thread in time order (an `E` closes the innermost open `B`); one never closed is left out."""
    open_: dict[tuple[int, int], list[tuple[int, str]]] = {}
    out = []
    for ts, begins, name, pid, tid in sorted(marks, key=lambda m: (m[3], m[4], m[0], m[1])):
        stack = open_.setdefault((pid, tid), [])
        if begins:
            stack.append((ts, name))
        elif stack:
            start, begun = stack.pop()
            out.append((start, ts, begun, pid, tid))
    return out


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]
