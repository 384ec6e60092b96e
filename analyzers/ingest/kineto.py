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
import logging
import re
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analyzers.ingest.chrome_columns import MAX_NS, SEQUENCE, Columns, as_int, first_line, ns, open_trace
from analyzers.ingest.trace_events import (
    ARROW_ARGS,
    PID_TEXT,
    TID_TEXT,
    Args,
    Event,
    TraceEvents,
    TraceFormatError,
    arrow_piece,
    decode_piece,
)
from analyzers.trace import collectives
from analyzers.trace import tables as t
from analyzers.trace.clock import Clock, kineto_clock
from tracer.core import arrow_build as build
from tracer.core.errors import UserError
from tracer.core.memory import give_back_freed_memory

RUNTIME_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver"}
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
RANGE_CATS = {"user_annotation"}
OPERATOR_CATS = {"cpu_op", "Operator", "operator"}  # current and 2021 spellings (paddle.profiler's too; MXNet's)
_CALL_TIME = re.compile(r"\[\d+(?:\.\d+)? (?:ns|us|ms|s)\]$")
"""paddle.profiler ends each operator's name with its own duration (`conv2d dygraph[31.950 us]`)."""


log = logging.getLogger(__name__)


def _dur_ns(ev: Event) -> int:
    """A complete ('X') event without `dur`, or with a negative one, is a broken trace, not a zero."""
    if ev.dur is None:
        raise ValueError(f"'{ev.name}' has no dur")
    return ns(ev.dur)


def _pid_tid(ev: Event) -> tuple[int, int]:
    pid, tid = ev.pid, ev.tid
    if type(pid) is int and type(tid) is int and -MAX_NS <= tid <= MAX_NS:
        return pid, tid
    return as_int(pid), as_int(tid) & MAX_NS  # MXNet's thread ids are unsigned 64-bit hashes: one bit goes


def _dims(value: Any) -> list[Any]:
    """A kernel's `grid` or `block`: three numbers, or none at all."""
    if not value:
        return [None] * 3
    if not isinstance(value, list) or len(value) != 3:
        raise ValueError(f"a kernel's grid or block {value!r} is not 3 numbers")
    return value


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
    reader = _Reader()
    try:
        with open_trace(path) as raw, ThreadPoolExecutor(READERS, thread_name_prefix="kineto-json") as pool:
            events = TraceEvents(raw, _decode, ARROW_CHUNK_BYTES, pool, depth=READERS)
            for n, chunk in enumerate(events, 1):
                big = isinstance(chunk, _Piece) and len(chunk.raw) > TRIM_PIECE_BYTES
                if big or n % TRIM_EVERY_PIECES == 0:
                    give_back_freed_memory()
                if isinstance(chunk, _Piece):
                    if reader.piece(chunk.events, chunk.raw):
                        continue
                    log.debug("%s: a piece of %d bytes read event by event", path, len(chunk.raw))
                    decoded = decode_piece(chunk.raw)
                    if decoded is None:  # Arrow read the piece, so it closes: not reached
                        raise TraceFormatError("an event does not close")
                    chunk = decoded
                for ev in chunk:
                    reader.event(ev)
    except TraceFormatError as e:
        raise UserError(f"{path}: not a Chrome/Kineto trace ({first_line(e)})") from None
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: cannot read ({first_line(e)}); truncated or corrupt gzip?") from None
    except OverflowError as e:
        raise UserError(f"{path}: a number in a trace event does not fit 64 bits ({first_line(e)})") from None
    except RecursionError:
        raise UserError(f"{path}: a trace event's values are nested too deeply to read") from None
    except (TypeError, ArithmeticError, ValueError) as e:
        raise UserError(f"{path}: a trace event lacks a usable field ({first_line(e)})") from None
    api, kern, mem, ranges, ops = reader.api, reader.kern, reader.mem, reader.ranges, reader.ops
    for start, end, name, pid, tid in _paired(reader.begin_end):
        ops.add(start, end, name, pid, tid, -1)
    if reader.seen == 0:
        raise UserError(f"{path}: the trace holds no events (its traceEvents array is empty): nothing to import")
    writer = _writer(events.header, mxnet=bool(reader.begin_end))
    for columns in (api, kern, mem, ranges, ops):
        columns.source = writer
    base = events.header.get("baseTimeNanoseconds")
    if base is not None and (type(base) is not int or not 0 <= base <= MAX_NS):
        raise UserError(f"{path}: baseTimeNanoseconds {base!r} is not a time from 0 to 2^63-1 ns")
    clock = kineto_clock(base)
    try:
        out = {}
        for name, columns in (
            (t.CUDA_API, api),
            (t.KERNELS, kern),
            (t.MEMCPY, mem),
            (t.NVTX, ranges),
            (t.OPERATORS, ops),
        ):
            give_back_freed_memory()  # the pieces' buffers, then each table's sort
            out[name] = columns.table(clock.offset_ns)
        out[collectives.COMM_OPS] = reader.comm_table(clock.offset_ns, writer)
    except (OverflowError, pa.ArrowInvalid) as e:
        raise UserError(
            f"{path}: times or numbers beyond 64 bits (baseTimeNanoseconds {base}; {first_line(e)})"
        ) from None
    return {k: v for k, v in out.items() if v.num_rows}, clock, reader.batch, events.header


