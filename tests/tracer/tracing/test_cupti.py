"""--trace cupti: argument checks on CPU, the collector driven by a fake binding, and (GPU only) a real run."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import TINY, require_framework, run_tracer
from tests.tracer.tracing.helpers import FakeCupti, api, kernel, memcpy, memset, require_gpu
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder, read_jsonl
from tracer.core.schema import TRACE_CUPTI, TRACE_ENV
from tracer.tracing.cupti import CuptiBackend, convert_batches, install_hint
from tracer.worker import cupti_trace
from tracer.worker.reporting import Reporter

RT, DRV = int(FakeCupti.ActivityKind.RUNTIME), int(FakeCupti.ActivityKind.DRIVER)
LAUNCH = int(FakeCupti.runtime_api_trace_cbid.cudaLaunchKernel_v7000)
MALLOC = int(FakeCupti.runtime_api_trace_cbid.cudaMalloc_v3020)
CU_LAUNCH = int(FakeCupti.driver_api_trace_cbid.cuLaunchKernel)


def test_cpu_run_is_refused_in_one_line(tmp_path: Path) -> None:
    result = run_tracer(
        "profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--trace", "cupti", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "--device gpu" in result.stderr
    assert not list(tmp_path.iterdir()), "no run folder for a refused run"


def test_missing_cupti_python_says_how_to_install_it() -> None:
    spec = RunSpec(framework="pytorch", model="alexnet", dataset="small", device="gpu")
    with pytest.raises(UserError) as e:
        CuptiBackend().check(spec, sys.executable)  # the tool venv has no cupti-python
    message = str(e.value)
    assert "cupti-python" in message and "pip install" in message and sys.executable in message
    assert "\n" not in message


def test_install_hint_matches_the_cuda_of_the_env() -> None:
    assert "cupti-python==13.0.*" in install_hint("/x/python", "13.0.85")
    assert "<CUDA major.minor>" in install_hint("/x/python", None)


def test_worker_module_is_stdlib_only_and_python38() -> None:
    source = Path(cupti_trace.__file__).read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module != "tracer.worker.schema":  # worker-side names
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"json", "os", "threading", "time", "cupti"}, imported


def _collect(tmp_path: Path) -> tuple[FakeCupti, cupti_trace.CuptiCollector, Path]:
    fake = FakeCupti()
    raw = tmp_path / "raw"
    reporter = Reporter(str(tmp_path / "events.jsonl"))
    collector = cupti_trace.CuptiCollector(str(raw / "cupti"), reporter, cupti_module=fake)
    collector.start()
    return fake, collector, raw / "cupti"


def test_collector_batches_records_and_shuts_down_in_order(tmp_path: Path) -> None:
    fake, collector, out = _collect(tmp_path)
    # noisy calls switched off at the source, after the activity kinds were enabled
    names = [c[0] for c in fake.calls]
    assert ("activity_enable_runtime_api", int(FakeCupti.runtime_api_trace_cbid.cudaGetDevice_v3020), 0) in fake.calls
    assert ("activity_enable_driver_api", int(FakeCupti.driver_api_trace_cbid.cuCtxGetCurrent), 0) in fake.calls
    assert names.index("activity_enable_runtime_api") > max(i for i, n in enumerate(names) if n == "activity_enable")
    assert ("set_thread_id_type", FakeCupti.ActivityThreadIdType.SYSTEM) in fake.calls

    # a full buffer from CUPTI's thread: written at once, not held
    fake.deliver(
        [
            api(RT, MALLOC, 100, 300, 1),
            api(RT, LAUNCH, 400, 450, 2),
            api(DRV, CU_LAUNCH, 410, 440, 2),
            kernel("void gemm<float, 128>(int, float*)", 500, 900, 2),
            memcpy(1, 320, 380, 1, 4096),
        ]
    )
    assert sorted(p.name for p in out.glob("batch-*.json")) == ["batch-00000.json"]
    # the rest comes with the final flush
    fake.pending = [api(RT, LAUNCH, 1000, 1040, 3), memset(1100, 1110, 4, 64)]
    collector.stop()
    collector.stop()  # idempotent

    tail = [c[0] for c in fake.calls][-7:]
    assert tail == ["activity_disable"] * 5 + ["activity_flush_all", "finalize"]
    assert sorted(p.name for p in out.glob("batch-*.json")) == ["batch-00000.json", "batch-00001.json"]
    events = list(read_jsonl(tmp_path / "events.jsonl"))
    (overhead,) = [e for e in events if e["kind"] == "trace_overhead"]
    assert overhead["records"] == 7 and overhead["batches"] == 2 and overhead["errors"] == []
    assert overhead["callback_cpu_s"] >= 0 and "cudaGetDevice_v3020" in overhead["filtered_calls"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["records"] == 7 and len(meta["clock"]) == 2

    # the tracer side turns the batches into the Parquet records the analyzers read
    (out / "batch-00002.json.tmp").write_text('{"cut short')  # what a crash mid-write leaves
    parquet = convert_batches(out)
    assert [p.name for p in parquet] == ["records-00000.parquet", "records-00001.parquet"]
    assert not list(out.glob("batch-*"))
    rows = pq.read_table(parquet[0]).to_pylist()
    assert [r["kind"] for r in rows] == ["runtime", "runtime", "driver", "kernel", "memcpy"]
    assert [r["name"] for r in rows][:3] == ["cudaMalloc_v3020", "cudaLaunchKernel_v7000", "cuLaunchKernel"]
    assert rows[3]["name"] == "void gemm<float, 128>(int, float*)" and rows[3]["stream"] == 7
    assert rows[4]["name"] == "Host-to-Device" and rows[4]["bytes"] == 4096
    assert rows[0]["tid"] == 77 and rows[0]["pid"] == 4242 and rows[0]["device"] is None


def test_analyzers_ingest_the_records_on_the_unix_clock(tmp_path: Path) -> None:
    from analyzers.ingest import cupti as ingest_cupti

    fake, collector, out = _collect(tmp_path)
    fake.pending = [api(RT, LAUNCH, 400, 450, 2), kernel("k", 500, 900, 2), memcpy(2, 950, 990, 3, 8)]
    collector.stop()
    convert_batches(out)
    offset = json.loads((out / "clock.json").read_text())["offset_ns"]
    assert offset == collector._clock[0]["unix_ns"] - FakeCupti.CUPTI_NOW_NS
    tables, _ = ingest_cupti.read_dir(out)
    api_rows = tables["cuda_api"].to_pylist()
    assert [r["name"] for r in api_rows] == ["cudaLaunchKernel_v7000"]
    assert api_rows[0]["start_ns"] == 400 + offset and api_rows[0]["dur_ns"] == 50
    assert tables["kernels"].num_rows == 1 and tables["memcpy"].num_rows == 1


def test_a_batch_that_fails_is_reported_not_raised_into_cupti(tmp_path: Path) -> None:
    fake, collector, out = _collect(tmp_path)
    fake.deliver([api(RT, LAUNCH, 1, 2, 1), object()])  # a record without `kind`
    collector.stop()
    assert collector.errors and "AttributeError" in collector.errors[0]


def test_worker_without_cupti_fails_at_start_with_exit_4(tmp_path: Path) -> None:
    """TRACER_TRACE=cupti in an interpreter without cupti-python: an `error` event and exit 4, before training."""
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "worker_config.json").write_text(
        json.dumps({"framework": "pytorch", "model": "alexnet", "dataset_dir": str(tmp_path), "device": "gpu"})
    )
    from tracer.runner import worker_pythonpath

    env = dict(os.environ, PYTHONPATH=str(worker_pythonpath()), **{TRACE_ENV: TRACE_CUPTI})
    done = subprocess.run(
        [sys.executable, "-m", "tracer.worker", str(run_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4, done.stderr
    errors = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "error"]
    assert errors and errors[0]["stage"] == "trace" and "cannot start --trace cupti" in errors[0]["error"]


@pytest.mark.gpu
def test_real_cupti_run_on_gpu(make_run: Callable[..., RunFolder]) -> None:
    require_gpu()
    require_framework("pytorch")
    folder = make_run("pytorch", "--device", "gpu", "--batch", "8", "--trace", "cupti")
    record = folder.read_record()
    assert record.outcome.status is RunStatus.OK, record.outcome
    assert list((folder.raw_dir / "cupti").glob("records-*.parquet"))
    overhead = [e for e in folder.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0]["records"] > 0
    assert folder.table_path("cuda_api").exists() and folder.table_path("kernels").exists()


BINDING_CHECK = """
import json
from cupti import cupti as c
from tracer.worker import cupti_trace as t
missing = [k for k in t.KINDS if not hasattr(c.ActivityKind, k)]
missing += [n for n in t.NOISY_RUNTIME if not hasattr(c.runtime_api_trace_cbid, n)]
missing += [n for n in t.NOISY_DRIVER if not hasattr(c.driver_api_trace_cbid, n)]
for f in ("set_thread_id_type", "activity_register_callbacks", "activity_enable", "activity_disable",
          "activity_enable_runtime_api", "activity_enable_driver_api", "activity_flush_period",
          "activity_flush_all", "finalize", "get_timestamp", "get_callback_name"):
    if not hasattr(c, f):
        missing.append(f)
