"""--trace torch (PyTorch profiler) and --pyspy: argument checks, and one real tiny CPU run with both."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable

import pytest

from tests.conftest import TINY, run_tracer
from tests.tracer.measure.tracing.helpers import require_gpu
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.measure.tracing.torch_profiler import TorchProfilerBackend


def test_torch_trace_is_pytorch_only() -> None:
    spec = RunSpec(framework="tensorflow", model="alexnet", dataset="small")
    with pytest.raises(UserError, match="--framework pytorch"):
        TorchProfilerBackend().check(spec)
    TorchProfilerBackend().check(RunSpec(framework="pytorch", model="alexnet", dataset="small"))


@pytest.mark.parametrize("framework", ["tensorflow", "mxnet", "paddle"])
def test_cli_refuses_torch_trace_for_other_frameworks(framework: str, tmp_path: pytest.TempPathFactory) -> None:
    result = run_tracer(
        "profile", "--framework", framework, "--model", "alexnet", *TINY, "--trace", "torch", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "--trace torch" in result.stderr


def test_nsys_sampling_needs_nsys(tmp_path: pytest.TempPathFactory) -> None:
    result = run_tracer("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--nsys-sampling")
    assert result.returncode == 2 and "--nsys-sampling" in result.stderr


@pytest.fixture(scope="module")
def torch_pyspy_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    """One tiny real CPU run under the PyTorch profiler and py-spy (batch 8: two steps an epoch)."""
    return make_run("pytorch", "--epochs", "1", "--batch", "8", "--trace", "torch", "--pyspy")


def test_torch_profiler_on_cpu_writes_a_kineto_trace_that_is_ingested(torch_pyspy_run: RunFolder) -> None:
    folder = torch_pyspy_run
    record = folder.read_record()
    assert record.outcome.status is RunStatus.OK, record.outcome
    assert "raw/kineto.json.gz" in record.trace_files
    with gzip.open(folder.path / "raw/kineto.json.gz", "rt") as f:
        trace = json.load(f)
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any(n.startswith("aten::") for n in names), "CPU operators are in the trace"
    overhead = [e for e in folder.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0]["backend"] == "torch" and overhead[0]["activities"] == ["CPU"]
    meta = json.loads((folder.path / "trace_meta.json").read_text())
    assert "kineto" in meta, "the CLI ingested the trace"
    assert (folder.raw_dir / "ingest.log").read_text().startswith("ingested:")


def test_pyspy_records_the_worker_threads(torch_pyspy_run: RunFolder) -> None:
    from analyzers.summaries.threads import thread_timeline

    folder = torch_pyspy_run
    record = folder.read_record()
    assert "raw/pyspy.speedscope.json" in record.trace_files
    doc = json.loads((folder.path / "raw/pyspy.speedscope.json").read_text())
    assert doc["profiles"] and any(p.get("samples") for p in doc["profiles"])
    assert int((folder.path / "raw/pyspy.start_ns").read_text()) >= record.wall_start_ns
    timeline = thread_timeline(folder).to_pylist()
    pyspy_rows = [r for r in timeline if r["source"] == "pyspy"]
    assert pyspy_rows and {r["pid"] for r in pyspy_rows} <= {record.worker_pid, -1}


@pytest.mark.gpu
def test_torch_profiler_on_gpu_has_cuda_activity(make_run: Callable[..., RunFolder]) -> None:
    require_gpu()
    folder = make_run("pytorch", "--device", "gpu", "--batch", "8", "--trace", "torch")
    assert folder.read_record().outcome.status is RunStatus.OK
    overhead = [e for e in folder.events() if e["kind"] == "trace_overhead"]
    assert overhead[0]["activities"] == ["CPU", "CUDA"]
    assert folder.table_path("cuda_api").exists() and folder.table_path("kernels").exists()