ARROW_CHUNK_BYTES = 1 << 20
"""The bytes of JSON handed to the Arrow reader at once: large enough that its per-call cost is small (2 MiB
pieces read no faster and held 24 MiB more at the peak of the 167 MB trace, 28 Nov 2026)."""
TRIM_EVERY_PIECES = 16
"""Freed memory is given back to the OS every this many pieces (`tracer.core.memory`): 9 MiB off the peak of
the 167 MB trace for 20 ms of CPU."""
TRIM_PIECE_BYTES = 8 << 20
"""A piece this large (an event with a name of many MiB) gives freed memory back at once."""
READERS = 3
"""Pieces read by Arrow at once, in threads of their own (its reader releases the GIL), while this
thread makes the previous one into columns. Three on two cores: with another process busy on one, a third
reading thread keeps the import's share of the cores (`tracer import` of the 167 MB trace with one CPU hog:
94-116 MB/s with three, 86-102 MB/s with two, alternated; idle 123-125 against 132-137; 4 MiB more at
the peak; AMD EPYC VM, 28 Nov 2026)."""


@dataclass(frozen=True)
class _Piece:
    """A piece of the events array read by Arrow, with its bytes in case it must be read event by event."""

    raw: bytes
    events: pa.StructArray


def _decode(piece: bytes) -> _Piece | list[Event] | None:
    """Arrow's reader first; where it refuses the piece, msgspec's (which says what is wrong, or None for a
    wrong cut)."""
    events = arrow_piece(piece)
    if events is not None:
        return _Piece(piece, events)
    log.debug("a piece of %d bytes refused by Arrow's reader: read event by event", len(piece))
    return decode_piece(piece)


