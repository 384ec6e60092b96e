"""`tracer import`: labels (which framework and model made a trace), run ids that keep the file's
whole stem, bare-array Chrome traces, and ROCm traces named as HIP."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs


def test_import_with_labels(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz"
    result = run_tracer("import", str(trace), "--framework", "pytorch", "--model", "alexnet", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.imported is not None and record.imported.model == "alexnet"
    assert (record.measurement.framework, record.measurement.device) == ("pytorch", "gpu")
    assert folder.table_path("cuda_api").exists()


def test_import_rejects_unknown_framework_labels(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz"
    result = run_tracer("import", str(trace), "--framework", "caffe", "--out", str(tmp_path))
    assert result.returncode == 2 and "unknown framework 'caffe'" in result.stderr
    assert not list(tmp_path.iterdir())


def test_kineto_trace_is_pytorch_and_show_says_what_was_not_recorded(real_fixtures: Path, tmp_path: Path) -> None:
    """Kineto is PyTorch's profiler: an unlabelled Kineto import is a PyTorch run; its batch and epochs
    were not recorded, and `show` says so instead of printing batch 1 and epochs 0/1."""
    trace = real_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.measurement.framework == "pytorch" and record.spec is None  # no made-up built-in spec
    assert record.imported is not None and record.imported.batch is None
    shown = run_tracer("show", str(folder.path))
    assert shown.returncode == 0, shown.stderr
    assert "not recorded" in shown.stdout and "batch 1" not in shown.stdout and "0/1" not in shown.stdout


def test_kineto_trace_with_recorded_shapes_names_its_batch(real_fixtures: Path, tmp_path: Path) -> None:
    """The 2021 trace was taken with record_shapes: its first convolution's input is [32, 3, 224, 224],
    so the import knows batch 32 and `show`, `runs` and the viewer's label say it; epochs stay unknown."""
    trace = real_fixtures / "kineto-2021/worker0.1623143089861.pt.trace.json.gz"
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.imported is not None and record.imported.batch == 32
    assert record.imported.not_recorded == ("epochs",)
    stored = json.loads(folder.run_json.read_text())["workload"]  # run.json's form: the tagged workload
    assert stored["kind"] == "imported" and stored["batch"] == 32 and stored["format"] == "kineto"
    assert "spec" not in stored and "lr" not in json.dumps(stored)
    assert record.imported.source == str(trace.resolve())
    shown = run_tracer("show", str(folder.path)).stdout
    assert any(line.split()[:2] == ["batch", "32"] for line in shown.splitlines())
    listed = run_tracer("runs", "--runs", str(tmp_path)).stdout
    assert "32" in listed


def test_run_ids_keep_the_whole_stem(real_fixtures: Path, tmp_path: Path) -> None:
    """Two exports from one folder differ after the first dot: each keeps its whole stem, and `analyze`
    finds each by it (before: both were `imported-run_nsys2024`, and "matches 2 runs")."""
    trace = real_fixtures / "extra-p" / "con_kernel.sqlite"
    for name in ("run_nsys2024.5.sqlite", "run_nsys2024.6.sqlite", "my trace (1).sqlite"):
        shutil.copyfile(trace, tmp_path / name)
        assert run_tracer("import", str(tmp_path / name), "--out", str(tmp_path / "runs")).returncode == 0
    ids = [r.run_id for r in list_runs(tmp_path / "runs")]
    assert sorted(i.split("-imported-")[1] for i in ids) == ["my-trace-1", "run_nsys2024.5", "run_nsys2024.6"], ids
    found = run_tracer("analyze", "run_nsys2024.6", "--runs", str(tmp_path / "runs"), "--format", "json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["run"].endswith("run_nsys2024.6")


def _kineto_events(real_fixtures: Path) -> list[dict[str, Any]]:
    with gzip.open(real_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz", "rt") as f:
        events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


def test_bare_array_chrome_trace_is_read(real_fixtures: Path, tmp_path: Path) -> None:
    """The Chrome trace format's JSON Array Format: a bare list of events, whose closing `]` may be missing."""
    events = _kineto_events(real_fixtures)
    (tmp_path / "closed.json").write_text(json.dumps(events))
    (tmp_path / "open.json").write_text(json.dumps(events)[:-1] + ",\n")
    original = real_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz"
    results = [run_tracer("analyze", str(p), "--format", "json") for p in (original, *tmp_path.glob("*.json"))]
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    parsed = [json.loads(r.stdout) for r in results]
    assert parsed[0]["kernels"] and all(p["kernels"] == parsed[0]["kernels"] for p in parsed)
    assert all(p["cuda_api"] == parsed[0]["cuda_api"] for p in parsed)


def test_rocm_trace_is_named_hip(real_fixtures: Path, tmp_path: Path) -> None:
    """PyTorch on ROCm files hip* calls under Kineto's `cuda_runtime`: every table says HIP, not CUDA."""
    events = _kineto_events(real_fixtures)
    for e in events:
        if e.get("cat") == "cuda_runtime":
            e["name"] = "hip" + e["name"].removeprefix("cuda")
    trace = tmp_path / "rocm_mi210.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert run_tracer("import", str(trace), "--out", str(tmp_path / "runs")).returncode == 0
    table = run_tracer("analyze", "rocm_mi210", "--runs", str(tmp_path / "runs"))
    assert table.returncode == 0, table.stderr
    assert "HIP API" in table.stdout and "hipLaunchKernel" in table.stdout and "[HIP memcpy" in table.stdout
    # every family label says HIP (a kernel's own name, `CUDAFunctor_add`, is the kernel's and stays)
    assert "CUDA API" not in table.stdout and "[CUDA memcpy" not in table.stdout
    data = json.loads(run_tracer("analyze", "rocm_mi210", "--runs", str(tmp_path / "runs"), "--format", "json").stdout)
    assert data["api"] == "HIP" and all("CUDA" not in r["name"] for r in data["memcpy"])
    (folder,) = list_runs(tmp_path / "runs")
    from analyzers.comparison.compare import cuda_differences
    from viewer.data import load_run

    rows, notes = cuda_differences([folder, folder])
    assert rows[0].metric == "HIP API total time (whole run)" and notes == []  # one tracer: every call
    assert load_run(folder.path).api_label == "HIP API"


def test_compare_and_show_of_an_import_say_its_batch_is_not_recorded(real_fixtures: Path, tmp_path: Path) -> None:
    """Issue 51, item 3: an import whose trace records no batch is compared and shown as "batch not recorded",
    never as "batch 1" (the option's default that older records carried)."""
    trace = real_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"
    for name in ("a", "b"):
        assert run_tracer("import", str(trace), "--out", str(tmp_path / name)).returncode == 0
    (a,), (b,) = list_runs(tmp_path / "a"), list_runs(tmp_path / "b")
    compared = run_tracer("compare", str(a.path), str(b.path), "--no-group")
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert "batch not recorded" in compared.stdout and "batch 1" not in compared.stdout, compared.stdout
    as_json = run_tracer("compare", str(a.path), str(b.path), "--no-group", "--format", "json")
    assert as_json.returncode == 0 and '"batch": 1' not in as_json.stdout
    shown = run_tracer("show", str(a.path)).stdout
    assert any(line.split()[:3] == ["batch", "not", "recorded"] for line in shown.splitlines()), shown
