"""Every lane set a timeline draws, built once from a run's saved tables, with its labels: the viewer
draws these arrays and `export-trace` writes them as Perfetto tracks, so both show the same rows.

- `ThreadLanes`: one lane per thread of the thread timeline (`analyzers.summaries.threads`), plus any thread that
  only made CUDA API calls; each segment keeps its timeline row's activity and shows as its kind
  (`threads.activity_kind`), kinds ordered by which wins a shared pixel.
- `ApiCalls`: every CUDA API call, on its thread's lane.
- `GpuLanes`: one lane per (device, stream) for kernels, copies and memsets, then one per NVTX nesting
  depth (`analyzers.timeline.gpu_timeline`).
- `LaunchLinks`: which call launched which GPU item (`analyzers.trace.correlation`), as indices into the two.
Qt-free and pandas-free; times stay Unix ns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analyzers.run.run import Run
from analyzers.summaries.rows import NO_THREAD
from analyzers.summaries.threads import activity_kind, thread_timeline
from analyzers.timeline.gpu_timeline import GPU_ACTIVITIES, NVTX_ACTIVITIES, gpu_activity, nvtx_depth, stream_label
from analyzers.trace import tables as t
from analyzers.trace.arrays import as_array, codes
from analyzers.trace.correlation import GPU_TABLES, launch_links
from tracer.core import schema
from tracer.core.cached import cached_property

LOW_PRIORITY = (t.ACTIVITY_IDLE, "waiting")
THREAD_KEY = 1 << 32  # pid * THREAD_KEY + tid names a thread
NVTX_LANE = -1  # lane_device / lane_stream of an NVTX row


def activity_priority(activity: str) -> tuple[int, str]:
    """Order in which activities win a pixel of a thread lane: idle ones lose, `busy` wins."""
    return (0 if activity in LOW_PRIORITY else 2 if activity == t.ACTIVITY_BUSY else 1, activity)


def thread_label(name: str, tid: int, pid: int) -> str:
    """`name (tid)`; nsys's process-wide events (tid 0, its "[Unknown]") as the process they belong to."""
    return f"[process {pid}]" if tid == NO_THREAD else f"{name or 'thread'} ({tid})"


def nvtx_label(depth: int) -> str:
    return "NVTX" if depth == 0 else f"NVTX depth {depth}"


@dataclass(frozen=True)
class ThreadLanes:
    """Thread timeline segments, one lane per (pid, tid), segments in lane-major, then start order: the
    segment at index i is row i of the timeline table."""

    lane_names: list[str]
    lane_pids: np.ndarray
    lane_tids: np.ndarray
    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    code: np.ndarray  # each segment's kind, an index into `names`
    names: tuple[str, ...]  # kinds, lowest priority first
    detail_code: np.ndarray  # each segment's own activity (the OS call, the Python function), into `details`
    details: list[str]
    source_code: np.ndarray  # each segment's source, into `sources`
    sources: list[str]

    @cached_property
    def activities(self) -> list[str]:
        """The kinds present, lowest priority first."""
        used = set(np.unique(self.code).tolist())
        return [n for i, n in enumerate(self.names) if i in used]

    @cached_property
    def origin_ns(self) -> int:
        return int(self.start_ns.min()) if len(self.start_ns) else 0

    @cached_property
    def span_ns(self) -> tuple[int, int]:
        """(first start, last end); (0, 0) without segments."""
        return (int(self.start_ns.min()), int(self.end_ns.max())) if len(self.start_ns) else (0, 0)

    @property
    def source(self) -> str:
        return ", ".join(sorted(s for s in self.sources if s)) or "thread timeline"


@dataclass(frozen=True)
class ApiCalls:
    """Every CUDA API call, sorted by start; `row` is its row in cuda_api.parquet."""

    lane: np.ndarray  # in the run's ThreadLanes
    start_ns: np.ndarray
    end_ns: np.ndarray
    name_code: np.ndarray  # the call's name (cuda_api.name), into `names`
    names: list[str]
    api_code: np.ndarray  # the API function it is shown as (cuda_api.api), into `apis`
    apis: list[str]
    kind_code: np.ndarray  # runtime or driver (`tables.API_RUNTIME`), into `kinds`
    kinds: list[str]
    correlation_id: np.ndarray
    row: np.ndarray
    lanes: int

    @property
    def origin_ns(self) -> int:
        return int(self.start_ns[0]) if len(self.start_ns) else 0

    def name(self, call: int) -> str:
        return self.names[int(self.name_code[call])]