class _Reader:
    """The kept rows of one trace, from events one at a time (`event`) or from whole pieces read by Arrow
    (`piece`): the same rows either way, in the same order."""

    def __init__(self) -> None:
        self.api = Columns(
            ["start_ns", "dur_ns", "name", "api", "kind", "pid", "tid", "thread_name", "correlation_id"],
            t.CUDA_API_SCHEMA,
        )
        self.kern = Columns(
            ["start_ns", "dur_ns", "name", "device", "stream", "correlation_id", "pid"]
            + ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"],
            t.KERNELS_SCHEMA,
            aliases={"short_name": "name"},  # Kineto records one kernel name
        )
        self.mem = Columns(
            ["start_ns", "dur_ns", "kind", "bytes", "device", "stream", "correlation_id"], t.MEMCPY_SCHEMA
        )
        self.ranges = Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.NVTX_SCHEMA)
        self.ops = Columns(["start_ns", "end_ns", "name", "pid", "tid", SEQUENCE], t.OPERATORS_SCHEMA)
        self.comm: list[tuple[int, int, str, int, int, int]] = []  # host collectives with their payload (-1: unknown)
        self.param_comms: list[tuple[int, int, int, int, int]] = []  # record_param_comms: start, end, pid, tid, bytes
        self.seen = 0
        self.batch: int | None = None
        self.begin_end: list[tuple[int, bool, str, int, int]] = []

    def event(self, ev: Event) -> None:
        """One event decoded by msgspec."""
        self.seen += 1
        if ev.ph != "X":
            if ev.ph in BEGIN_END and ev.cat in OPERATOR_CATS:  # MXNet's operators: B/E pairs
                self.begin_end.append((ns(ev.ts), ev.ph == "B", str(ev.name), *_pid_tid(ev)))
            return
        cat = ev.cat
        if cat in OPERATOR_CATS:  # the most frequent kept kind first (about half the rows)
            start = ns(ev.ts)
            name = _CALL_TIME.sub("", str(ev.name))
            op_args = ev.args or _NO_ARGS
            number = op_args.external_id if op_args.external_id is not None else op_args.external_id_2021
            self.ops.add(start, start + (0 if ev.dur is None else ns(ev.dur)), name, *_pid_tid(ev), as_int(number))
            self._collective(ev)
            if self.batch is None and name in BATCH_OPS:
                self.batch = _batch_of(ev)
            return
        args = ev.args or _NO_ARGS
        if cat in RUNTIME_CATS:
            name = str(ev.name)
            self.api.add(
                ns(ev.ts),
                _dur_ns(ev),
                name,
                _SHOWN(name),
                RUNTIME_CATS[cat],
                *_pid_tid(ev),
                "",
                as_int(args.correlation),
            )
        elif cat in KERNEL_CATS:
            grid = _dims(args.grid)
            block = _dims(args.block)
            self.kern.add(
                ns(ev.ts),
                _dur_ns(ev),
                str(ev.name),
                as_int(args.device, 0),
                as_int(args.stream),
                as_int(args.correlation),
                as_int(ev.pid),
                *(as_int(v) for v in grid),
                *(as_int(v) for v in block),
            )
        elif cat in MEMCPY_CATS or cat in MEMSET_CATS:
            self.mem.add(
                ns(ev.ts),
                _dur_ns(ev),
                t.MEMSET_KIND if cat in MEMSET_CATS else t.kineto_memcpy_kind(str(ev.name)),
                as_int(args.bytes, 0),
                as_int(args.device, 0),
                as_int(args.stream),
                as_int(args.correlation),
            )
        elif cat in RANGE_CATS:
            start = ns(ev.ts)
            self.ranges.add(start, start + _dur_ns(ev), str(ev.name), *_pid_tid(ev))
            self._collective(ev)

    def _collective(self, ev: Event) -> None:
        """A host collective (`nccl:all_reduce` ...) with the bytes of its inputs, where it is one."""
        name = str(ev.name)
        if name == collectives.PARAM_COMMS:  # PyTorch's own record of a collective: its message size
            args = ev.args or _NO_ARGS
            size = collectives.message_bytes(args.in_msg_nelems, args.dtype)
            if size is not None:
                start = ns(ev.ts)
                self.param_comms.append((start, start + _dur_ns(ev), *_pid_tid(ev), size))
            return
        if not collectives.is_host_collective(name):
            return
        start = ns(ev.ts)
        args = ev.args or _NO_ARGS
        size = collectives.payload_bytes(args.input_dims, args.input_type)
        self.comm.append((start, start + _dur_ns(ev), name, *_pid_tid(ev), -1 if size is None else size))

    def collectives_in(self, raw: bytes) -> None:
        """`_collective` of a piece read by Arrow, whose columns keep no argument: the piece read again, event
        by event, where it holds a host collective."""
        if not any(marker in raw for marker in _COLLECTIVE_MARKERS):
            return
        for ev in decode_piece(raw) or []:
            if ev.ph == "X" and (ev.cat in OPERATOR_CATS or ev.cat in RANGE_CATS):
                self._collective(ev)

    def _sized(self, row: tuple[int, int, str, int, int, int]) -> tuple[int, int, str, int, int, int]:
        """A host collective whose inputs the trace did not record (no `record_shapes`), sized by the innermost
        `record_param_comms` around it on its thread (PyTorch 2.1 and later write one for every collective)."""
        start, end, name, pid, tid, size = row
        if size >= 0:
            return row
        around = [p for p in self.param_comms if p[2] == pid and p[3] == tid and p[0] <= start and end <= p[1]]
        return (start, end, name, pid, tid, max(around)[4]) if around else row

    def comm_table(self, offset_ns: int, source: str) -> pa.Table:
        rows = sorted(self._sized(row) for row in self.comm)
        columns: list[tuple[Any, ...]] = list(zip(*rows)) if rows else [() for _ in range(6)]
        return pa.table(
            {
                "start_ns": pa.array([v + offset_ns for v in columns[0]], pa.int64()),
                "end_ns": pa.array([v + offset_ns for v in columns[1]], pa.int64()),
                "name": pa.array(columns[2], pa.string()),
                "pid": pa.array(columns[3], pa.int64()),
                "tid": pa.array(columns[4], pa.int64()),
                "bytes": pa.array([None if v < 0 else v for v in columns[5]], pa.int64()),
                "source": pa.array([source] * len(rows), pa.string()),
            }
        )

    def piece(self, events: pa.StructArray, raw: bytes) -> bool:
        """A piece's events read by Arrow, as `event` would take them one by one, in whole columns; False
        (nothing taken) where a value needs `event`'s own handling: a missing or out-of-range time, a null
        name, B/E pairs, a grid of other than 3 numbers, a string id that is not an int64."""
        try:
            rows = _piece_rows(events)
        except (pa.ArrowInvalid, OverflowError):  # a sum past int64: `event` says which
            return False
        if rows is None:
            return False
        if self.batch is None and _may_hold_batch(rows.get(OP_KIND), raw):
            self.batch = _first_batch(raw)
        self.collectives_in(raw)
        self.seen += len(events)
        for kind, columns in ((OP_KIND, self.ops), (API_KIND, self.api), (KERNEL_KIND, self.kern)):
            if kind in rows:
                columns.add_arrays(rows[kind])
        for kind, columns in ((MEMORY_KIND, self.mem), (RANGE_KIND, self.ranges)):
            if kind in rows:
                columns.add_arrays(rows[kind])
        return True


