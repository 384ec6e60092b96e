"""The lanes a timeline draws (`analyzers.timeline.lanes`) and the one thread timeline they come from: `analyze`'s
thread table, the Perfetto export and the viewer's lanes read the same rows (issue #25)."""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzers.ingest.pipeline import ingest_run
from analyzers.ingest.threads import sampler_intervals
from analyzers.summaries.rows import ApiRow
from analyzers.summaries.shares import OTHER, group_shares, other_label
from analyzers.timeline import chrome_trace, lanes
from analyzers.trace.tables import (
    ACTIVITY_IDLE,
    OSRT,
    OSRT_SCHEMA,
    SOURCE_NSYS,
    SOURCE_PYSPY,
    SOURCE_SAMPLER,
    THREAD_TIMELINE,
)
from tests.conftest import run_tracer
from tracer.core import trace_formats as tf
from tracer.core.runfolder import RunFolder
from viewer.data import load_run


def test_thread_samples_become_merged_segments() -> None:
    t = [0, 100, 200, 300, 400]
    samples = pa.table(
        {
            "t_ns": [x * 10_000_000 for x in t] * 2,
            "pid": [1] * 10,
            "tid": [1] * 5 + [2] * 5,
            "name": ["main"] * 5 + ["worker"] * 5,
            "user_s": [0, 1, 2, 2, 2] + [0, 0, 0, 0, 0.2],
            "system_s": [0.0] * 10,
        }
    )
    threads = lanes.thread_lanes(sampler_intervals(samples))
    assert threads is not None
    assert threads.lane_names == ["main (1)", "worker (2)"]
    activity = [threads.names[c] for c in threads.code.tolist()]
    segments = list(zip(threads.lane.tolist(), activity, threads.start_ns.tolist(), threads.end_ns.tolist()))
    assert segments == [
        (0, "busy", 0, 2_000_000_000),
        (0, "idle", 2_000_000_000, 4_000_000_000),
        (1, "idle", 0, 3_000_000_000),
        (1, "active", 3_000_000_000, 4_000_000_000),
    ]


def test_api_split_groups_small_functions() -> None:
    """The viewer's CUDA bars are `analyzers.summaries.shares.group_shares` over `cuda_api`'s rows as they are."""
    rows = [
        ApiRow("cudaLaunchKernel", 70.0, 7, 1, 7.0, 7.0, 7, 7, 0.0),
        ApiRow("cudaMemcpyAsync", 29.2, 3, 1, 3.0, 3.0, 3, 3, 0.0),
        ApiRow("cudaFree", 0.5, 1, 1, 1.0, 1.0, 1, 1, 0.0),
        ApiRow("cudaMalloc", 0.3, 1, 1, 1.0, 1.0, 1, 1, 0.0),
    ]
    names, grouped = group_shares({"run": rows})
    split = [(other_label() if n == OTHER else n, v) for n, v in zip(names, grouped["run"]) if v > 0]
    assert [name for name, _ in split] == ["cudaLaunchKernel", "cudaMemcpyAsync", "other (< 1 % each)"]
    assert abs(split[-1][1] - 0.8) < 1e-9


def _speedscope(pid: int, tid: int, start_s: float) -> dict[str, object]:
    return {
        "shared": {"frames": [{"name": "<module>"}, {"name": "train"}, {"name": "forward"}]},
        "profiles": [
            {
                "type": "sampled",
                "name": f'Process {pid} Thread {tid} "MainThread"',
                "unit": "seconds",
                "startValue": start_s,
                "endValue": start_s + 0.3,
                "samples": [[0, 1], [0, 1], [0, 1, 2], [0, 1]],
                "weights": [0.05, 0.05, 0.1, 0.1],
            }
        ],
    }


