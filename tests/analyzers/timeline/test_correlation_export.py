"""Launch-to-GPU links (analyzers.trace.correlation) and the flow events, per-stream tracks and operator events
that `export-trace` writes for Perfetto, checked on every real fixture trace."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzers.ingest.pipeline import ingest_file
from analyzers.timeline import chrome_trace
from analyzers.timeline.gpu_timeline import stream_label
from analyzers.trace.correlation import GPU_TABLES, launch_links
from analyzers.trace.tables import CUDA_API, KERNELS, MEMCPY, OPERATORS
from tests.analyzers.conftest import KINETO_FILES, NSYS_FILES
from tracer.core.runfolder import RunFolder

GPU_CATS = set(chrome_trace.GPU_CATEGORY.values())


def _pairs_by_hand(folder: RunFolder) -> int:
    """Launch/GPU-operation pairs of a one-process trace, counted in plain Python from the tables."""
    api = pq.read_table(folder.table_path(CUDA_API), columns=["pid", "correlation_id", "start_ns"]).to_pylist()
    assert len({r["pid"] for r in api}) == 1  # one process: a correlation id names one call
    launched_at = {r["correlation_id"]: r["start_ns"] for r in api}
    n = 0
    for table in GPU_TABLES:
        if folder.table_path(table).exists():
            for r in pq.read_table(folder.table_path(table), columns=["correlation_id", "start_ns"]).to_pylist():
                at = launched_at.get(r["correlation_id"])
                n += at is not None and at <= r["start_ns"]
    return n


@pytest.mark.parametrize("rel", NSYS_FILES + KINETO_FILES)
def test_flows_tie_every_launch_to_its_gpu_operation(rel: str, ingested: dict[str, RunFolder], tmp_path: Path) -> None:
    folder = ingested[rel]
    out = tmp_path / "trace.json"
    n = chrome_trace.export(folder, out)
    events = json.loads(out.read_text())["traceEvents"]
    assert len(events) == n
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == _pairs_by_hand(folder) > 0
    assert starts.keys() == ends.keys()
    assert all(e["cat"] == e["name"] == chrome_trace.FLOW_CATEGORY for e in [*starts.values(), *ends.values()])
    gpu_slices = {(e["pid"], e["tid"], e["ts"]) for e in events if e["ph"] == "X" and e["cat"] in GPU_CATS}
    api_slices = {(e["pid"], e["tid"], e["ts"]) for e in events if e["ph"] == "X" and e["cat"].startswith("cuda_")}
    for flow_id, s in starts.items():
        f = ends[flow_id]
        assert s["ts"] <= f["ts"]
        assert f["bp"] == "e" and (f["pid"], f["tid"], f["ts"]) in gpu_slices  # bound to a kernel or copy
        assert (s["pid"], s["tid"], s["ts"]) in api_slices  # starts on its launch call
    # one track per stream, named, on the device's process track
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for pid, tid, _ in gpu_slices:
        assert names[(pid, tid)] == stream_label(pid - chrome_trace.GPU_PID_BASE, tid)


@pytest.mark.parametrize("rel", KINETO_FILES)
def test_kineto_operator_events_are_exported(rel: str, ingested: dict[str, RunFolder], tmp_path: Path) -> None:
    folder = ingested[rel]
    chrome_trace.export(folder, tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == chrome_trace.OPERATOR_CATEGORY]
    table = pq.read_table(folder.table_path(OPERATORS))
    assert len(ops) == table.num_rows > 0
    assert Counter(e["name"] for e in ops) == Counter(table.column("name").to_pylist())


def test_two_processes_reusing_correlation_ids(real_fixtures: Path, tmp_path: Path) -> None:
    """nsys-ai's 2-GPU trace: two processes number their calls independently; a kernel links only to a
    call of its own process, a copy only to the process that ran its device's kernels."""
    folder = RunFolder(tmp_path)
    ingest_file(real_fixtures / "nsys-ai" / "h100_2gpu_1s.sqlite", folder)
    api = pq.read_table(folder.table_path(CUDA_API), columns=["pid", "correlation_id", "start_ns"])
    kernels = pq.read_table(folder.table_path(KERNELS), columns=["pid", "device", "correlation_id", "start_ns"])
    assert len(set(api.column("pid").to_pylist())) == 2
    links = launch_links(folder, KERNELS)
    a, k = api.to_pylist(), kernels.to_pylist()
    by_key = {(r["pid"], r["correlation_id"]) for r in a}
    expected = sum((r["pid"], r["correlation_id"]) in by_key for r in k)
    assert len(links) == expected > 0
    for i, j in zip(links.api_row.tolist(), links.gpu_row.tolist()):
        assert a[i]["pid"] == k[j]["pid"] and a[i]["correlation_id"] == k[j]["correlation_id"]
        assert a[i]["start_ns"] <= k[j]["start_ns"]
    device_pid = {r["device"]: r["pid"] for r in k}
    copies = pq.read_table(folder.table_path(MEMCPY), columns=["device", "correlation_id", "start_ns"]).to_pylist()
    copy_links = launch_links(folder, MEMCPY)
    assert len(copy_links) > 0
    for i, j in zip(copy_links.api_row.tolist(), copy_links.gpu_row.tolist()):
        assert a[i]["pid"] == device_pid[copies[j]["device"]]
        assert a[i]["correlation_id"] == copies[j]["correlation_id"] and a[i]["start_ns"] <= copies[j]["start_ns"]