_NO_ARGS = Args()
_COLLECTIVE_MARKERS = tuple(f'"{p}'.encode() for p in (*collectives.HOST_COLLECTIVE_PREFIXES, collectives.PARAM_COMMS))
_SHOWN = functools.cache(t.api_display_name)  # a trace repeats a few dozen API names
OP_KIND, API_KIND, KERNEL_KIND, MEMORY_KIND, RANGE_KIND = 1, 2, 3, 4, 5
"""What a complete event of a category becomes (a row of which table); 0: none."""
_KIND_OF_CAT = {
    **{c: OP_KIND for c in OPERATOR_CATS},
    **{c: API_KIND for c in RUNTIME_CATS},
    **{c: KERNEL_KIND for c in KERNEL_CATS},
    **{c: MEMORY_KIND for c in MEMCPY_CATS | MEMSET_CATS},
    **{c: RANGE_KIND for c in RANGE_CATS},
}
_INT64_MIN = -(2**63)


def _piece_rows(events: pa.StructArray) -> dict[int, list[pa.Array]] | None:
    """The rows each kept kind of event makes, as arrays in its `Columns`' order (strings as string arrays),
    by kind; None where `_Reader.event` must take the piece."""
    ph, cat = events.field("ph"), events.field("cat")
    kind = _per_value(cat, lambda c: _KIND_OF_CAT.get(c, 0), pa.int8(), 0)
    if pc.any(pc.and_(pc.is_in(ph, value_set=_BEGIN_END), pc.equal(kind, _KIND_SCALARS[OP_KIND]))).as_py():
        return None  # MXNet's B/E operator pairs are paired in Python
    kind = pc.if_else(pc.fill_null(pc.equal(ph, _X), _FALSE), kind, _KIND_SCALARS[0])
    out: dict[int, list[pa.Array]] = {}
    for k in (OP_KIND, API_KIND, KERNEL_KIND, MEMORY_KIND, RANGE_KIND):
        mask = pc.equal(kind, _KIND_SCALARS[k])
        if not pc.any(mask).as_py():
            continue
        rows = events.filter(mask)
        start = _times(rows.field("ts"), required=True)
        dur = _times(rows.field("dur"), required=k != OP_KIND)
        name = rows.field("name")
        if start is None or dur is None or name.null_count:
            return None
        args = dict(zip(ARROW_ARGS.names, rows.field("args").flatten()))
        if k == OP_KIND:
            ids = _pid_tid_arrays(rows)
            if ids is None:
                return None
            names = _per_value(name, lambda v: _CALL_TIME.sub("", v), pa.string(), "")
            number = pc.coalesce(args["External id"], args["external id"], _MINUS_ONE)
            out[k] = [start, pc.add_checked(start, dur), names, *ids, number]
        elif k == API_KIND:
            ids = _pid_tid_arrays(rows)
            if ids is None:
                return None
            api = _per_value(name, lambda v: _SHOWN(v), pa.string(), "")
            runtime = _per_value(rows.field("cat"), lambda v: RUNTIME_CATS[v], pa.string(), "")
            empty = build.repeated("", len(rows))
            out[k] = [start, dur, name, api, runtime, *ids, empty, pc.coalesce(args["correlation"], _MINUS_ONE)]
        elif k == KERNEL_KIND:
            pid = _ints_of(rows.field("pid"), rows.field(PID_TEXT))
            grid, block = _dims_arrays(args["grid"]), _dims_arrays(args["block"])
            if pid is None or grid is None or block is None:
                return None
            out[k] = [
                start,
                dur,
                name,
                pc.coalesce(args["device"], _ZERO),
                pc.coalesce(args["stream"], _MINUS_ONE),
                pc.coalesce(args["correlation"], _MINUS_ONE),
                pid,
                *grid,
                *block,
            ]
        elif k == MEMORY_KIND:
            memset = pc.is_in(rows.field("cat"), value_set=_MEMSET_CATS)
            copy_kind = _per_value(name, t.kineto_memcpy_kind, pa.string(), "")
            memory_kind = pc.if_else(memset, _MEMSET_KIND, copy_kind)
            out[k] = [
                start,
                dur,
                memory_kind,
                pc.coalesce(args["bytes"], _ZERO),
                pc.coalesce(args["device"], _ZERO),
                pc.coalesce(args["stream"], _MINUS_ONE),
                pc.coalesce(args["correlation"], _MINUS_ONE),
            ]
        else:
            ids = _pid_tid_arrays(rows)
            if ids is None:
                return None
            out[k] = [start, pc.add_checked(start, dur), name, *ids]
    return out


