"""Export a run folder as Chrome-trace JSON, which Perfetto and chrome://tracing open.

One process track per traced process (CUDA API calls, NVTX ranges and the framework's operators on
their threads), one per GPU device (kernels and memory operations on one track per stream), one
"threads" process for the thread timeline, and counter tracks for the sampler's CPU %, RSS and GPU
utilisation. Each launch is tied to what it launched by a flow event pair ("s" on the API call, "f"
bound to the GPU operation), as Kineto writes them, so Perfetto draws the arrow. Events are written as
they are produced, so memory stays flat however long the run (the flows hold a few integer arrays).
`ts`/`dur` are µs (the format's unit) with ns kept as 3 decimals.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq

from analyzers import tables as t
from analyzers.correlation import GPU_TABLES, int_column, launch_links
from analyzers.threads import thread_timeline
from tracer.core import schema
from tracer.core.runfolder import RunFolder

GPU_PID_BASE = 1_000_000_000
THREADS_PID = 999_999_999
COUNTERS_PID = 999_999_998
BATCH = 65_536
FLOW_CATEGORY = "ac2g"  # Kineto's name for launch-to-GPU flows, which Perfetto and HTA look for
OPERATOR_CATEGORY = "cpu_op"  # Kineto's category of framework operators (aten::conv2d, ...)
GPU_LABEL = {t.KERNELS: "name", t.MEMCPY: "kind"}
GPU_CATEGORY = {t.KERNELS: "kernel", t.MEMCPY: "gpu_memcpy"}


def _us(ns: int) -> float:
    return ns / 1000.0


def _rows(path: Path, columns: list[str]) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=columns):
        yield from batch.to_pylist()


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def events(folder: RunFolder) -> Iterator[dict[str, Any]]:
    named_threads: set[tuple[int, int]] = set()
    for r in _rows(
        folder.table_path(t.CUDA_API),
        ["start_ns", "dur_ns", "api", "kind", "pid", "tid", "thread_name", "correlation_id"],
    ):
        key = (r["pid"], r["tid"])
        if r["thread_name"] and key not in named_threads:
            named_threads.add(key)
            yield _meta(r["pid"], r["thread_name"], r["tid"])
        yield {
            "ph": "X",
            "cat": f"cuda_{r['kind']}",
            "name": r["api"],
            "pid": r["pid"],
            "tid": r["tid"],
            "ts": _us(r["start_ns"]),
            "dur": _us(r["dur_ns"]),
            "args": {"correlation": r["correlation_id"]},
        }
    for r in _rows(folder.table_path(t.NVTX), ["start_ns", "end_ns", "name", "pid", "tid"]):
        yield {
            "ph": "X",
            "cat": "nvtx",
            "name": r["name"],
            "pid": r["pid"],
            "tid": r["tid"],
            "ts": _us(r["start_ns"]),
            "dur": _us(r["end_ns"] - r["start_ns"]),
        }
    for r in _rows(folder.table_path(t.OPERATORS), ["start_ns", "end_ns", "name", "pid", "tid"]):
        yield {
            "ph": "X",
            "cat": OPERATOR_CATEGORY,
            "name": r["name"],
            "pid": r["pid"],
            "tid": r["tid"],
            "ts": _us(r["start_ns"]),
            "dur": _us(r["end_ns"] - r["start_ns"]),
        }
    devices: set[int] = set()
    streams: set[tuple[int, int]] = set()
    for table in GPU_TABLES:
        label = GPU_LABEL[table]
        for r in _rows(folder.table_path(table), ["start_ns", "dur_ns", label, "device", "stream", "correlation_id"]):
            dev = int(r["device"] or 0)
            if dev not in devices:
                devices.add(dev)
                yield _meta(GPU_PID_BASE + dev, f"GPU {dev}")
            if (dev, r["stream"]) not in streams:
                streams.add((dev, r["stream"]))
                yield _meta(GPU_PID_BASE + dev, f"stream {r['stream']}", r["stream"])
            yield {
                "ph": "X",
                "cat": GPU_CATEGORY[table],
                "name": r[label],
                "pid": GPU_PID_BASE + dev,
                "tid": r["stream"],
                "ts": _us(r["start_ns"]),
                "dur": _us(r["dur_ns"]),
                "args": {"correlation": r["correlation_id"]},
            }
    yield from flows(folder)
    timeline = thread_timeline(folder)
    if timeline.num_rows:
        yield _meta(THREADS_PID, "threads (sampler, OS runtime, py-spy)")
        seen: set[int] = set()
        for r in timeline.to_pylist():
            if r["tid"] not in seen:
                seen.add(r["tid"])
                yield _meta(THREADS_PID, f"{r['thread_name'] or 'thread'} {r['tid']}", r["tid"])
            yield {
                "ph": "X",
                "cat": r["source"],
                "name": r["activity"],
                "pid": THREADS_PID,
                "tid": r["tid"],
                "ts": _us(r["start_ns"]),
                "dur": _us(r["end_ns"] - r["start_ns"]),
            }
    yield from _counters(folder)


def flows(folder: RunFolder) -> Iterator[dict[str, Any]]:
    """One "s"/"f" pair per launch and the GPU operation it launched (`analyzers.correlation`): the start
    on the API call's thread at the call's start, the end bound ("bp": "e") to the operation's slice."""
    api_path = folder.table_path(t.CUDA_API)
    if not api_path.exists():
        return
    api_start, api_pid, api_tid = (int_column(str(api_path), c) for c in ("start_ns", "pid", "tid"))
    flow_id = 0
    for table in GPU_TABLES:
        links = launch_links(folder, table)
        if not len(links):
            continue
        path = str(folder.table_path(table))
        start, device, stream = (int_column(path, c) for c in ("start_ns", "device", "stream"))
        for a, g in zip(links.api_row.tolist(), links.gpu_row.tolist()):
            flow_id += 1
            common = {"cat": FLOW_CATEGORY, "name": FLOW_CATEGORY, "id": flow_id}
            yield {**common, "ph": "s", "pid": int(api_pid[a]), "tid": int(api_tid[a]), "ts": _us(int(api_start[a]))}
            yield {
                **common,
                "ph": "f",
                "bp": "e",
                "pid": GPU_PID_BASE + max(int(device[g]), 0),
                "tid": int(stream[g]),
                "ts": _us(int(start[g])),
            }


