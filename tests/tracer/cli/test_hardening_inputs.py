"""Issue 12, defects 5-9 and the misleading list: every bad value or path is one line and exit 2.

Real `tracer` processes, real files; the checks run before any training, so these are quick."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from PIL import Image

from tests.conftest import edit_spec, run_tracer
from tracer.campaign.local import kill_leftover
from tracer.campaign.record import CellEntry
from tracer.core import options
from tracer.core.errors import UserError
from tracer.core.frameworks import framework_info
from tracer.core.runfolder import RunFolder
from tracer.measure import dataset, environments

PROFILE = ["profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", "small"]


def assert_one_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [ln for ln in result.stderr.splitlines() if ln.strip() and not ln.startswith("tracer: warning")]
    assert len(lines) == 1 or lines[0].startswith("usage:"), result.stderr
    for word in words:
        assert word in lines[-1], (word, lines[-1])
    return lines[-1]


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--sample-hz", "nan"),
        ("--timeout", "nan"),
        ("--lr", "nan"),
        ("--lr", "inf"),
        ("--momentum", "-1"),
        ("--workers", "99999999999999999999"),
        ("--workers", "-1"),
        ("--workers", str(options.MAX_PARALLEL + 1)),
        ("--threads", "-2"),
        ("--threads", "1000000"),
        ("--batch", "1000000000"),
        ("--image-size", "1000000"),
    ],
)
def test_non_finite_and_absurd_values_are_refused(flag: str, value: str, tmp_path: Path) -> None:
    result = run_tracer(*PROFILE, flag, value, "--out", str(tmp_path / "runs"))
    assert_one_line(result, flag)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_no_prefix_matching_of_options(tmp_path: Path) -> None:
    result = run_tracer(*PROFILE, "--epoch", "2", "--out", str(tmp_path))
    assert result.returncode == 2 and "unrecognized option --epoch (did you mean --epochs?)" in result.stderr


def test_a_mistyped_option_is_named_before_a_missing_required_one(tmp_path: Path) -> None:
    """`--framwork pytorch` said '--framework required'; it names the typo and what it looks like."""
    result = run_tracer("profile", "--framwork", "pytorch", "--out", str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "unrecognized option --framwork (did you mean --framework?)" in result.stderr


@pytest.mark.parametrize("args", [("analyze", "x", "--top", "-5"), ("compare", "a", "b", "--top", "0")])
def test_top_is_bounded(args: tuple[str, ...]) -> None:
    assert_one_line(run_tracer(*args), "--top")


def test_view_size_is_bounded() -> None:
    pytest.importorskip("PySide6")
    assert_one_line(run_tracer("view", "--size", "0x0", "--screenshot", "/tmp/x.png"), "--size")


@pytest.mark.parametrize("ref", ["", "-"])
def test_show_of_an_empty_or_dash_ref_picks_no_run(ref: str, tiny_pytorch_run: RunFolder) -> None:
    assert_one_line(run_tracer("show", ref, "--runs", str(tiny_pytorch_run.path.parent)), "names no run")


def test_unwritable_outputs_are_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for out in (a_file, Path("/proc/runs")):
        assert_one_line(run_tracer(*PROFILE, "--out", str(out)), str(out))
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}))
    assert_one_line(run_tracer("import", str(trace), "--out", str(a_file)), str(a_file))


def test_export_trace_never_writes_a_folder_or_the_runs_own_files(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    run = tiny_pytorch_run
    before = hashlib.md5(run.run_json.read_bytes()).hexdigest()
    assert_one_line(run_tracer("export-trace", str(run.path), str(tmp_path)), "is a folder")
    assert not list(tmp_path.parent.glob(tmp_path.name + ".tmp"))
    assert_one_line(run_tracer("export-trace", str(run.path), str(run.run_json)), "inside the run folder")
    assert hashlib.md5(run.run_json.read_bytes()).hexdigest() == before
    assert_one_line(run_tracer("compare", str(run.path), str(run.path), "--csv", str(tmp_path)), "is a folder")


def test_compare_warns_on_different_settings(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    other = tmp_path / (tiny_pytorch_run.run_id + "-limit8")
    shutil.copytree(tiny_pytorch_run.path, other)
    record = json.loads((other / "run.json").read_text())
    edit_spec(record, limit=8)
    (other / "run.json").write_text(json.dumps(record))
    result = run_tracer("compare", str(tiny_pytorch_run.path), str(other))
    assert result.returncode == 0, result.stderr
    assert "differ in settings (limit 16 vs 8)" in result.stderr


def test_analyze_json_is_strict_json(tiny_pytorch_run: RunFolder) -> None:
    result = run_tracer("analyze", str(tiny_pytorch_run.path), "--format", "json")
    assert result.returncode == 0, result.stderr

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in analyze --format json")

    json.loads(result.stdout, parse_constant=refuse)


def test_dataset_that_is_a_file_and_one_class_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "images.zip"
    a_file.write_bytes(b"PK")
    with pytest.raises(UserError, match="is a file"):
        dataset.validate_folder(a_file)
    (tmp_path / "one" / "fire").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "one" / "fire" / "a.png")
    assert dataset.validate_folder(tmp_path / "one") == ["fire"]
    assert "has one class (fire)" in capsys.readouterr().err


def test_unreadable_dataset_folder(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder: an unreadable one cannot be made here")
    (tmp_path / "d" / "fire").mkdir(parents=True)
    (tmp_path / "d").chmod(0)
    try:
        with pytest.raises(UserError, match="not readable"):
            dataset.validate_folder(tmp_path / "d")
    finally:
        (tmp_path / "d").chmod(0o755)


@pytest.mark.parametrize(
    "event,words",
    [
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 99999999999999999999999999, "dur": 1}, "out of range"),
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": -50}, "out of range"),
        ({"ph": "X", "cat": "kernel", "name": "k", "ts": 10}, "has no dur"),
    ],
)
def test_broken_kineto_events_are_one_line(event: dict, words: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [event]}))
    assert_one_line(run_tracer("import", str(trace), "--out", str(tmp_path / "runs")), words)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_random_bytes_nsys_rep_is_one_line(tmp_path: Path) -> None:
    from tracer.measure.tracing.nsys import nsys_if_any

    if nsys_if_any() is None:
        pytest.skip("no Nsight Systems (nsys) here to read a .nsys-rep with")
    rep = tmp_path / "bad.nsys-rep"
    rep.write_bytes(os.urandom(100_000))
    assert_one_line(run_tracer("import", str(rep), "--out", str(tmp_path / "runs")), str(rep))


def test_plan_that_is_not_utf8(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_bytes(b'name = "x\xff\xfe"\n')
    assert_one_line(run_tracer("campaign", str(plan), "--dry-run"), "not UTF-8")


def test_a_hung_python_probe_is_stopped_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "python"
    pid_file = tmp_path / "child.pid"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    script.chmod(0o755)
    monkeypatch.setattr(environments, "PROBE_TIMEOUT_S", 2)
    started = time.monotonic()
    with pytest.raises(UserError, match="did not answer within 2 s"):
        environments.resolve_python("pytorch", str(script))
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5  # SIGKILL is sent; on a loaded machine the kernel takes a moment
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the probe's child outlived it"
        time.sleep(0.05)
    framework_info("pytorch")


def test_resumed_campaign_ends_a_worker_of_the_cut_cell(tmp_path: Path) -> None:
    """A worker still alive (its tracer SIGKILLed with the campaign) is found by its staging folder."""
    staging = tmp_path / "campaigns" / "c" / "staging" / "cell-1"
    staging.mkdir(parents=True)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(staging / "run-x")])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", str(tmp_path / "other")])
    try:
        kill_leftover(CellEntry("cell-1", "fp", pid=None), staging)
        deadline = time.monotonic() + 10  # psutil may reap it first: look at the pid, not Popen's code
        while psutil.pid_exists(worker.pid) and psutil.Process(worker.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the cut cell's worker is still alive"
            time.sleep(0.1)
        assert bystander.poll() is None
    finally:
        for p in (worker, bystander):
            p.kill()
            p.wait()


def test_report_rows_never_pool_runs_of_different_settings(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    from analyzers.report import collect_runs
    from analyzers.report.tables import table_rows

    shutil.copytree(tiny_pytorch_run.path, tmp_path / tiny_pytorch_run.run_id)
    other = tmp_path / (tiny_pytorch_run.run_id + "-limit8")
    shutil.copytree(tiny_pytorch_run.path, other)
    record = json.loads((other / "run.json").read_text())
    edit_spec(record, limit=8)
    (other / "run.json").write_text(json.dumps(record))
    runs, _ = collect_runs([tmp_path])
    rows = table_rows(runs, "cpu")
    assert sorted(r.settings for r in rows) == ["16 images, 64 px, 2 ep", "8 images, 64 px, 2 ep"]
    assert all(r.runs_ok == 1 for r in rows)


def test_nsys_trace_with_negative_durations_is_refused(real_fixtures: Path, tmp_path: Path) -> None:
    import sqlite3

    source = real_fixtures / "extra-p" / "con_kernel.sqlite"
    if not source.exists():
        pytest.skip(f"{source} is missing")
    damaged = tmp_path / "negative.sqlite"
    shutil.copyfile(source, damaged)
    with sqlite3.connect(damaged) as db:
        changed = db.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 50000 WHERE rowid IN "
            "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)"
        ).rowcount
    assert changed == 1
    line = assert_one_line(run_tracer("import", str(damaged), "--out", str(tmp_path / "runs")), "end before")
    assert "1 kernels events" in line
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    assert run_tracer("import", str(source), "--out", str(tmp_path / "ok")).returncode == 0