@dataclass(frozen=True)
class GpuLanes:
    """GPU operations, one lane per (device, stream), then NVTX ranges, one lane per nesting depth;
    items sorted by lane, then start."""

    lane_names: list[str]
    lane_device: np.ndarray  # NVTX_LANE on NVTX rows
    lane_stream: np.ndarray
    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    code: np.ndarray  # each item's activity (kernel, memcpy, memset, NVTX), an index into `names`
    names: tuple[str, ...]  # lowest priority first
    label_code: np.ndarray  # each item's name (kernel, copy kind, NVTX range), into `labels`
    labels: list[str]
    correlation_id: np.ndarray  # -1 on NVTX ranges
    api_row: np.ndarray  # the cuda_api row that launched each item, -1 for none
    nvtx_lanes: int  # the last lanes are NVTX rows

    @cached_property
    def origin_ns(self) -> int:
        return int(self.start_ns.min()) if len(self.start_ns) else 0

    @cached_property
    def activities(self) -> list[str]:
        used = set(np.unique(self.code).tolist())
        return [n for i, n in enumerate(self.names) if i in used]

    @cached_property
    def span_ns(self) -> tuple[int, int]:
        """(first start, last end); (0, 0) without items."""
        return (int(self.start_ns.min()), int(self.end_ns.max())) if len(self.start_ns) else (0, 0)

    def label(self, item: int) -> str:
        return self.labels[int(self.label_code[item])]


@dataclass(frozen=True)
class LaunchLinks:
    """Launch-to-GPU links as indices: -1 where an item has no peer."""

    call_of_item: np.ndarray  # per GpuLanes item: its launch in ApiCalls
    item_of_call: np.ndarray  # per ApiCalls call: the GPU item it launched


@dataclass(frozen=True)
class Lanes:
    """Every lane set of one run; None where the run has no such rows."""

    threads: ThreadLanes | None
    api_calls: ApiCalls | None
    gpu: GpuLanes | None
    links: LaunchLinks | None


def load(folder: Run) -> Lanes:
    api = _read_api(folder)
    threads = thread_lanes(thread_timeline(folder), api)
    calls = api_calls(api, threads)
    gpu = gpu_lanes(folder)
    ranks = RankLabels.of(folder)
    if ranks is not None:
        threads, gpu = ranks.named(threads, gpu)
    return Lanes(threads, calls, gpu, launch_indices(calls, gpu))


@dataclass(frozen=True)
class RankLabels:
    """A run of several ranks: which rank each process and GPU is (from the tables' RANK column), so every
    lane is named `rank r · ...`: the ranks' lanes read as groups on the one time axis."""

    of_pid: dict[int, int]
    of_device: dict[int, int]

    @classmethod
    def of(cls, folder: Run) -> RankLabels | None:
        if not folder.run_json.exists() or folder.read_record().world_size <= 1:
            return None
        of_pid: dict[int, int] = {}
        of_device: dict[int, int] = {}
        for name, key, into in ((t.CUDA_API, "pid", of_pid), (t.NVTX, "pid", of_pid), (t.KERNELS, "device", of_device)):
            path = folder.table_file(name)
            if not t.present(folder, name) or schema.RANK not in pq.ParquetFile(path).schema_arrow.names:
                continue
            pairs = pq.read_table(path, columns=[key, schema.RANK]).group_by([key, schema.RANK]).aggregate([])
            for k, r in zip(pairs[key].to_pylist(), pairs[schema.RANK].to_pylist()):
                if k is not None and r is not None:
                    into.setdefault(int(k), int(r))
        for info in folder.read_record().rank_infos:
            if info.pid is not None:
                of_pid.setdefault(info.pid, info.rank)
        return cls(of_pid, of_device)

    def named(self, threads: ThreadLanes | None, gpu: GpuLanes | None) -> tuple[ThreadLanes | None, GpuLanes | None]:
        if threads is not None:
            names = [self._prefix(self.of_pid.get(int(p)), n) for p, n in zip(threads.lane_pids, threads.lane_names)]
            threads = dataclasses.replace(threads, lane_names=names)
        if gpu is not None:
            names = [
                n if int(d) == NVTX_LANE else self._prefix(self.of_device.get(int(d)), n)
                for d, n in zip(gpu.lane_device, gpu.lane_names)
            ]
            gpu = dataclasses.replace(gpu, lane_names=names)
        return threads, gpu

    @staticmethod
    def _prefix(rank: int | None, name: str) -> str:
        return name if rank is None or name.startswith("rank ") else f"rank {rank} · {name}"


