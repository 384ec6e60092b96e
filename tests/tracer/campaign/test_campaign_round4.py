"""Issue 56, "Hardening, round four": a campaign record is read as untrusted input. A real `tracer campaign`
process on a record whose cell names a run folder outside `--out`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tracer.campaign.conftest import KNOBS, run_campaign, write_plan
from tracer.campaign.plan import parse_plan

ONE_CELL = 'name = "forged"\nframeworks = ["pytorch"]\nmodels = ["alexnet"]\ndatasets = ["small"]\nepochs = 1\n' + KNOBS


@pytest.mark.parametrize("run_id", ["../victimdir", "/tmp/../victimdir", ".."])
def test_14_a_record_naming_a_folder_outside_out_is_refused(run_id: str, tmp_path: Path) -> None:
    """A failed cell whose record says `"run_id": "../victimdir"`: `--retry` would supersede (move) that
    folder; the record is refused in one line and the folder outside `--out` stays where it is."""
    plan = write_plan(tmp_path, ONE_CELL)
    (cell,) = parse_plan(ONE_CELL, plan).cells
    out = tmp_path / "runs"
    victim = tmp_path / "victimdir"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine")
    record = out / "campaigns" / "forged" / "campaign.json"
    record.parent.mkdir(parents=True)
    entry = {"cell_id": cell.cell_id, "fingerprint": cell.fingerprint(), "state": "failed", "attempts": 1,
             "run_id": run_id, "status": "failed"}  # fmt: skip
    record.write_text(json.dumps({"format_version": 1, "name": "forged", "cells": {cell.cell_id: entry}}))
    result = run_campaign(str(plan), "--out", str(out), "--retry", "1", "--no-report")
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no folder name" in lines[0], result.stderr
    assert (victim / "precious.txt").read_text() == "mine"
