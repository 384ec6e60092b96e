"""XProf's traces: an XPlane profile (`.xplane.pb`, what jax.profiler and TensorFlow's profiler write)
converted by XProf's own converter (the `xprof` package, the one TensorBoard's profile plugin uses),
and the Chrome-trace JSON XProf makes of one (jax.profiler's `perfetto_trace.json.gz`).

Why XProf's converter rather than reading the protobuf here: XPlane's layout (planes, lines, event
and stat metadata) changes with XLA, and XProf is the reader its writers keep in step. Its trace
viewer JSON names processes `/host:CPU` and `/device:GPU:N` and threads by what they hold, and each
XLA op event carries `hlo_op`; from it:
- an event with `hlo_op` on the host, or on a device's `XLA Ops` line, is an operator (the framework's
  own op, named as XLA recorded it: `convolution`, `dot.3`, `fusion.12`), and so is a TensorFlow op
  (`long_name` `name:type`, named by its type: `_MklNativeFusedConv2D`, `MatMul`; tf.data's
  `Iterator::` events are the input pipeline, ranges), nested in the
  tables' usual way, so the operator table sums self time as for the PyTorch profiler;
- an event on a device's `Stream` line is a kernel (a `Memcpy` one is a copy); CUDA runtime and driver
  calls recorded on the host (`cuda...`, `cu...`) are CUDA API calls;
- every other event (Python's and XLA's own TraceMe ranges) is a named range, as NVTX ranges are.
Times are µs from the profile's start (a relative clock).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import zlib
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from analyzers.ingest.chrome_columns import Columns, as_int, first_line, ns, open_trace
from analyzers.ingest.trace_events import Args, TraceEvents, TraceFormatError
from analyzers.trace import tables as t
from analyzers.trace.clock import Clock, kineto_clock
from tracer.core.errors import UserError

HOST_PREFIX = "/host:"
DEVICE_PREFIX = "/device:"
OPS_LINE = "XLA Ops"
STREAM_LINE = "Stream"
COPY_WORDS = ("Memcpy", "memcpy")
API_CALL = re.compile(r"^(?:cuda|cu|hip)[A-Z]\w*$")
"""A CUDA runtime (`cudaMemcpyAsync`), driver (`cuLaunchKernel`) or HIP call recorded on the host."""
INPUT_PIPELINE = "Iterator::"
"""tf.data's iterators (`Iterator::Prefetch`): the input pipeline, a range rather than an operator."""
DATASET_TYPE = "Dataset"
"""What XProf's framework op stats call those iterators' type."""
TRACE_VIEWER = "trace_viewer"
"""XProf's tool that turns XPlane into trace-viewer JSON."""
INSTALL = "pip install xprof"