_X = build.string_scalar("X")
_FALSE = pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(b"\x00")])[0]
_BEGIN_END = build.strings(["B", "E"])
_MEMSET_CATS = build.strings(sorted(MEMSET_CATS))
_MEMSET_KIND = build.string_scalar(t.MEMSET_KIND)
_KIND_SCALARS = {k: build.ints([k], pa.int8())[0] for k in range(6)}
_ZERO, _MINUS_ONE, _MAX = build.int_scalar(0), build.int_scalar(-1), build.int_scalar(MAX_NS)


def _per_value(values: pa.Array, convert: Callable[[Any], Any], type: pa.DataType, null: Any) -> pa.Array:
    """`convert` applied once per distinct value (a trace repeats a few thousand), `null` for a null."""
    encoded = values.dictionary_encode()
    words = [convert(v) for v in encoded.dictionary.to_pylist()] + [null]
    indices = pc.fill_null(encoded.indices, build.ints([len(words) - 1], pa.int32())[0])
    return pc.take(build.column(words, type), indices)


def _times(values: pa.Array, required: bool) -> pa.Array | None:
    """µs (decimal, 3 places) as int64 ns, exact: the decimal's unscaled value; a null is 0 unless `required`.
    None where one is missing but required, negative, or past int64 (`event` refuses those)."""
    if values.null_count and required:
        return None
    n, offset = len(values), values.offset
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)[2 * offset : 2 * (offset + n)]
    low, high = words[0::2], words[1::2]
    if values.null_count:
        valid = np.frombuffer(pc.is_valid(values).cast(pa.int8()).buffers()[1], dtype=np.int8)[:n].astype(bool)
        low, high = np.where(valid, low, 0), np.where(valid, high, 0)
    if high.any() or (low < 0).any():
        return None
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(low))])


