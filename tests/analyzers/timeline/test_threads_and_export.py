"""Thread timelines (sampler from a real tiny PyTorch run, nsys OSRT, py-spy speedscope), the Chrome
trace export, and the import/analyze/export-trace CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq

from analyzers.ingest.threads import ACTIVE_FRACTION
from analyzers.summaries import threads
from analyzers.timeline import chrome_trace
from analyzers.trace.tables import ACTIVITY_IDLE, CUDA_API, KERNELS, SAMPLER_ACTIVITIES, SOURCE_SAMPLER
from tests.analyzers.conftest import NSYS_FILES
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


def test_sampler_timeline_from_a_real_run(tiny_pytorch_run: RunFolder) -> None:
    record = tiny_pytorch_run.read_record()
    samples = tiny_pytorch_run.samples("threads")
    assert samples is not None and samples.num_rows
    timeline = threads.thread_timeline(tiny_pytorch_run)
    sampled = timeline.filter([s == SOURCE_SAMPLER for s in timeline["source"].to_pylist()])
    assert sampled.num_rows > 0 and set(sampled["activity"].to_pylist()) <= set(SAMPLER_ACTIVITIES)
    cpu = sampled.filter([a != ACTIVITY_IDLE for a in sampled["activity"].to_pylist()])
    assert cpu.num_rows > 0
    assert record.worker_pid in set(cpu["pid"].to_pylist())
    for s, e, a in zip(sampled["start_ns"].to_pylist(), sampled["end_ns"].to_pylist(), sampled["activity"].to_pylist()):
        assert record.wall_start_ns - 10**9 <= s <= e <= (record.wall_end_ns or e) + 10**9
        assert s < e or a == ACTIVITY_IDLE  # zero-length: a thread seen at one sample only
    # every busy or active interval is one where the thread's CPU time grew between two samples; an idle
    # one (kept: the thread existed and slept) grew by less than ACTIVE_FRACTION of a core
    by_tid: dict[int, list[tuple[int, float]]] = {}
    for r in samples.to_pylist():
        by_tid.setdefault(r["tid"], []).append((r["t_ns"], r["user_s"] + r["system_s"]))
    for r in sampled.to_pylist():
        pts = sorted(by_tid[r["tid"]])
        inside = [c for t, c in pts if r["start_ns"] <= t <= r["end_ns"]]
        if r["start_ns"] == r["end_ns"]:
            assert len(pts) == 1
        elif r["activity"] == ACTIVITY_IDLE:
            assert inside[-1] - inside[0] < ACTIVE_FRACTION * (r["end_ns"] - r["start_ns"]) / 1e9
        else:
            assert inside[-1] > inside[0]
    summary = threads.thread_summary(tiny_pytorch_run)
    assert summary[0].cpu_s > 0 and summary[0].active_ns > 0
    # a phase counts only its own CPU time: the second epoch's is less than the whole run's
    epochs = tiny_pytorch_run.epochs()
    second = {(r.pid, r.tid): r for r in threads.thread_summary(tiny_pytorch_run, epochs[1].start_ns, epochs[1].end_ns)}
    main = summary[0]
    assert 0 < second[(main.pid, main.tid)].cpu_s < main.cpu_s
    assert second[(main.pid, main.tid)].active_ns <= epochs[1].end_ns - epochs[1].start_ns


def test_osrt_timeline_from_2021_export(ingested: dict[str, RunFolder], real_fixtures: Path) -> None:
    folder = ingested["extra-p/ex-gpu.s10.sqlite"]
    timeline = threads.thread_timeline(folder)
    con = sqlite3.connect(f"file:{real_fixtures / 'extra-p/ex-gpu.s10.sqlite'}?mode=ro", uri=True)
    (n,) = con.execute("SELECT count(*) FROM OSRT_API").fetchone()
    con.close()
    assert timeline.num_rows == n == 1288
    assert set(timeline["source"].to_pylist()) == {"nsys"}
    names = {r.thread_name for r in threads.thread_summary(folder)}
    assert any(names)


def test_pyspy_speedscope_timeline(tmp_path: Path) -> None:
    folder = RunFolder.create(tmp_path, "r")
    (folder.raw_dir / "pyspy.start_ns").write_text("1000000000\n")
    doc = {
        "shared": {"frames": [{"name": "<module>"}, {"name": "train"}, {"name": "forward"}]},
        "profiles": [
            {
                "type": "sampled",
                "name": 'Process 42 Thread 4242 "MainThread"',
                "unit": "seconds",
                "startValue": 0,
                "endValue": 0.03,
                "samples": [[0, 1], [0, 1], [0, 1, 2]],
                "weights": [0.01, 0.01, 0.01],
            }
        ],
    }
    (folder.raw_dir / "pyspy.speedscope.json").write_text(json.dumps(doc))
    rows = threads.thread_timeline(folder).to_pylist()
    assert [(r["activity"], r["start_ns"], r["end_ns"]) for r in rows] == [
        ("train", 1_000_000_000, 1_020_000_000),
        ("forward", 1_020_000_000, 1_030_000_000),
    ]
    assert rows[0]["tid"] == 4242 and rows[0]["pid"] == 42 and rows[0]["thread_name"] == "MainThread"
    assert threads.thread_summary(folder)[0].top_python == "train"


def test_chrome_trace_export(ingested: dict[str, RunFolder], tmp_path: Path) -> None:
    folder = ingested[NSYS_FILES[0]]
    out = tmp_path / "trace.json"
    n = chrome_trace.export(folder, out)
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    assert len(events) == n
    api = [e for e in events if e["ph"] == "X" and e["cat"].startswith("cuda_")]
    assert len(api) == pq.read_table(folder.table_path(CUDA_API)).num_rows
    kern = [e for e in events if e.get("cat") == "kernel"]
    assert len(kern) == pq.read_table(folder.table_path(KERNELS)).num_rows
    assert any(e.get("cat") == "nvtx" and e["name"] == "step0" for e in events)
    assert any(e.get("cat") == "nsys" for e in events)  # OSRT thread activity


def test_cli_import_analyze_export(real_fixtures: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    src = real_fixtures / "extra-p/con_kernel.sqlite"
    imp = run_tracer("import", str(src), "--out", str(runs))
    assert imp.returncode == 0, imp.stderr
    (run,) = [p for p in runs.iterdir()]
    assert (run / "raw" / src.name).exists() and (run / "cuda_api.parquet").exists()
    record = json.loads((run / "run.json").read_text())
    assert record["measurement"]["framework"] == "imported" and record["workload"]["kind"] == "imported"
    res = run_tracer("analyze", run.name, "--runs", str(runs), "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["cuda_api"][0]["name"] == "cudaEventSynchronize" and data["cuda_api"][0]["total_ns"] == 258743116
    assert len(data["kernels"]) > 0
    csv_out = run_tracer("analyze", str(run), "--format", "csv")
    assert csv_out.returncode == 0 and "cuda_api,cudaEventSynchronize" in csv_out.stdout
    table = run_tracer("analyze", str(run))
    assert table.returncode == 0 and "cudaStreamCreate" in table.stdout
    bad_phase = run_tracer("analyze", str(run), "--phase", "epoch 9")
    assert bad_phase.returncode == 2 and len(bad_phase.stderr.strip().splitlines()) == 1
    exp = run_tracer("export-trace", str(run), str(tmp_path / "t.json"))
    assert exp.returncode == 0, exp.stderr
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