def read_xplane(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The tables of an XPlane profile, through XProf's converter to trace-viewer JSON."""
    raw = trace_viewer_json(path)
    return parse(path, _bytes_io(raw))


def trace_viewer_json(path: Path) -> bytes:
    """XProf's trace-viewer JSON of one XPlane file (what TensorBoard's trace viewer shows)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # XProf's C++ logs every conversion step otherwise
    os.environ.setdefault("GLOG_minloglevel", "3")
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise UserError(f"{path}: reading XPlane needs XProf's converter: {INSTALL}") from None
    try:
        data, _content_type = raw_to_tool_data.xspace_to_tool_data([str(path)], TRACE_VIEWER, {})
    except Exception as e:  # noqa: BLE001 - XProf raises what its C++ converter says, of many types
        raise UserError(f"{path}: XProf cannot read this XPlane profile ({first_line(e)})") from None
    if not data:
        damage = _wire_damage(path)
        if damage:
            raise UserError(
                f"{path}: corrupt XPlane profile ({damage}): not the protobuf jax.profiler or TensorFlow write"
            )
        raise UserError(f"{path}: XProf found no trace in this XPlane profile")
    return data if isinstance(data, bytes) else str(data).encode()


def _wire_damage(path: Path) -> str:
    """What breaks the file as a protobuf message (an XSpace's fields, each a tag and its value, end exactly
    at the file's end), or "" where it reads as one: a corrupt or truncated file said so, not "no trace"."""
    try:
        data = path.read_bytes()
    except OSError as e:
        return first_line(e)
    at = 0

    def varint() -> int:
        nonlocal at
        value, shift = 0, 0
        while True:
            if at >= len(data) or shift > 63:
                raise ValueError("a number runs past the end of the file: truncated?")
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    try:
        while at < len(data):
            key = varint()
            field, wire = key >> 3, key & 7
            if field == 0 or wire not in (0, 1, 2, 5):
                return f"byte {at}: field {field} of wire type {wire} is no protobuf field"
            size = varint() if wire == 2 else {0: 0, 1: 8, 5: 4}[wire]
            if wire == 0:
                varint()
            at += size
            if at > len(data):
                return f"a field runs {at - len(data)} bytes past the end of the file: truncated?"
    except ValueError as e:
        return str(e)
    return ""


def framework_op_stats(path: Path) -> dict[str, float]:
    """Total time per op type on the host, in µs, as XProf's own `framework_op_stats` tool computes it
    (TensorBoard's "framework op stats" table): what a TensorFlow profile's operator totals are checked
    against. XProf counts the ops of training steps only (events with a `group_id`): ops outside every
    step (a tf.data function's, ops run before the first step) are left out. Empty where XProf finds no
    framework ops (an XLA:CPU profile of JAX)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "framework_op_stats", {})
    tables = json.loads(data)
    totals: dict[str, float] = {}
    if not tables:
        return totals
    ids = [c["id"] for c in tables[0]["cols"]]
    for row in tables[0]["rows"]:
        cell = dict(zip(ids, (c.get("v") for c in row["c"])))
        if cell["host_or_device"] == "Host" and cell["type"] not in ("", "IDLE", DATASET_TYPE):
            totals[cell["type"]] = totals.get(cell["type"], 0.0) + float(cell["total_time"])
    return totals


def _bytes_io(data: bytes) -> IO[bytes]:
    import io

    return io.BytesIO(data)


def read_json(path: Path) -> tuple[dict[str, pa.Table], Clock]:
    """The tables of XProf's trace JSON, plain or gzipped (jax.profiler's `perfetto_trace.json.gz`)."""
    try:
        with open_trace(path) as raw:
            return parse(path, raw)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise UserError(f"{path}: cannot read ({first_line(e)}); truncated or corrupt gzip?") from None


def parse(path: Path, raw: IO[bytes]) -> tuple[dict[str, pa.Table], Clock]:
    source = t.SOURCE_XPROF
    api = Columns(
        ["start_ns", "dur_ns", "name", "api", "kind", "pid", "tid", "thread_name", "correlation_id"],
        t.CUDA_API_SCHEMA,
        source=source,
    )
    kern = Columns(
        ["start_ns", "dur_ns", "name", "device", "stream", "correlation_id", "pid"],
        t.KERNELS_SCHEMA,
        aliases={"short_name": "name"},
        source=source,
    )
    mem = Columns(
        ["start_ns", "dur_ns", "kind", "bytes", "device", "stream", "correlation_id"], t.MEMCPY_SCHEMA, source=source
    )
    ranges = Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.NVTX_SCHEMA, source=source)
    ops = Columns(["start_ns", "end_ns", "name", "pid", "tid"], t.OPERATORS_SCHEMA, source=source)
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    complete = []  # X events wait for the metadata, which XProf writes first but the format allows anywhere
    no_args = Args()
    seen = 0
    try:
        events = TraceEvents(raw)
        for chunk in events:
            for ev in chunk:
                seen += 1
                if ev.ph == "M" and ev.args is not None and ev.args.name is not None:
                    if ev.name == "process_name":
                        processes[ev.pid] = str(ev.args.name)
                    elif ev.name == "thread_name":
                        threads[(ev.pid, ev.tid)] = str(ev.args.name)
                elif ev.ph == "X":
                    complete.append(ev)
        shown = functools.cache(t.api_display_name)
        for ev in complete:
            start = ns(ev.ts)
            end = start + (0 if ev.dur is None else ns(ev.dur))
            args = ev.args or no_args
            process = processes.get(ev.pid, "")
            thread = threads.get((ev.pid, ev.tid), "")
            name = str(ev.name)
            pid, tid = as_int(ev.pid), as_int(ev.tid)
            if process.startswith(DEVICE_PREFIX):
                device = _device(process)
                if thread.startswith(OPS_LINE):
                    ops.add(start, end, name, pid, tid)
                elif thread.startswith(STREAM_LINE):
                    if any(w in name for w in COPY_WORDS):
                        mem.add(start, end - start, t.kineto_memcpy_kind(name), 0, device, _stream(thread), -1)
                    else:
                        kern.add(start, end - start, name, device, _stream(thread), -1, pid)
                else:
                    ranges.add(start, end, name, pid, tid)
            elif args.hlo_op is not None or (args.long_name is not None and not name.startswith(INPUT_PIPELINE)):
                ops.add(start, end, name, pid, tid)  # an XLA op, a TensorFlow op
            elif API_CALL.match(name):
                kind = t.API_RUNTIME if name.startswith(("cuda", "hip")) else t.API_DRIVER
                api.add(start, end - start, name, shown(name), kind, pid, tid, thread, -1)
            elif not name.startswith("end: "):  # XLA's CPU executor marks each op's end as an event of its own
                ranges.add(start, end, name, pid, tid)
    except TraceFormatError as e:
        raise UserError(f"{path}: not an XProf trace ({first_line(e)})") from None
    except (TypeError, ArithmeticError, ValueError) as e:
        raise UserError(f"{path}: a trace event lacks a usable field ({first_line(e)})") from None
    if seen == 0:
        raise UserError(f"{path}: not an XProf trace (no traceEvents)")
    clock = kineto_clock(None)
    out = {
        t.CUDA_API: api.table(clock.offset_ns),
        t.KERNELS: kern.table(clock.offset_ns),
        t.MEMCPY: mem.table(clock.offset_ns),
        t.NVTX: ranges.table(clock.offset_ns),
        t.OPERATORS: ops.table(clock.offset_ns),
    }
    return {k: v for k, v in out.items() if v.num_rows}, clock


def _device(process: str) -> int:
    """`/device:GPU:3` -> 3."""
    return as_int(process.rsplit(":", 1)[-1], 0)


def _stream(thread: str) -> int:
    """`Stream #14(Compute)` -> 14."""
    digits = "".join(ch for ch in thread.split("(")[0] if ch.isdigit())
    return int(digits) if digits else -1