def _counters(folder: RunFolder) -> Iterator[dict[str, Any]]:
    first = True
    for name, cols in (
        ("process", (schema.CPU_PCT, schema.RSS_MIB, "threads")),
        ("gpu", (schema.UTIL_PCT, schema.MEM_USED_MIB)),
    ):
        table = folder.samples(name)
        if table is None or "t_ns" not in table.column_names:
            continue
        present = [c for c in cols if c in table.column_names]
        for r in table.select(["t_ns", *present]).to_pylist():
            if first:
                first = False
                yield _meta(COUNTERS_PID, "sampler")
            for c in present:
                if r[c] is not None:
                    yield {
                        "ph": "C",
                        "name": f"{name}.{c}",
                        "pid": COUNTERS_PID,
                        "tid": 0,
                        "ts": _us(r["t_ns"]),
                        "args": {c: r[c]},
                    }


def write(stream: IO[str], items: Iterator[dict[str, Any]]) -> int:
    stream.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
    n = 0
    for ev in items:
        stream.write((",\n" if n else "") + json.dumps(ev, separators=(",", ":")))
        n += 1
    stream.write("\n]}\n")
    return n


def export(folder: RunFolder, out_path: Path) -> int:
    """Writes the trace atomically; returns the number of events."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with tmp.open("w") as f:
        n = write(f, events(folder))
    os.replace(tmp, out_path)
    return n
