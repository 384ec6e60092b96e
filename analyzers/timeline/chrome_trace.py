"""Export a run folder as Chrome-trace JSON, which Perfetto and chrome://tracing open.

The tracks are the lanes the viewer draws (`analyzers.timeline.lanes`), with the same labels: CUDA API calls on
their threads (one process track per traced process, with the framework's operators), one process per
GPU device with one track per stream (kernels and memory operations), one "NVTX" process with one track
per nesting depth, one "threads" process for the thread timeline (each row's own activity: the OS call,
the Python function, the sampler's level), and counter tracks for the sampler's CPU %, RSS and GPU
utilisation. Each launch is tied to what it launched by a flow event pair ("s" on the API call, "f"
bound to the GPU operation), as Kineto writes them, so Perfetto draws the arrow. Events are written as
they are produced; `ts`/`dur` are µs (the format's unit) with ns kept as 3 decimals.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq

from analyzers.run.run import Run
from analyzers.timeline import lanes as ln
from analyzers.timeline.gpu_timeline import KERNEL, NVTX_ACTIVITIES
from analyzers.trace import tables as t
from tracer.core import output as out_file
from tracer.core import schema

GPU_PID_BASE = 1_000_000_000
THREADS_PID = 999_999_999
COUNTERS_PID = 999_999_998
NVTX_PID = 999_999_997
BATCH = 65_536
FLOW_CATEGORY = "ac2g"  # Kineto's name for launch-to-GPU flows, which Perfetto and HTA look for
OPERATOR_CATEGORY = "cpu_op"  # Kineto's category of framework operators (aten::conv2d, ...)
NVTX_CATEGORY = "nvtx"
GPU_CATEGORY = {t.KERNELS: "kernel", t.MEMCPY: "gpu_memcpy"}


def _us(ns: int) -> float:
    """µs, rounded once (an int's true division; `ns / 1000.0` would round the ns to a double first)."""
    return int(ns) / 1000


def _meta(pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _slice(cat: str, name: str, pid: int, tid: int, start_ns: int, end_ns: int, **args: Any) -> dict[str, Any]:
    event = {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": _us(start_ns),
        "dur": _us(end_ns - start_ns),
    }
    return event | ({"args": args} if args else {})


def events(folder: Run) -> Iterator[dict[str, Any]]:
    """The run's events; a run of several ranks as one process per rank (`rank_events`)."""
    if folder.run_json.exists() and folder.read_record().world_size > 1:
        yield from rank_events(folder)
        return
    yield from _run_events(folder)


RANK_PID_BASE = 1_000
"""A rank's process in the export: RANK_PID_BASE + rank (its real pids would scatter it over processes)."""
STEPS_THREAD = "steps"
STEP_CATEGORY = "step"


def rank_events(folder: Run) -> Iterator[dict[str, Any]]:
    """Each rank's events (its threads, GPU streams, NVTX rows, counters) as one process, named with its
    rank and device, its tracks renamed `<process>: <track>`, and its steps on a track of their own: the
    ranks on one time axis, one above the other, where a late arrival shows."""
    record = folder.read_record()
    for info in record.rank_infos:
        pid = RANK_PID_BASE + info.rank
        yield _meta(pid, f"rank {info.rank} ({info.device or 'device not recorded'})")
        yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": info.rank}}
        tids: dict[tuple[int, int], int] = {}
        names: dict[int, str] = {}
        view = folder.rank(info.rank)  # in memory: its tables hold this rank's rows only
        steps = view.samples(schema.STEPS_TABLE)
        if steps is not None:
            tids[(-1, -1)] = 0
            yield _meta(pid, STEPS_THREAD, 0)
            for r in steps.to_pylist():
                end = r["start_ns"] + round((r[schema.DATA_WAIT_S] + r[schema.COMPUTE_S] + r[schema.SYNC_S]) * 1e9)
                name = f"step {r['step']}" + (f" (epoch {r['epoch']})" if r["epoch"] else "")
                yield _slice(STEP_CATEGORY, name, pid, 0, r["start_ns"], end, data_wait_s=r[schema.DATA_WAIT_S])
        for ev in _run_events(view):
            old = (int(ev.get("pid", 0)), int(ev.get("tid", 0)))
            if ev["ph"] == "M" and ev["name"] == "process_name":
                names[old[0]] = ev["args"]["name"]
                continue
            tid = tids.setdefault(old, len(tids) + 1)
            if ev["ph"] == "M" and ev["name"] == "thread_name":
                where = names.get(old[0], "")
                ev = {**ev, "args": {"name": f"{where}: {ev['args']['name']}" if where else ev["args"]["name"]}}
            yield {**ev, "pid": pid, "tid": tid}


def _run_events(folder: Run) -> Iterator[dict[str, Any]]:
    lanes = ln.load(folder)
    if lanes.threads is not None and lanes.api_calls is not None:
        yield from _api_events(lanes.threads, lanes.api_calls)
    yield from _operators(folder)
    if lanes.gpu is not None:
        yield from _gpu_events(lanes.gpu)
    if lanes.links is not None and lanes.api_calls is not None and lanes.gpu is not None and lanes.threads is not None:
        yield from flows(lanes.threads, lanes.api_calls, lanes.gpu, lanes.links)
    if lanes.threads is not None and len(lanes.threads.lane):
        yield from _thread_events(lanes.threads)
    yield from _counters(folder)


def _api_events(threads: ln.ThreadLanes, calls: ln.ApiCalls) -> Iterator[dict[str, Any]]:
    named: set[int] = set()
    for i in range(len(calls.row)):
        lane = int(calls.lane[i])
        pid, tid = int(threads.lane_pids[lane]), int(threads.lane_tids[lane])
        if lane not in named:
            named.add(lane)
            yield _meta(pid, threads.lane_names[lane], tid)
        kind = calls.kinds[int(calls.kind_code[i])]
        yield _slice(
            f"cuda_{kind}", calls.apis[int(calls.api_code[i])], pid, tid, int(calls.start_ns[i]), int(calls.end_ns[i]),
            correlation=int(calls.correlation_id[i]),
        )  # fmt: skip


def _operators(folder: Run) -> Iterator[dict[str, Any]]:
    path = folder.table_file(t.OPERATORS)
    if not t.present(folder, t.OPERATORS):
        return
    for batch in pq.ParquetFile(path).iter_batches(
        batch_size=BATCH, columns=["start_ns", "end_ns", "name", "pid", "tid"]
    ):
        for r in batch.to_pylist():
            yield _slice(OPERATOR_CATEGORY, r["name"], r["pid"], r["tid"], r["start_ns"], r["end_ns"])


def _gpu_pid_tid(gpu: ln.GpuLanes, lane: int) -> tuple[int, int]:
    """A stream lane's track: the device's process, the stream's thread; NVTX rows: the NVTX process."""
    device = int(gpu.lane_device[lane])
    if device == ln.NVTX_LANE:
        return NVTX_PID, lane - (len(gpu.lane_names) - gpu.nvtx_lanes)
    return GPU_PID_BASE + max(device, 0), int(gpu.lane_stream[lane])


def _gpu_events(gpu: ln.GpuLanes) -> Iterator[dict[str, Any]]:
    devices = sorted({int(d) for d in gpu.lane_device.tolist() if d != ln.NVTX_LANE})
    for device in devices:
        yield _meta(GPU_PID_BASE + max(device, 0), f"GPU {device}")
    if gpu.nvtx_lanes:
        yield _meta(NVTX_PID, "NVTX")
    for lane, name in enumerate(gpu.lane_names):
        pid, tid = _gpu_pid_tid(gpu, lane)
        yield _meta(pid, name, tid)
    nvtx = {gpu.names.index(a) for a in NVTX_ACTIVITIES}
    kernel = gpu.names.index(KERNEL)
    for i in range(len(gpu.lane)):
        pid, tid = _gpu_pid_tid(gpu, int(gpu.lane[i]))
        code = int(gpu.code[i])
        if code in nvtx:
            yield _slice(NVTX_CATEGORY, gpu.label(i), pid, tid, int(gpu.start_ns[i]), int(gpu.end_ns[i]))
            continue
        cat = GPU_CATEGORY[t.KERNELS if code == kernel else t.MEMCPY]
        yield _slice(
            cat,
            gpu.label(i),
            pid,
            tid,
            int(gpu.start_ns[i]),
            int(gpu.end_ns[i]),
            correlation=int(gpu.correlation_id[i]),
        )


def flows(
    threads: ln.ThreadLanes, calls: ln.ApiCalls, gpu: ln.GpuLanes, links: ln.LaunchLinks
) -> Iterator[dict[str, Any]]:
    """One "s"/"f" pair per launch and the GPU operation it launched (`analyzers.trace.correlation`): the start
    on the API call's thread at the call's start, the end bound ("bp": "e") to the operation's slice."""
    flow_id = 0
    for item, call in enumerate(links.call_of_item.tolist()):
        if call < 0:
            continue
        flow_id += 1
        lane = int(calls.lane[call])
        common = {"cat": FLOW_CATEGORY, "name": FLOW_CATEGORY, "id": flow_id}
        pid, tid = int(threads.lane_pids[lane]), int(threads.lane_tids[lane])
        yield {**common, "ph": "s", "pid": pid, "tid": tid, "ts": _us(int(calls.start_ns[call]))}
        gpu_pid, gpu_tid = _gpu_pid_tid(gpu, int(gpu.lane[item]))
        yield {**common, "ph": "f", "bp": "e", "pid": gpu_pid, "tid": gpu_tid, "ts": _us(int(gpu.start_ns[item]))}


def _thread_events(threads: ln.ThreadLanes) -> Iterator[dict[str, Any]]:
    yield _meta(THREADS_PID, "threads (sampler, OS runtime, py-spy)")
    for lane, name in enumerate(threads.lane_names):
        yield _meta(THREADS_PID, name, int(threads.lane_tids[lane]))
    for i in range(len(threads.lane)):
        yield _slice(
            threads.sources[int(threads.source_code[i])],
            threads.details[int(threads.detail_code[i])],
            THREADS_PID,
            int(threads.lane_tids[int(threads.lane[i])]),
            int(threads.start_ns[i]),
            int(threads.end_ns[i]),
        )


def _counters(folder: Run) -> Iterator[dict[str, Any]]:
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


def export(folder: Run, out_path: Path) -> int:
    """Writes the trace through the one output writer (a unique temporary name, then a rename);
    returns the number of events."""
    with out_file.open_replacing(Path(out_path), "export-trace", "w") as f:
        return write(f, events(folder))
