"""How the Slurm runner files a cell whose job ended, for every kind of end (no Slurm needed: the job's
final state as Slurm reports it, and a hand-made run folder in the cell's staging folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tracer.campaign.test_record import PLAN, fake_run, reopen
from tracer.campaign.plan import parse_plan
from tracer.campaign.record import FAILED, OK, REQUEUED, RUNNING, Campaign
from tracer.campaign.slurm import UNKNOWN, JobState
from tracer.campaign.slurm_runner import has_job, settle
from tracer.core.records import RunStatus


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    return Campaign(parse_plan(PLAN, tmp_path / "plan.toml"), tmp_path / "runs").open()


@pytest.mark.parametrize(
    ("slurm_state", "run", "state", "again"),
    [
        ("CANCELLED", None, REQUEUED, True),  # scancel before the run began
        ("TIMEOUT", RunStatus.INTERRUPTED, REQUEUED, True),  # SIGTERM at the time limit
        ("NODE_FAIL", RunStatus.RUNNING, REQUEUED, True),  # the node died: the run never wrote its end
        ("PREEMPTED", RunStatus.KILLED, REQUEUED, True),
        (UNKNOWN, None, REQUEUED, True),  # forgotten by Slurm, nothing ran to its end
        ("FAILED", None, FAILED, False),  # `tracer profile` refused the cell
        ("FAILED", RunStatus.FAILED, FAILED, False),  # the framework crashed: the run's own failure
        ("COMPLETED", RunStatus.DIVERGED, FAILED, False),
        ("COMPLETED", RunStatus.OK, OK, False),
        (UNKNOWN, RunStatus.OK, OK, False),  # forgotten by Slurm, but its run finished
        ("CANCELLED", RunStatus.OK, OK, False),  # cancelled after its run had ended
    ],
)
def test_a_job_end_is_filed_by_who_ended_it(
    campaign: Campaign, slurm_state: str, run: RunStatus | None, state: str, again: bool
) -> None:
    cell = campaign.plan.cells[0]
    campaign.begin(cell, host="slurm")
    campaign.set_job(cell.cell_id, "41")
    if run is not None:
        fake_run(campaign.staging(cell.cell_id), cell, run)
    entry, resubmit = settle(campaign, cell, JobState("41", slurm_state, "None"), campaign.dir / "no.log")
    assert (entry.state, resubmit) == (state, again)
    if state == FAILED and run is not None:  # the run's own end, recorded as the local runner records it
        assert entry.status == run.value and entry.run_id is not None
    elif state != OK:
        assert f"Slurm job 41 ended {slurm_state}" in entry.cause
    if again:
        assert entry.resubmits == 1 and cell in campaign.todo(retry_failed=False)
        if run is None:
            assert entry.history[-1] == entry.history[-1] | {"state": "requeued", "job_id": "41"}


def test_a_second_cluster_end_is_the_cells_failure(campaign: Campaign) -> None:
    cell = campaign.plan.cells[0]
    for job_id, expected in (("7", REQUEUED), ("8", FAILED)):
        campaign.begin(cell, host="slurm")
        campaign.set_job(cell.cell_id, job_id)
        fake_run(campaign.staging(cell.cell_id), cell, RunStatus.INTERRUPTED)
        entry, _ = settle(campaign, cell, JobState(job_id, "NODE_FAIL"), campaign.dir / "no.log")
        assert entry.state == expected
    assert entry.attempts == 2 and entry.resubmits == 1 and "Slurm job 8 ended NODE_FAIL" in entry.cause
    assert entry.history[0]["job_id"] == "7" and "Slurm job 7 ended NODE_FAIL" in entry.history[0]["cause"]
    assert len(list((campaign.dir / "superseded").iterdir())) == 1  # the first attempt's cut-short run


def test_a_restart_leaves_cells_with_a_job_to_the_slurm_runner(campaign: Campaign) -> None:
    queued, lost = campaign.plan.cells
    for cell in (queued, lost):
        campaign.begin(cell, host="slurm")
    campaign.set_job(queued.cell_id, "12")  # `lost` was killed before its sbatch returned
    c = reopen(campaign)
    notes = c.recover(keep=has_job)
    assert c.cells[queued.cell_id].state == RUNNING and c.cells[queued.cell_id].job_id == "12"
    assert c.cells[lost.cell_id].state == "interrupted" and notes == [
        f"{lost.cell_id}: interrupted mid-run; will run again"
    ]