def _read_api(folder: Run) -> pa.Table | None:
    path = folder.table_file(t.CUDA_API)
    if not t.present(folder, t.CUDA_API):
        return None
    columns = ["start_ns", "end_ns", "name", "api", "kind", "pid", "tid", "thread_name", "correlation_id"]
    with pq.ParquetFile(path, memory_map=True, read_dictionary=["name", "api", "kind", "thread_name"]) as file:
        table = file.read(columns=columns)
    return table if table.num_rows else None


def thread_lanes(timeline: pa.Table, api: pa.Table | None = None) -> ThreadLanes | None:
    """The timeline's rows as lanes, in its order; a thread seen only in `api` gets an empty lane after them."""
    pid = as_array(timeline.column("pid"), np.int64)
    tid = as_array(timeline.column("tid"), np.int64)
    keys = pid * THREAD_KEY + tid
    uniq, first, lane = np.unique(keys, return_index=True, return_inverse=True)
    name_code, words = codes(timeline.column("thread_name"))
    lane_names = [thread_label(words[int(name_code[i])], int(tid[i]), int(pid[i])) for i in first]
    lane_pids, lane_tids = pid[first], tid[first]
    if api is not None:
        api_pid, api_tid = as_array(api.column("pid"), np.int64), as_array(api.column("tid"), np.int64)
        alone = np.flatnonzero(~np.isin(api_pid * THREAD_KEY + api_tid, uniq))
        _, at = np.unique(api_pid[alone] * THREAD_KEY + api_tid[alone], return_index=True)
        rows = alone[at]
        api_names, api_words = codes(api.column("thread_name"))
        lane_names += [thread_label(api_words[int(api_names[r])], int(api_tid[r]), int(api_pid[r])) for r in rows]
        lane_pids, lane_tids = np.concatenate([lane_pids, api_pid[rows]]), np.concatenate([lane_tids, api_tid[rows]])
    if not len(lane_names):
        return None
    source_code, sources = codes(timeline.column("source"))
    detail_code, details = codes(timeline.column("activity"))
    # (source, activity) pairs are few: the kind of each pair once, then every row through its pair
    pair = source_code * max(len(details), 1) + detail_code
    pairs, pair_of_row = np.unique(pair, return_inverse=True)
    kinds = [
        activity_kind(details[int(p % max(len(details), 1))], sources[int(p // max(len(details), 1))]) for p in pairs
    ]
    names = tuple(sorted(set(kinds), key=activity_priority))
    kind_code = np.array([names.index(k) for k in kinds] or [0], dtype=np.int64)
    return ThreadLanes(
        lane_names=lane_names,
        lane_pids=lane_pids.astype(np.int64),
        lane_tids=lane_tids.astype(np.int64),
        lane=lane.astype(np.int64).ravel(),
        start_ns=as_array(timeline.column("start_ns"), np.int64),
        end_ns=as_array(timeline.column("end_ns"), np.int64),
        code=kind_code[pair_of_row.ravel()] if len(pair) else np.zeros(0, dtype=np.int64),
        names=names,
        detail_code=detail_code,
        details=details,
        source_code=source_code,
        sources=sources,
    )


def api_calls(api: pa.Table | None, lanes: ThreadLanes | None) -> ApiCalls | None:
    """Every API call on its thread's lane (`thread_lanes` gave every calling thread one)."""
    if api is None or lanes is None:
        return None
    keys = as_array(api.column("pid"), np.int64) * THREAD_KEY + as_array(api.column("tid"), np.int64)
    lane_keys = lanes.lane_pids * THREAD_KEY + lanes.lane_tids
    order = np.argsort(lane_keys)
    lane = order[np.searchsorted(lane_keys[order], keys).clip(0, len(order) - 1)]
    start = as_array(api.column("start_ns"), np.int64)
    sort = np.argsort(start, kind="stable")
    name_code, names = codes(api.column("name"))
    api_code, apis = codes(api.column("api"))
    kind_code, kinds = codes(api.column("kind"))
    return ApiCalls(
        lane=lane[sort],
        start_ns=start[sort],
        end_ns=as_array(api.column("end_ns"), np.int64)[sort],
        name_code=name_code[sort],
        names=names,
        api_code=api_code[sort],
        apis=apis,
        kind_code=kind_code[sort],
        kinds=kinds,
        correlation_id=as_array(pc.fill_null(api.column("correlation_id"), -1), np.int64)[sort],
        row=sort.astype(np.int64),
        lanes=len(lanes.lane_names),
    )


def gpu_lanes(folder: Run) -> GpuLanes | None:
    """The GPU rows of a traced run: streams first, then NVTX depth rows."""
    parts: list[tuple[np.ndarray, ...]] = []  # (lane key, start, end, activity code, label, correlation, api row)
    labels: dict[str, int] = {}
    names = (*GPU_ACTIVITIES, *NVTX_ACTIVITIES)
    for table, label_column in zip(GPU_TABLES, ("name", "kind")):
        path = folder.table_file(table)
        if not t.present(folder, table):
            continue
        with pq.ParquetFile(path, memory_map=True, read_dictionary=[label_column]) as file:
            g = file.read(columns=["start_ns", "end_ns", "device", "stream", "correlation_id", label_column])
        if g.num_rows == 0:
            continue
        idx, words = codes(g.column(label_column))
        word_code = np.array([labels.setdefault(w, len(labels)) for w in words] or [0], dtype=np.int64)
        kind_code = np.array([names.index(gpu_activity(table, w)) for w in words] or [0], dtype=np.int64)
        api_row = np.full(g.num_rows, -1, dtype=np.int64)
        links = launch_links(folder, table)
        api_row[links.gpu_row] = links.api_row
        key = as_array(pc.fill_null(g.column("device"), 0), np.int64) * THREAD_KEY + as_array(
            g.column("stream"), np.int64
        )
        start, end = as_array(g.column("start_ns"), np.int64), as_array(g.column("end_ns"), np.int64)
        corr = as_array(pc.fill_null(g.column("correlation_id"), -1), np.int64)
        parts.append((key, start, end, kind_code[idx], word_code[idx], corr, api_row))
    streams = np.unique(np.concatenate([p[0] for p in parts])) if parts else np.zeros(0, dtype=np.int64)
    lane_names = [stream_label(int(k // THREAD_KEY), int(k % THREAD_KEY)) for k in streams]
    lanes = [np.searchsorted(streams, p[0]) for p in parts]
    nvtx_lanes = 0
    nvtx = _nvtx_rows(folder, labels, names.index(NVTX_ACTIVITIES[0]))
    if nvtx is not None:
        depth, part, row_names = nvtx
        nvtx_lanes = len(row_names)
        parts.append(part)
        lanes.append(len(lane_names) + depth)
        lane_names += row_names
    steps = _step_rows(folder, labels, names.index(NVTX_ACTIVITIES[0]))
    if steps is not None:
        depth, part, row_names = steps
        nvtx_lanes += len(row_names)
        parts.append(part)
        lanes.append(len(lane_names) + depth)
        lane_names += row_names
    if not parts:
        return None
    lane = np.concatenate(lanes).astype(np.int64)
    start = np.concatenate([p[1] for p in parts])
    order = np.lexsort((start, lane))
    column = [np.concatenate([p[i] for p in parts]).astype(np.int64)[order] for i in range(2, 7)]
    no_lane = np.full(nvtx_lanes, NVTX_LANE, dtype=np.int64)
    return GpuLanes(
        lane_names=lane_names,
        lane_device=np.concatenate([streams // THREAD_KEY, no_lane]),
        lane_stream=np.concatenate([streams % THREAD_KEY, no_lane]),
        lane=lane[order],
        start_ns=start[order],
        end_ns=column[0],
        code=column[1],
        names=names,
        label_code=column[2],
        labels=list(labels),
        correlation_id=column[3],
        api_row=column[4],
        nvtx_lanes=nvtx_lanes,
    )


def _nvtx_rows(
    folder: Run, labels: dict[str, int], first_code: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...], list[str]] | None:
    """NVTX ranges by nesting depth (each rank's apart, for a run of several ranks), every other range of a
    row in the second colour; the rows' names."""
    path = folder.table_file(t.NVTX)
    if not t.present(folder, t.NVTX):
        return None
    with pq.ParquetFile(path, memory_map=True, read_dictionary=["name"]) as file:
        wanted = ["start_ns", "end_ns", "name", "pid", "tid"]
        n = file.read(columns=[*wanted, *([schema.RANK] if schema.RANK in file.schema_arrow.names else [])])
    if n.num_rows == 0:
        return None
    start, end = as_array(n.column("start_ns"), np.int64), as_array(n.column("end_ns"), np.int64)
    thread = as_array(n.column("pid"), np.int64) * THREAD_KEY + as_array(n.column("tid"), np.int64)
    depth = nvtx_depth(start, end, thread)
    if schema.RANK in n.column_names:
        rank = as_array(pc.fill_null(n[schema.RANK], 0), np.int64)
    else:  # a run of one process
        rank = np.zeros(len(start), dtype=np.int64)
    ranks = np.unique(rank)
    levels = int(depth.max()) + 1
    if len(ranks) > 1:  # each rank's rows together, one above the other: `rank r · NVTX depth d`
        depth = np.searchsorted(ranks, rank) * levels + depth
        row_names = [f"rank {int(r)} · {nvtx_label(d)}" for r in ranks for d in range(levels)]
    else:
        row_names = [nvtx_label(d) for d in range(levels)]
    order = np.lexsort((start, depth))
    alternate = np.zeros(len(start), dtype=np.int64)
    alternate[order] = np.arange(len(order)) - np.searchsorted(depth[order], depth[order])
    idx, words = codes(n.column("name"))
    word_code = np.array([labels.setdefault(w, len(labels)) for w in words] or [0], dtype=np.int64)
    none = np.full(len(start), -1, dtype=np.int64)
    return depth, (depth, start, end, first_code + alternate % 2, word_code[idx], none, none), row_names


def launch_indices(calls: ApiCalls | None, gpu: GpuLanes | None) -> LaunchLinks | None:
    """Index pairs between the API calls and the GPU items they launched."""
    if calls is None or gpu is None or not (gpu.api_row >= 0).any():
        return None
    call_of_row = np.full(int(max(calls.row.max(initial=-1), gpu.api_row.max())) + 1, -1, dtype=np.int64)
    call_of_row[calls.row] = np.arange(len(calls.row))
    call_of_item = np.where(gpu.api_row >= 0, call_of_row[gpu.api_row.clip(0)], -1)
    item_of_call = np.full(len(calls.row), -1, dtype=np.int64)
    linked = np.flatnonzero(call_of_item >= 0)
    item_of_call[call_of_item[linked]] = linked
    return LaunchLinks(call_of_item, item_of_call)


def _step_rows(
    folder: Run, labels: dict[str, int], first_code: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...], list[str]] | None:
    """A run of several ranks: each rank's steps (the steps table) as a row `rank r · steps`, so each
    rank's step boundaries sit on the one time axis above its own lanes' neighbours."""
    if not folder.run_json.exists() or folder.read_record().world_size <= 1:
        return None
    steps = folder.samples(schema.STEPS_TABLE)
    if steps is None or steps.num_rows == 0:
        return None
    rank = as_array(steps[schema.RANK], np.int64)
    ranks = np.unique(rank)
    start = as_array(steps["start_ns"], np.int64)
    total = sum(as_array(steps[c], np.float64) for c in (schema.DATA_WAIT_S, schema.COMPUTE_S, schema.SYNC_S))
    end = start + np.rint(total * 1e9).astype(np.int64)
    words = [f"step {s}" for s in steps[schema.STEP_COLUMNS[1]].to_pylist()]
    word_code = np.array([labels.setdefault(w, len(labels)) for w in words], dtype=np.int64)
    row = np.searchsorted(ranks, rank)
    order = np.lexsort((start, row))
    alternate = np.zeros(len(start), dtype=np.int64)
    alternate[order] = np.arange(len(order)) - np.searchsorted(row[order], row[order])
    none = np.full(len(start), -1, dtype=np.int64)
    return (
        row,
        (row, start, end, first_code + alternate % 2, word_code, none, none),
        [f"rank {int(r)} · steps{_last_at(folder).get(int(r), '')}" for r in ranks],
    )


def _last_at(folder: Run) -> dict[int, str]:
    """Per rank, how often it arrived last at the collectives matched on every rank (the straggler summary,
    `analyzers.figures.straggler`), as a lane's name ends: ` (last at 5 of 8)`."""
    from analyzers.figures.straggler import straggler

    found = straggler(folder)
    if found is None or not found.summary:
        return {}
    return {r.rank: f" (last at {r.last} of {found.collectives})" for r in found.summary}