def _ints_of(numbers: pa.Array, texts: pa.Array) -> pa.Array | None:
    """`_int` of a field that is a number (`numbers`) or a string (`texts`, converted once per distinct
    string), -1 where it has neither; None where one is past int64 or both are given (a repeated key)."""
    if texts.null_count == len(texts):
        return pc.coalesce(numbers, _MINUS_ONE) if numbers.null_count else numbers
    if pc.any(pc.and_(pc.is_valid(numbers), pc.is_valid(texts))).as_py():
        return None
    converted = [as_int(v) for v in texts.dictionary_encode().dictionary.to_pylist()]
    if not all(-(2**63) <= v <= MAX_NS for v in converted):
        return None
    return pc.coalesce(numbers, _per_value(texts, as_int, pa.int64(), -1))


def _pid_tid_arrays(rows: pa.StructArray) -> tuple[pa.Array, pa.Array] | None:
    """`_pid_tid` over whole columns."""
    pid, tid = rows.field("pid"), rows.field("tid")
    pid_text, tid_text = rows.field(PID_TEXT), rows.field(TID_TEXT)
    both = pc.and_(pc.is_valid(pid), pc.is_valid(tid))
    if tid.null_count < len(tid):
        both = pc.and_(both, pc.fill_null(pc.not_equal(tid, build.int_scalar(_INT64_MIN)), _FALSE))
    if pc.all(both).as_py():
        return pid, tid
    pids, tids = _ints_of(pid, pid_text), _ints_of(tid, tid_text)
    if pids is None or tids is None:
        return None
    return pc.if_else(both, pid, pids), pc.if_else(both, tid, pc.bit_wise_and(tids, _MAX))


def _dims_arrays(values: pa.Array) -> list[pa.Array] | None:
    """`_dims` then `_int` over a column of grids or blocks: three columns, -1 where there is none; None
    where one is not 3 numbers (nor empty)."""
    lengths = pc.fill_null(pc.list_value_length(values), build.ints([0], pa.int32())[0])
    three = pc.equal(lengths, build.ints([3], pa.int32())[0])
    if not pc.all(pc.or_(three, pc.equal(lengths, build.ints([0], pa.int32())[0]))).as_py():
        return None
    if pc.all(three).as_py() and values.null_count == 0:
        return [pc.coalesce(pc.list_element(values, build.int_scalar(i)), _MINUS_ONE) for i in range(3)]
    flat = pc.list_flatten(values)  # the three of each row that has them, in order
    if flat.null_count == len(flat):
        return [build.ints([-1] * len(values)) for _ in range(3)]
    before = pc.subtract(pc.cumulative_sum(three.cast(pa.int64())), build.int_scalar(1))  # rows with three before
    first = pc.multiply(pc.max_element_wise(before, _ZERO), build.int_scalar(3))
    flat = pc.coalesce(flat, _MINUS_ONE)
    out = []
    for i in range(3):
        picked = pc.take(flat, pc.add(first, build.int_scalar(i)))
        out.append(pc.if_else(three, picked, _MINUS_ONE))
    return out


def _may_hold_batch(ops: list[pa.Array] | None, raw: bytes) -> bool:
    """Whether a piece may name the batch size: it has a convolution and recorded shapes."""
    if ops is None or not pc.any(pc.is_in(ops[2], value_set=_BATCH_OPS)).as_py():
        return False
    return b'"Input Dims"' in raw


_BATCH_OPS = build.strings(list(BATCH_OPS))


def _first_batch(raw: bytes) -> int | None:
    """`_Reader.event`'s batch size of the first convolution that gives one, in a piece's events."""
    for ev in decode_piece(raw) or []:
        if ev.ph == "X" and ev.cat in OPERATOR_CATS and _CALL_TIME.sub("", str(ev.name)) in BATCH_OPS:
            batch = _batch_of(ev)
            if batch is not None:
                return batch
    return None


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