for cls, attrs in ((c.ActivityAPI, "kind cbid start end process_id thread_id correlation_id"),
                   (c.ActivityMemcpy6, "kind copy_kind start end device_id stream_id correlation_id bytes"),
                   (c.ActivityMemset4, "kind start end device_id stream_id correlation_id bytes")):
    missing += [cls.__name__ + "." + a for a in attrs.split() if not hasattr(cls, a)]
kernel = [getattr(c, n) for n in dir(c) if n.startswith("ActivityKernel")][-1]
missing += [kernel.__name__ + "." + a for a in "name start end device_id stream_id correlation_id".split()
            if not hasattr(kernel, a)]
memcpy = {int(m): m.name for m in c.ActivityMemcpyKind if int(m) in t.MEMCPY_NAMES}
print(json.dumps({"missing": missing, "memcpy": memcpy}))
"""


def test_collector_uses_only_what_the_real_binding_has() -> None:
    """Runs where cupti-python is importable by the PyTorch env (the GPU machine; or
    TRACER_TEST_CUPTI_PATH=<unpacked wheel>): every kind, call id, function and field the collector
    uses exists, and CUPTI's memcpy kinds are numbered as MEMCPY_NAMES says. No GPU needed."""
    from tracer.environments import env_python
    from tracer.runner import worker_pythonpath

    python = env_python("pytorch")
    if not Path(python).exists():
        pytest.skip("no PyTorch environment here")
    path = os.pathsep.join(p for p in (os.environ.get("TRACER_TEST_CUPTI_PATH", ""), str(worker_pythonpath())) if p)
    done = subprocess.run(
        [str(python), "-c", BINDING_CHECK], env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True
    )
    if "No module named 'cupti'" in done.stderr:
        pytest.skip(
            "cupti-python is not installed in the PyTorch env (set TRACER_TEST_CUPTI_PATH to an unpacked wheel)"
        )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["missing"] == []
    short = {"HTOD": "Host-to-Device", "DTOH": "Device-to-Host", "DTOD": "Device-to-Device", "PTOP": "Peer-to-Peer"}
    for value, name in found["memcpy"].items():
        if name in short:
            assert cupti_trace.MEMCPY_NAMES[int(value)] == short[name]


def test_a_start_that_fails_half_way_switches_cupti_off_again(tmp_path: Path) -> None:
    class Failing(FakeCupti):
        def activity_enable_driver_api(self, cbid: int, enable: int) -> None:
            raise RuntimeError("CUPTI_ERROR_INVALID_PARAMETER")

    fake = Failing()
    collector = cupti_trace.CuptiCollector(str(tmp_path / "cupti"), Reporter(str(tmp_path / "e.jsonl")), fake)
    with pytest.raises(RuntimeError, match="INVALID_PARAMETER"):
        collector.start()
    assert [c[0] for c in fake.calls][-6:] == ["activity_disable"] * 5 + ["finalize"]
    calls = len(fake.calls)
    collector.stop()  # nothing left to stop
    assert len(fake.calls) == calls