@pytest.fixture(scope="module")
def three_sources(tiny_pytorch_run: RunFolder, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    """A real run's sampler data, OS-runtime calls of its main thread (as nsys's OSRT table holds them) and
    a py-spy profile of it, ingested once."""
    path = tmp_path_factory.mktemp("three") / tiny_pytorch_run.path.name
    shutil.copytree(tiny_pytorch_run.path, path)
    folder = RunFolder(path)
    record = folder.read_record()
    pid = tid = record.worker_pid
    t0 = record.wall_start_ns + 200_000_000
    calls = [("pthread_cond_wait", 0, 40), ("read", 50, 55), ("ioctl", 60, 61), ("pthread_cond_wait", 70, 90)]
    osrt = pa.table(
        {
            "start_ns": [t0 + a * 1_000_000 for _, a, _ in calls],
            "end_ns": [t0 + b * 1_000_000 for _, _, b in calls],
            "name": [n for n, _, _ in calls],
            "pid": [pid] * len(calls),
            "tid": [tid] * len(calls),
            "thread_name": ["python"] * len(calls),
            "source": [SOURCE_NSYS] * len(calls),
        },
        schema=OSRT_SCHEMA,
    )
    pq.write_table(osrt, folder.table_path(OSRT))
    (folder.raw_dir / tf.PYSPY_START).write_text(f"{t0}\n")
    (folder.raw_dir / tf.PYSPY_OUTPUT).write_text(json.dumps(_speedscope(pid, tid, 0.0)))
    assert THREAD_TIMELINE in ingest_run(folder)
    (folder.raw_dir / tf.PYSPY_OUTPUT).unlink()  # parsed once, in the ingest: nothing reads it again
    return folder


def test_analyze_perfetto_and_viewer_read_the_same_timeline_rows(three_sources: RunFolder, tmp_path: Path) -> None:
    folder = three_sources
    rows = pq.read_table(folder.table_path(THREAD_TIMELINE)).to_pylist()
    assert {r["source"] for r in rows} == {SOURCE_SAMPLER, SOURCE_NSYS, SOURCE_PYSPY}
    names = {(r["pid"], r["tid"]): r["thread_name"] for r in rows}
    assert all(r["thread_name"] == names[(r["pid"], r["tid"])] for r in rows)  # one name per thread
    as_rows = Counter((r["tid"], r["start_ns"], r["end_ns"], r["activity"], r["source"]) for r in rows)

    # analyze --format json: its thread table is these rows summed per thread
    result = run_tracer("analyze", str(folder.path), "--format", "json")
    assert result.returncode == 0, result.stderr
    table = {(r["pid"], r["tid"]): r for r in json.loads(result.stdout)["threads"]}
    per: dict[tuple[int, int], dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for r in rows:
        per[(r["pid"], r["tid"])][r["source"]][r["activity"]] += r["end_ns"] - r["start_ns"]
    for key, sources in per.items():
        row = table[key]
        sampled = sources[SOURCE_SAMPLER]
        assert row["thread_name"] == names[key]
        assert row["active_ns"] == sum(ns for a, ns in sampled.items() if a != ACTIVITY_IDLE)
        assert row["osrt_ns"] == sum(sources[SOURCE_NSYS].values())
        assert row["pyspy_ns"] == sum(sources[SOURCE_PYSPY].values())
        if sources[SOURCE_NSYS]:
            assert row["top_osrt"] == sources[SOURCE_NSYS].most_common(1)[0][0] == "pthread_cond_wait"
        if sources[SOURCE_PYSPY]:
            assert row["top_python"] == sources[SOURCE_PYSPY].most_common(1)[0][0] == "train"

    # the Perfetto export: one slice per row on the thread's track, named by the viewer's lane label
    out = tmp_path / "trace.json"
    chrome_trace.export(folder, out)
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X" and e["pid"] == chrome_trace.THREADS_PID]
    # µs as the format wants them (a Unix time in µs keeps ~0.25 µs in a double): the same rows, each as exported
    exported = Counter((e["tid"], e["ts"], e["dur"], e["name"], e["cat"]) for e in slices)
    assert exported == Counter(
        {(tid, s / 1000, (e - s) / 1000, activity, source): n for (tid, s, e, activity, source), n in as_rows.items()}
    )
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["pid"] == chrome_trace.THREADS_PID}

    # the viewer: one segment per row, lanes labelled alike
    threads = load_run(folder.path).lanes.threads
    assert threads is not None
    drawn = Counter(
        (
            int(threads.lane_tids[lane]),
            start,
            end,
            threads.details[detail],
            threads.sources[source],
        )
        for lane, start, end, detail, source in zip(
            threads.lane.tolist(),
            threads.start_ns.tolist(),
            threads.end_ns.tolist(),
            threads.detail_code.tolist(),
            threads.source_code.tolist(),
        )
    )
    assert drawn == as_rows
    labels = dict(zip(threads.lane_tids.tolist(), threads.lane_names))
    assert all(tracks[tid] == label == lanes.thread_label(names[(pid, tid)], tid, pid) for (pid, tid) in names
               for label in [labels[tid]])  # fmt: skip
