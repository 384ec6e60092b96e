"""The local runner with real tiny runs: completes, resumes after SIGKILL, records failures and goes on."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import require_framework
from tests.tracer.campaign.conftest import (
    KNOBS,
    TINY_PYTORCH,
    TINY_TWO_FRAMEWORKS,
    assert_one_ok_run_per_cell,
    campaign_command,
    record,
    run_campaign,
    runs_by_cell,
    write_plan,
)
from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder, list_runs

pytestmark = pytest.mark.slow


def test_two_framework_plan_completes_and_writes_the_epoch_table(tmp_path: Path) -> None:
    require_framework("pytorch")
    require_framework("tensorflow")
    out = tmp_path / "runs"
    plan = write_plan(tmp_path, TINY_TWO_FRAMEWORKS)
    dry = run_campaign(str(plan), "--dry-run", "--out", str(out))
    assert dry.returncode == 0, dry.stderr
    assert "2 runs in plan tiny2, 2 to run" in dry.stdout
    result = run_campaign(str(plan), "--out", str(out), "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[2/2]" in result.stderr
    assert_one_ok_run_per_cell(out, "tiny2", 2)
    with (out / "campaigns" / "tiny2" / "epoch_times.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["framework"], r["model"]) for r in rows} == {("pytorch", "alexnet"), ("tensorflow", "alexnet")}
    assert all(float(r["steady_epoch_s"]) > 0 for r in rows)
    again = run_campaign(str(plan), "--out", str(out), "--no-report")
    assert again.returncode == 0 and "2 done already, 0 to run" in again.stderr
    assert len(list_runs(out)) == 2
    dry = run_campaign(str(plan), "--dry-run", "--out", str(out))
    assert "0 to run" in dry.stdout and "?" not in dry.stdout.split("\n")[-3]


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_killed_campaign_resumes_with_exactly_one_run_per_cell(tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    plan = write_plan(tmp_path, TINY_PYTORCH)
    rec_path = out / "campaigns" / "tiny" / "campaign.json"
    proc = subprocess.Popen(campaign_command(str(plan), "--out", str(out), "--no-report"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:

        def second_cell_training() -> bool:
            if not rec_path.exists():
                return False
            cells = json.loads(rec_path.read_text())["cells"]
            running = [e for e in cells.values() if e["state"] == "running" and e["pid"]]
            done = [e for e in cells.values() if e["state"] == "ok"]
            if not done or not running:
                return False
            stage = out / "campaigns" / "tiny" / "staging" / running[0]["cell_id"]
            return any(RunFolder(p).events_path.exists() for p in stage.glob("*"))

        _wait_for(second_cell_training, 300, "the second cell to start training")
        running = next(e for e in record(out, "tiny")["cells"].values() if e["state"] == "running")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the orphaned `tracer profile` is told to stop when its parent dies (PR_SET_PDEATHSIG)
    _wait_for(lambda: not psutil.pid_exists(running["pid"]), 60, "the orphaned profile process to end")

    result = run_campaign(str(plan), "--out", str(out), "--no-report")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming: {running['cell_id']}: interrupted mid-run" in result.stderr
    assert_one_ok_run_per_cell(out, "tiny", 4)
    entry = record(out, "tiny")["cells"][running["cell_id"]]
    assert entry["attempts"] == 2 and entry["history"][0]["state"] == "interrupted"
    superseded = list((out / "campaigns" / "tiny" / "superseded").iterdir())
    assert len(superseded) == 1
    # issue 27, item 9: told to stop by SIGTERM, the cut run finalised itself (`interrupted`, not `running`)
    assert RunFolder(superseded[0]).read_record().outcome.status is RunStatus.INTERRUPTED


def test_failing_cell_is_recorded_retried_and_the_rest_finishes(tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    text = (
        'name = "faulty"\nframeworks = ["pytorch"]\nmodels = ["alexnet", "mobilenet_v2"]\ndatasets = ["small"]\n'
        + KNOBS
        + 'inject_fault = ["raise@1", ""]\n\n[[exclude]]\nmodel = "alexnet"\ninject_fault = ""\n\n'
        + '[[exclude]]\nmodel = "mobilenet_v2"\ninject_fault = "raise@1"\n'
    )
    plan = write_plan(tmp_path, text)
    result = run_campaign(str(plan), "--out", str(out), "--no-report", "--retry", "1")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "(will retry)" in result.stderr and "1 ok, 1 failed" in result.stderr
    cells = record(out, "faulty")["cells"]
    bad = cells["pytorch-alexnet-small-cpu-b1-e1-injectfaultraise-1"]
    good = cells["pytorch-mobilenet_v2-small-cpu-b1-e1-injectfaultnone"]
    assert bad["state"] == "failed" and bad["attempts"] == 2 and "injected fault" in bad["cause"]
    assert good["state"] == "ok"
    groups = runs_by_cell(out)
    assert {k: len(v) for k, v in groups.items()} == {bad["cell_id"]: 1, good["cell_id"]: 1}
    assert len(list((out / "campaigns" / "faulty" / "superseded").iterdir())) == 1  # the first failed attempt
    # a restart without --retry leaves the failure be; with it, runs the cell again
    again = run_campaign(str(plan), "--out", str(out), "--no-report")
    assert again.returncode == 1 and "0 to run" in again.stderr


def test_plan_errors_name_the_line_on_the_command_line(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, 'frameworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["small"]\nbatch = 2\n')
    result = run_campaign(str(plan), "--dry-run", "--out", str(tmp_path))
    assert result.returncode == 2
    assert f"tracer: error: {plan}:4: unknown key 'batch'" in result.stderr
    assert os.listdir(tmp_path) == ["plan.toml"]
