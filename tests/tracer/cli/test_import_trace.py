"""`tracer import` labels: an imported trace can say which framework and model made it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs


def test_import_with_labels(shared_fixtures: Path, tmp_path: Path) -> None:
    trace = shared_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz"
    result = run_tracer("import", str(trace), "--framework", "pytorch", "--model", "alexnet", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path)
    spec = folder.read_record().spec
    assert (spec.framework, spec.model, spec.device) == ("pytorch", "alexnet", "gpu")
    assert folder.table_path("cuda_api").exists()


def test_import_rejects_unknown_framework_labels(shared_fixtures: Path, tmp_path: Path) -> None:
    trace = shared_fixtures / "hta" / "benchmark_result_2869224_1695835535_trace.json.gz"
    result = run_tracer("import", str(trace), "--framework", "caffe", "--out", str(tmp_path))
    assert result.returncode == 2 and "unknown framework 'caffe'" in result.stderr
    assert not list(tmp_path.iterdir())


def test_kineto_trace_is_pytorch_and_show_says_what_was_not_recorded(shared_fixtures: Path, tmp_path: Path) -> None:
    """Kineto is PyTorch's profiler: an unlabelled Kineto import is a PyTorch run; its batch and epochs
    were not recorded, and `show` says so instead of printing batch 1 and epochs 0/1."""
    trace = shared_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (folder,) = list_runs(tmp_path)
    assert folder.read_record().spec.framework == "pytorch"
    shown = run_tracer("show", str(folder.path))
    assert shown.returncode == 0, shown.stderr
    assert "not recorded" in shown.stdout and "batch 1" not in shown.stdout and "0/1" not in shown.stdout


def test_kineto_trace_with_recorded_shapes_names_its_batch(shared_fixtures: Path, tmp_path: Path) -> None:
    """The 2021 trace was taken with record_shapes: its first convolution's input is [32, 3, 224, 224],
    so the import knows batch 32 and `show`, `runs` and the viewer's label say it; epochs stay unknown."""
    trace = shared_fixtures / "kineto-2021/worker0.1623143089861.pt.trace.json.gz"
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.spec.batch == 32
    assert record.knobs["not_recorded"] == ["epochs"]
    shown = run_tracer("show", str(folder.path)).stdout
    assert any(line.split()[:2] == ["batch", "32"] for line in shown.splitlines())
    listed = run_tracer("runs", "--runs", str(tmp_path)).stdout
    assert "32" in listed
