"""The Slurm runner against a real single-node Slurm started by the test (slurmcluster.py): one job per
cell, a submitter SIGKILLed mid-campaign and started again, a scancel'ed job resubmitted once, Ctrl-C
with its confirmation, --detach; and --dry-run's sbatch settings, which need no Slurm."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ctrl_c_reaches_python, require_framework
from tests.tracer.campaign.conftest import (
    KNOBS,
    TINY_PYTORCH,
    assert_one_ok_run_per_cell,
    campaign_command,
    record,
    run_campaign,
    write_plan,
)
from tests.tracer.campaign.slurmcluster import LocalSlurm, running_slurm
from tracer.core.runfolder import list_runs


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with running_slurm() as cluster:
        yield cluster


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _cells(path: Path) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(path.read_text())["cells"]  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def test_dry_run_prints_each_cells_sbatch_settings(tmp_path: Path) -> None:
    plan = write_plan(
        tmp_path,
        'name = "mixed"\nframeworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["small"]\n'
        'devices = ["cpu", "gpu"]\n' + KNOBS + "timeout = 1200\ngpus = 2\n",
    )
    out = tmp_path / "runs"
    args = ["--dry-run", "--out", str(out), "--slurm", "--partition", "short", "--account", "lab"]
    result = run_campaign(str(plan), *args)
    assert result.returncode == 0, result.stderr
    lines = {ln.split(": ", 1)[0]: ln.split(": ", 1)[1] for ln in result.stdout.splitlines() if ": --job-name=" in ln}
    assert set(lines) == {"pytorch-alexnet-small-cpu-b1-e1", "pytorch-alexnet-small-gpu-b1-e1"}
    for cell_id, settings in lines.items():
        assert f"--job-name=tracer:mixed:{cell_id}:1 " in settings
        assert "--exclusive" in settings and "--partition=short" in settings and "--account=lab" in settings
        assert "--time=00:30:00" in settings  # the plan's timeout (20 min) plus the 10 min margin
    assert "--gres" not in lines["pytorch-alexnet-small-cpu-b1-e1"]
    assert "--gres=gpu:2" in lines["pytorch-alexnet-small-gpu-b1-e1"]
    forced = run_campaign(str(plan), *args, "--time", "2:00:00", "--gpus-per-job", "1")
    assert "--time=2:00:00" in forced.stdout and "--gres=gpu:1" in forced.stdout
    assert not out.exists()  # a dry run writes nothing
    for bad, words in (
        (["--slurm", "--time", "5h"], "--time '5h' is no Slurm time"),
        (["--partition", "short"], "--partition goes with --slurm"),
        (["--slurm", "--max-jobs", "0"], "--max-jobs must be 1 or more"),
        (["--slurm", "--ray", "auto"], "choose one"),
        (["--resume"], "--resume: campaign 'mixed' has no record"),
    ):
        refused = run_campaign(str(plan), *([] if "--resume" in bad else ["--dry-run"]), "--out", str(out), *bad)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_killed_submitter_and_a_cancelled_job_end_with_one_run_per_cell(tmp_path: Path, slurm: LocalSlurm) -> None:
    """4 cells, one Slurm job each, one at a time on the node (--exclusive). The submitter is SIGKILLed once
    2 cells are done and 2 are in Slurm, one of them training; that one's job is then scancel'ed. Run
    again, the command follows the job still queued, resubmits the cancelled cell once with Slurm's reason,
    and trains nothing twice."""
    require_framework("pytorch")
    out = tmp_path / "runs"
    plan = write_plan(tmp_path, TINY_PYTORCH)
    rec_path = out / "campaigns" / "tiny" / "campaign.json"
    command = campaign_command(str(plan), "--out", str(out), "--slurm", "--no-report")
    proc = subprocess.Popen(command, env=slurm.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:

        def two_done_one_training() -> bool:
            cells = list(_cells(rec_path).values())
            if sum(e["state"] == "ok" for e in cells) != 2 or sum(bool(e["job_id"]) for e in cells) != 4:
                return False
            states = slurm.jobs()
            return any(
                e["state"] == "running" and states.get(e["job_id"], ("", ""))[1] == "RUNNING"
                and any((out / "campaigns" / "tiny" / "staging" / e["cell_id"]).glob("*/run.json"))
                for e in cells
            )  # fmt: skip

        _wait_for(two_done_one_training, 300, "2 cells done and a third training")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = _cells(rec_path)
    left = [e for e in before.values() if e["state"] == "running"]
    assert len(left) == 2 and all(e["job_id"] for e in before.values())
    states = slurm.jobs()
    (cancelled,) = [e for e in left if states[e["job_id"]][1] == "RUNNING"]
    (followed,) = [e for e in left if e is not cancelled]
    slurm.run("scancel", cancelled["job_id"])

    result = subprocess.run(command, env=slurm.env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "following 2 job(s) submitted before" in result.stderr
    assert_one_ok_run_per_cell(out, "tiny", 4)
    after = record(out, "tiny")["cells"]
    jobs = {cid: e["job_id"] for cid, e in after.items()}
    assert len(set(jobs.values())) == 4  # a job id per cell, each cell's own
    for cid, entry in before.items():
        if entry["state"] == "ok" or cid == followed["cell_id"]:  # neither submitted nor trained again
            assert after[cid]["job_id"] == entry["job_id"] and after[cid]["attempts"] == 1
            assert after[cid]["history"] == [] and after[cid]["resubmits"] == 0
    again = after[cancelled["cell_id"]]
    assert again["attempts"] == 2 and again["resubmits"] == 1 and again["job_id"] != cancelled["job_id"]
    (first,) = again["history"]
    assert first["job_id"] == cancelled["job_id"] and first["state"] == "requeued"
    assert f"Slurm job {cancelled['job_id']} ended CANCELLED" in first["cause"]
    # the cancelled attempt's training was cut short: its run says so, kept apart in superseded/
    (cut,) = (out / "campaigns" / "tiny" / "superseded").iterdir()
    assert json.loads((cut / "run.json").read_text())["outcome"]["status"] == "interrupted"
    assert first["run_id"] == cut.name and first["status"] == "interrupted"
    states = slurm.jobs()
    assert {states[j][1] for j in jobs.values()} == {"COMPLETED"}
    assert states[cancelled["job_id"]][1] == "CANCELLED"
    assert len(list_runs(out)) == 4


@pytest.mark.slow
def test_detach_then_ctrl_c_cancels_the_jobs_after_confirmation(tmp_path: Path, slurm: LocalSlurm) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    plan = write_plan(tmp_path, TINY_PYTORCH.replace('"mobilenet_v2"', "").replace("[1, 2]", "[1]"))
    base = ["--out", str(out), "--slurm", "--no-report"]
    detached = subprocess.run(
        campaign_command(str(plan), *base, "--detach"), env=slurm.env, capture_output=True, text=True, timeout=120
    )
    assert detached.returncode == 0, detached.stderr[-3000:]
    (entry,) = record(out, "tiny")["cells"].values()
    job_id = entry["job_id"]
    assert entry["state"] == "running" and f"detached from Slurm job(s) {job_id}" in detached.stderr
    assert slurm.jobs()[job_id][1] in ("PENDING", "RUNNING")

    log = tmp_path / "follow.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            campaign_command(str(plan), *base), env=slurm.env, stdin=subprocess.PIPE, stderr=err,
            stdout=subprocess.DEVNULL, text=True, preexec_fn=ctrl_c_reaches_python,
        )  # fmt: skip
    try:
        _wait_for(lambda: "following 1 job(s)" in log.read_text(), 60, "the command to follow the job")
        assert proc.stdin is not None
        proc.stdin.write("y\n")
        proc.stdin.flush()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
    text = log.read_text()
    assert f"cancel the campaign's 1 Slurm job(s) ({job_id})? [y/N]" in text
    assert f"cancelled job(s) {job_id}" in text
    _wait_for(lambda: slurm.jobs()[job_id][1] == "CANCELLED", 30, "the job to be cancelled")
    (entry,) = record(out, "tiny")["cells"].values()
    assert entry["state"] == "interrupted" and entry["history"][-1]["state"] == "cancelled"


@pytest.mark.slow
def test_failed_runs_are_recorded_not_resubmitted_and_max_jobs_holds(tmp_path: Path, slurm: LocalSlurm) -> None:
    """`tracer profile` refuses both cells (no such interpreter): each job ends FAILED, which is the run's
    failure, not the cluster's; the cells are recorded as the local runner records them. With --max-jobs 1
    the second job is submitted only once the first has ended."""
    text = TINY_PYTORCH.replace("[1, 2]", "[1]").replace('"tiny"', '"refused"')
    plan = write_plan(tmp_path, text + '\n[python]\npytorch = "/nonexistent/python"\n')
    out = tmp_path / "runs"
    result = subprocess.run(
        campaign_command(str(plan), "--out", str(out), "--slurm", "--no-report", "--max-jobs", "1"),
        env=slurm.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    entries = list(record(out, "refused")["cells"].values())
    assert len(entries) == 2 and not list_runs(out)
    for entry in entries:
        assert entry["state"] == "failed" and entry["attempts"] == 1 and entry["resubmits"] == 0
        assert f"Slurm job {entry['job_id']} ended FAILED" in entry["cause"]
        assert "--python /nonexistent/python: no such interpreter" in entry["cause"]
        assert slurm.jobs()[entry["job_id"]][1] == "FAILED"
    first, second = sorted(int(e["job_id"]) for e in entries)
    times = slurm.run("squeue", "-h", "-t", "all", "-j", f"{first},{second}", "-o", "%i|%V|%e").stdout
    when = {int(i): (submitted, ended) for i, submitted, ended in (ln.split("|") for ln in times.split())}
    assert when[second][0] >= when[first][1]  # ISO times: submitted after the first ended
