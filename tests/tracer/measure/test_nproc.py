"""`tracer profile --nproc 2`: PyTorch DistributedDataParallel on gloo, two ranks in one run. The slow
rank is named by arrival (rank 1's loader slowed on purpose: rank 0 waits longest in the all-reduce and
is not blamed); a crashing rank fails the run by name; Ctrl-C leaves no process and the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ctrl_c_reaches_python, require_framework, run_tracer
from tracer.core import schema
from tracer.core.runfolder import RunFolder, list_runs

SMALL = ["--framework", "pytorch", "--model", "mobilenet_v2", "--dataset", "small", "--image-size", "32"]
SMALL += ["--batch", "4", "--workers", "0", "--nproc", "2"]
SLOW_MS = 3000  # far above the compute noise of two ranks sharing a busy machine's cores


def _one_run(out: Path) -> RunFolder:
    (folder,) = list_runs(out)
    return folder


def test_two_ranks_train_and_the_slowed_one_is_the_straggler(tmp_path: Path) -> None:
    require_framework("pytorch")
    args = [*SMALL, "--epochs", "2", "--limit", "24", "--slow-loader", f"1:{SLOW_MS}"]
    result = run_tracer("profile", *args, "--out", str(tmp_path), timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    folder = _one_run(tmp_path)
    record = folder.read_record()
    assert record.outcome.status.value == "ok"
    assert [(r.rank, r.world_size, r.backend) for r in record.rank_infos] == [(0, 2, "gloo"), (1, 2, "gloo")]
    steps = folder.samples(schema.STEPS_TABLE)
    assert steps is not None
    ranks = steps[schema.RANK].to_pylist()
    assert ranks.count(0) == ranks.count(1) == 2 * 3  # 24 images, 12 per rank, batch 4, 2 epochs
    assert (folder.path / schema.RANKS_DIR / "1" / schema.SAMPLES_DIR / "process.parquet").exists()
    threads = folder.samples(schema.THREADS_TABLE.name)  # every rank's threads, each under its own pid
    assert threads is not None and {r.pid for r in record.rank_infos} <= set(threads[schema.PID].to_pylist())
    diagnosed = run_tracer("diagnose", str(folder.path), "--format", "json")
    assert diagnosed.returncode == 0, diagnosed.stderr
    verdicts = {v["rule"]: v for v in json.loads(diagnosed.stdout)["verdicts"]}
    straggler = verdicts["straggler"]
    assert straggler["fired"], (straggler["finding"], straggler["evidence"])
    assert "rank 1 arrived last" in straggler["finding"] and "caused by its data wait" in straggler["finding"]
    assert "rank 0 waited longest" in straggler["finding"]  # the waiting rank is named as early, not blamed
    assert "num_workers" in straggler["knob"]


def test_a_crashing_rank_fails_the_run_by_name(tmp_path: Path) -> None:
    require_framework("pytorch")
    args = [*SMALL, "--epochs", "2", "--limit", "8", "--inject-fault", "raise@1:1"]
    result = run_tracer("profile", *args, "--out", str(tmp_path), timeout=1200)
    assert result.returncode != 0
    record = _one_run(tmp_path).read_record()
    assert record.outcome.status.value == "failed", result.stderr[-3000:]
    assert record.outcome.cause.startswith("rank 1 failed: RuntimeError: injected fault"), record.outcome.cause


def test_ctrl_c_of_two_ranks_leaves_no_process_and_the_run_interrupted(tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "tracer", "profile", *SMALL, "--epochs", "50", "--limit", "16", "--out", str(out)]
    with (tmp_path / "tracer.log").open("wb") as log:
        tracer = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=ctrl_c_reaches_python)
    seen: dict[int, float] = {}
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and tracer.poll() is None:
            pids = [p for p in out.glob("*/worker.pid")] + [p for p in out.glob(f"*/{schema.RANKS_DIR}/*/worker.pid")]
            started = [p for p in out.glob(f"*/{schema.RANKS_DIR}/1/{schema.SAMPLES_DIR}/steps.csv")]
            for pid_file in pids:
                try:
                    proc = psutil.Process(int(pid_file.read_text()))
                    seen.setdefault(proc.pid, proc.create_time())
                except (ValueError, psutil.Error):
                    pass
            if len(seen) >= 2 and started:
                break
            time.sleep(0.2)
        assert len(seen) >= 2, f"both ranks did not start: {(tmp_path / 'tracer.log').read_text()[-2000:]}"
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=120)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    time.sleep(1)
    alive = [pid for pid, t in seen.items() if psutil.pid_exists(pid) and psutil.Process(pid).create_time() == t]
    alive = [pid for pid in alive if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"ranks outlived the run: {alive}"
    record = _one_run(out).read_record()
    assert record.outcome.status.value == "interrupted", record.outcome


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_other_frameworks_refuse_nproc_with_the_reason(framework: str, tmp_path: Path) -> None:
    result = run_tracer(
        "profile", "--framework", framework, "--model", "alexnet", "--dataset", "small", "--nproc", "2", "--out",
        str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "--nproc applies to pytorch only" in line and "DistributedDataParallel" in line
    assert not os.path.exists(tmp_path) or not any(tmp_path.iterdir())


def _gpu_count() -> int:
    """GPUs nvidia-smi lists (0 without a driver)."""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


@pytest.mark.gpu
def test_two_ranks_on_two_gpus_use_nccl(tmp_path: Path) -> None:
    """NCCL on GPUs, one GPU per rank: both ranks' steps and all-reduces recorded, each on its own GPU."""
    if _gpu_count() < 2:
        pytest.skip("needs two NVIDIA GPUs (NCCL will not put two ranks on one GPU)")
    require_framework("pytorch")
    args = [*SMALL, "--device", "gpu", "--epochs", "2", "--limit", "64", "--workers", "1"]
    result = run_tracer("profile", *args, "--out", str(tmp_path), timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    folder = _one_run(tmp_path)
    record = folder.read_record()
    assert [(r.backend, r.device) for r in record.rank_infos] == [("nccl", "cuda:0"), ("nccl", "cuda:1")]
    collectives = folder.samples(schema.COLLECTIVES_TABLE)
    assert collectives is not None and set(collectives[schema.RANK].to_pylist()) == {0, 1}
