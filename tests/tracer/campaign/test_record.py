"""The campaign record's bookkeeping after kills at awkward instants, with hand-made run folders."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tracer.campaign.plan import Cell, parse_plan
from tracer.campaign.record import FAILED, OK, Campaign
from tracer.core.errors import UserError
from tracer.core.records import EnvironmentInfo, Outcome, RunRecord, RunSpec, RunStatus
from tracer.core.runfolder import RunFolder, list_runs

PLAN = 'name = "rec"\nframeworks = ["pytorch"]\nmodels = ["alexnet", "vgg16"]\ndatasets = ["small"]\n'


def fake_run(parent: Path, cell: Cell, status: RunStatus) -> RunFolder:
    folder = RunFolder.create(parent, f"run-{cell.model}-{time.time_ns()}")
    env = EnvironmentInfo("host", "linux", "cpu", 2, 2, 1024.0, "python")
    spec = RunSpec(cell.framework, cell.model, cell.dataset)
    folder.write_record(RunRecord.built_in(folder.run_id, spec, env, Outcome(status), time.time_ns(), time.time_ns()))
    return folder


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    return Campaign(parse_plan(PLAN, tmp_path / "plan.toml"), tmp_path / "runs").open()


def reopen(c: Campaign) -> Campaign:
    c.close()
    return Campaign(c.plan, c.out_dir).open()


def test_a_run_moved_but_not_recorded_is_adopted_not_redone(campaign: Campaign) -> None:
    cell = campaign.plan.cells[0]
    campaign.begin(cell)
    fake_run(campaign.staging(cell.cell_id), cell, RunStatus.OK)
    campaign.finish(cell)
    campaign.cells[cell.cell_id].state = "running"  # as if killed between the move and the record update
    campaign.save()
    c = reopen(campaign)
    notes = c.recover()
    assert "adopted" in notes[0] and c.cells[cell.cell_id].state == OK
    assert [x.cell_id for x in c.todo(retry_failed=False)] == [c.plan.cells[1].cell_id]
    assert len(list_runs(c.out_dir)) == 1


def test_a_cut_short_run_is_superseded_and_redone(campaign: Campaign) -> None:
    cell = campaign.plan.cells[0]
    campaign.begin(cell)
    fake_run(campaign.staging(cell.cell_id), cell, RunStatus.INTERRUPTED)
    c = reopen(campaign)
    c.recover()
    assert [x.cell_id for x in c.todo(retry_failed=False)] == [x.cell_id for x in c.plan.cells]
    assert len(list((c.dir / "superseded").iterdir())) == 1 and not list_runs(c.out_dir)
    assert c.begin(cell).attempts == 2


def test_retrying_a_failed_cell_keeps_one_folder_in_out(campaign: Campaign) -> None:
    cell = campaign.plan.cells[1]
    campaign.begin(cell)
    fake_run(campaign.staging(cell.cell_id), cell, RunStatus.FAILED)
    assert campaign.finish(cell).state == FAILED
    assert campaign.todo(retry_failed=False) == [campaign.plan.cells[0]]
    campaign.begin(cell)
    fake_run(campaign.staging(cell.cell_id), cell, RunStatus.OK)
    entry = campaign.finish(cell)
    assert entry.state == OK and entry.attempts == 2 and entry.history[0]["state"] == FAILED
    assert [f.run_id for f in list_runs(campaign.out_dir)] == [entry.run_id]


def test_no_run_folder_is_a_failure_with_the_cause(campaign: Campaign) -> None:
    cell = campaign.plan.cells[0]
    campaign.begin(cell)
    entry = campaign.finish(cell, "tracer profile exited with code 2: pytorch is not installed")
    assert entry.state == FAILED and "not installed" in entry.cause and entry.run_id is None


def test_one_process_at_a_time_and_changed_settings_are_refused(campaign: Campaign, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="already running"):
        Campaign(campaign.plan, campaign.out_dir).open()
    cell = campaign.plan.cells[0]
    campaign.begin(cell)
    fake_run(campaign.staging(cell.cell_id), cell, RunStatus.OK)
    campaign.finish(cell)
    campaign.close()
    changed = parse_plan(PLAN + "[knobs]\nlimit = 8\n", tmp_path / "plan.toml")
    with pytest.raises(UserError, match="other settings"):
        Campaign(changed, campaign.out_dir).open()
