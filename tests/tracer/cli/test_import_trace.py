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
