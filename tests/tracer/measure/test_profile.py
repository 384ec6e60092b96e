"""`tracer profile` end to end with real PyTorch: a good run, and every way a run can end badly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import TINY, ctrl_c_reaches_python, require_framework, run_tracer
from tracer.core.runfolder import RunFolder, list_runs
from tracer.measure.environments import env_python


def torchvision_params(model: str) -> int:
    code = (
        f"import torchvision; m = torchvision.models.{model}(weights=None, num_classes=3); "
        "print(sum(p.numel() for p in m.parameters() if p.requires_grad))"
    )
    out = subprocess.run([str(env_python("pytorch")), "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_tiny_run_is_complete(tiny_pytorch_run: RunFolder) -> None:
    folder = tiny_pytorch_run
    record = folder.read_record()
    assert record.outcome.status.value == "ok"
    epochs = folder.epochs()
    assert [e.epoch for e in epochs] == [1, 2]
    assert all(e.images == 16 and e.end_ns > e.start_ns for e in epochs)
    assert record.model is not None and record.model.trainable_params == torchvision_params("alexnet")
    assert record.model.total_params >= record.model.trainable_params
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 5
    assert max(process.column("threads").to_pylist()) >= 2
    assert (folder.samples_dir / "process.parquet").exists() and not (folder.samples_dir / "process.csv").exists()
    assert record.sampling is not None and record.sampling.samples >= process.num_rows
    assert 80 <= record.sampling.achieved_period_ms <= 200  # asked 10 Hz
    assert record.environment.framework_versions["torch"].startswith("2.")
    assert record.environment.nvml != ""  # "not available (...)" or "ok": recorded either way
    assert record.dataset is not None and record.dataset.images == 791 and record.dataset.images_used == 16
    assert record.worker_pid is not None and record.wall_end_ns and record.wall_end_ns > record.wall_start_ns
    assert folder.worker_log.exists()
    kinds = [e["kind"] for e in folder.events()]
    assert kinds[0] == "start" and kinds[-1] == "end"


def test_runs_and_show(tiny_pytorch_run: RunFolder) -> None:
    out = str(tiny_pytorch_run.path.parent)
    listing = run_tracer("runs", "--runs", out)
    assert listing.returncode == 0 and tiny_pytorch_run.run_id in listing.stdout and "ok" in listing.stdout
    shown = run_tracer("show", tiny_pytorch_run.run_id.split("-", 2)[2], "--runs", out)
    assert shown.returncode == 0
    for expected in ("epoch time (steady)", "first epoch", "images/s", "CPU %", "peak RSS", "threads", "57,016,131"):
        assert expected in shown.stdout
    missing = run_tracer("show", "no-such-run", "--runs", out)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def start_profile(out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tracer", "profile", "--framework", "pytorch", "--model", "alexnet"]
    return subprocess.Popen(
        [*cmd, *TINY, *extra, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches_python,
    )


def wait_for(predicate: Callable[[], bool], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def events_of(out: Path) -> list[dict[str, object]]:
    runs = list(out.glob("*/events.jsonl"))
    if not runs:
        return []
    return [json.loads(line) for line in runs[0].read_text().splitlines() if line.endswith("}")]


def test_sigkill_mid_epoch_keeps_samples(tmp_path: Path) -> None:
    require_framework("pytorch")
    proc = start_profile(tmp_path, "--limit", "400", "--epochs", "3")
    wait_for(lambda: any(e["kind"] == "progress" for e in events_of(tmp_path)))
    time.sleep(1.0)
    (folder,) = list_runs(tmp_path)
    os.kill(int(folder.worker_pid_path.read_text()), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "killed" in err and "SIGKILL" in err
    record = folder.read_record()
    assert record.outcome.status.value == "killed" and record.outcome.signal == "SIGKILL"
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 10
    assert folder.epochs() == []  # died in epoch 1: nothing finished, nothing invented


def test_timeout_ends_as_timeout(tmp_path: Path) -> None:
    require_framework("pytorch")
    proc = start_profile(tmp_path, "--timeout", "8", "--inject-fault", "hang@1")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "timeout" in err
    (folder,) = list_runs(tmp_path)
    record = folder.read_record()
    assert record.outcome.status.value == "timeout" and "--timeout 8" in record.outcome.cause
    assert folder.epochs() == []
    process = folder.samples("process")
    assert process is not None and process.num_rows >= 20  # 8 s at 10 Hz, minus start-up


def test_ctrl_c_ends_as_interrupted(tmp_path: Path) -> None:
    require_framework("pytorch")
    proc = start_profile(tmp_path, "--inject-fault", "hang@1")
    wait_for(lambda: any(e["kind"] == "epoch_start" for e in events_of(tmp_path)))
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130  # 128 + SIGINT, as an interrupted command run exits (issue 56 item 18)
    (folder,) = list_runs(tmp_path)
    assert folder.read_record().outcome.status.value == "interrupted"


@pytest.mark.parametrize(
    ("fault", "status", "text"),
    [("raise@1", "failed", "RuntimeError: injected fault"), ("segv@1", "failed", "SIGSEGV")],
)
def test_worker_failures_are_recorded(tmp_path: Path, fault: str, status: str, text: str) -> None:
    require_framework("pytorch")
    result = run_tracer(
        "profile",
        "--framework",
        "pytorch",
        "--model",
        "alexnet",
        *TINY,
        "--inject-fault",
        fault,
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 1
    (folder,) = list_runs(tmp_path)
    outcome = folder.read_record().outcome
    assert outcome.status.value == status and text in outcome.cause
    assert any("injected" in line for line in outcome.stderr_tail)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--framework", "caffe", "--case", "SimpleBig"], "unknown framework 'caffe'"),
        (["--framework", "pytorch", "--model", "lenet", "--dataset", "small"], "unknown model 'lenet'"),
        (["--framework", "pytorch", "--case", "HugeTiny"], "unknown case 'HugeTiny'"),
        (["--framework", "pytorch", "--model", "alexnet", "--dataset", "/no/such/folder"], "does not exist"),
        (["--framework", "pytorch", "--case", "SimpleBig", "--device", "tpu"], "unknown device 'tpu'"),
        (["--framework", "pytorch", "--case", "SimpleBig", "--trace", "magic"], "unknown trace backend"),
        (["--framework", "pytorch", "--case", "SimpleBig", "--batch", "0"], "--batch must be at least 1"),
        (["--framework", "pytorch"], "say what to train"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_tracer("profile", *args, "--out", str(tmp_path))
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not list(tmp_path.iterdir()), "no run folder for a run that never started"


def test_missing_environment_says_the_fix(tmp_path: Path) -> None:
    env = dict(os.environ, TRACER_CACHE=str(tmp_path / "empty-cache"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracer",
            "profile",
            "--framework",
            "paddle",
            "--case",
            "SimpleBig",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "tracer env create paddle" in result.stderr
    bad_python = run_tracer("profile", "--framework", "pytorch", "--case", "SimpleBig", "--python", "/no/python")
    assert bad_python.returncode == 2 and "no such interpreter" in bad_python.stderr
    wrong_python = run_tracer("profile", "--framework", "pytorch", "--case", "SimpleBig", "--python", "/usr/bin/true")
    assert wrong_python.returncode == 2
