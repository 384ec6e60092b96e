"""--trace cupti: argument checks and the library probe on CPU, the run folder's conversion after a run,
the worker's start failure, and (GPU only) a real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import TINY, require_framework, run_tracer
from tests.tracer.measure.tracing.helpers import require_gpu
from tests.tracer.measure.tracing.test_cupti_decode import _mixed, _write_run
from tracer.core.errors import UserError
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder, read_jsonl
from tracer.core.schema import CUPTI_LIBRARY_ENV, TRACE_CUPTI, TRACE_ENV
from tracer.measure.tracing.cupti import CUPTI_DIR, DECODE_FILE, CuptiBackend, install_hint, probe


def test_cpu_run_is_refused_in_one_line(tmp_path: Path) -> None:
    result = run_tracer(
        "profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--trace", "cupti", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "--device gpu" in result.stderr
    assert not list(tmp_path.iterdir()), "no run folder for a refused run"


def test_a_missing_libcupti_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CUPTI_LIBRARY_ENV, "/no/such/libcupti.so.13")
    spec = RunSpec(framework="pytorch", model="alexnet", dataset="small", device="gpu")
    with pytest.raises(UserError) as e:
        CuptiBackend().check(spec, sys.executable)
    message = str(e.value)
    assert "cannot load /no/such/libcupti.so.13" in message and "pip install" in message
    assert sys.executable in message and "\n" not in message


def test_the_probe_finds_the_pytorch_envs_libcupti() -> None:
    from tests.tracer.measure.tracing.cupti_here import libcupti_path
    from tracer.measure.environments import env_python

    libcupti_path()  # skips where the PyTorch env has none
    found = probe(str(env_python("pytorch")))
    assert found["error"] is None and "libcupti.so" in found["library"] and found["version"] >= 120000


def test_install_hint_matches_the_cuda_of_the_env() -> None:
    assert "nvidia-cuda-cupti==13.0.*" in install_hint("/x/python", "13.0.85")
    assert "nvidia-cuda-cupti-cu12==12.8.*" in install_hint("/x/python", "12.8.90")
    assert "<CUDA major.minor>" in install_hint("/x/python", None)


def test_finish_turns_the_buffers_into_records_and_says_what_was_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = RunFolder(tmp_path)
    _write_run(tmp_path / CUPTI_DIR, [_mixed(1), _mixed(3)], index=[{"file": None, "valid_bytes": 0, "dropped": 4}])
    kept = CuptiBackend().finish(folder)
    assert f"{CUPTI_DIR}/records-00000.parquet" in kept and f"{CUPTI_DIR}/records-00001.parquet" in kept
    assert f"{CUPTI_DIR}/meta.json" in kept and f"{CUPTI_DIR}/{DECODE_FILE}" in kept
    assert all((tmp_path / k).exists() for k in kept)
    assert pq.read_table(tmp_path / CUPTI_DIR / "records-00001.parquet").num_rows == 15
    decoded = json.loads((tmp_path / CUPTI_DIR / DECODE_FILE).read_text())
    assert decoded["records"] == 20 and decoded["dropped"] == 4 and decoded["errors"] == []
    assert "CUPTI dropped 4 records" in capsys.readouterr().err


def test_a_worker_that_cannot_load_cupti_fails_at_start_with_exit_4(tmp_path: Path) -> None:
    """TRACER_TRACE=cupti where no libcupti loads: an `error` event and exit 4, before training."""
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "worker_config.json").write_text(
        json.dumps({"framework": "pytorch", "model": "alexnet", "dataset_dir": str(tmp_path), "device": "gpu"})
    )
    from tracer.measure.process import worker_pythonpath

    env = dict(
        os.environ,
        PYTHONPATH=str(worker_pythonpath()),
        **{TRACE_ENV: TRACE_CUPTI, CUPTI_LIBRARY_ENV: "/no/libcupti.so"},
    )
    done = subprocess.run(
        [sys.executable, "-m", "tracer.worker", str(run_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4, done.stderr
    errors = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "error"]
    assert errors and errors[0]["stage"] == "trace" and "cannot start --trace cupti" in errors[0]["error"]
    assert "cannot load /no/libcupti.so" in errors[0]["error"]


@pytest.mark.gpu
def test_real_cupti_run_on_gpu(make_run: Callable[..., RunFolder]) -> None:
    require_gpu()
    require_framework("pytorch")
    folder = make_run("pytorch", "--device", "gpu", "--batch", "8", "--trace", "cupti")
    record = folder.read_record()
    assert record.outcome.status is RunStatus.OK, record.outcome
    assert list((folder.raw_dir / "cupti").glob("records-*.parquet"))
    assert not list((folder.raw_dir / "cupti").glob("buf-*.bin"))
    overhead = [e for e in folder.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0]["records"] > 0 and overhead[0]["dropped"] == 0 and overhead[0]["errors"] == []
    decoded = json.loads((folder.raw_dir / "cupti" / DECODE_FILE).read_text())
    assert decoded["records"] == overhead[0]["records"] and decoded["unresolved_kernels"] == 0
    assert folder.table_path("cuda_api").exists() and folder.table_path("kernels").exists()
